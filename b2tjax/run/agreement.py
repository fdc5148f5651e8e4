"""The one cross-process call of a train step: the processes check that they hold the same batch.

Every JAX process holds the whole global batch of a step (the data pipeline is global; rollout
records reach every host, b2tjax/tasks/benchmark.py) and lays it out alike (the packer and
`loss_positions` are pure functions of the records), so the step's programs get one shape
everywhere without talking. What is left to agree on is that premise: once per step, before the
update, the trainer compares a few ints of the batch over the processes. A process that held
another batch would otherwise train on other rows or hang the pod in a collective of another shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from rollout.hosts import agree


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
