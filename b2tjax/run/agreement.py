"""Where the processes of a step talk: they pool their rollout's parts, then check that they hold
the same batch.

A task never talks to other processes: its rollout (or evaluation) returns this process' share,
a `b2tjax.tasks.base.ProcessPart`, and `pool` makes everyone's result from everyone's shares, the
one place records and their scores cross processes (one gather of the episodes' results, one of a
few counts).

Every JAX process holds the whole global batch of a step (the data pipeline is global; rollout
records reach every host through `pool`) and lays it out alike (the packer and
`loss_positions` are pure functions of the records), so the step's programs get one shape
everywhere without talking. What is left to agree on is that premise: once per step, before the
update, the trainer compares a few ints of the batch over the processes. A process that held
another batch would otherwise train on other rows or hang the pod in a collective of another shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TypeVar

from b2tjax.tasks.base import ProcessPart
from rollout.hosts import agree, gather_objects, merge_by_owner

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class StepShape:
    """What every process must see alike of a step's batch (records: GRPO records or SFT traces)."""

    records: int
    tokens: int
    longest: int

    @classmethod
    def of(cls, lengths: Iterable[int]) -> StepShape:
        lengths = list(lengths)
        return cls(len(lengths), sum(lengths), max(lengths, default=0))


def agree_step(shape: StepShape) -> StepShape:
    """`shape`, once every process has shown the same one (one allgather of a few ints)."""
    everyone = agree(dataclasses.astuple(shape))
    if (everyone != everyone[0]).any():
        rows = ", ".join(f"process {p}: {StepShape(*map(int, row))}" for p, row in enumerate(everyone))
        raise RuntimeError(f"the processes hold different batches of one step ({rows})")
    return shape


def pool(part: ProcessPart[T]) -> T:
    """Every process' `part` made one result: the episodes' results gathered back into episode
    order, the counts shown to all (each a collective every process calls in the same order)."""
    mine = part.mine if part.owners is None else merge_by_owner(part.owners, gather_objects(part.mine))
    return part.finish(mine, None if part.counts is None else agree(part.counts))
