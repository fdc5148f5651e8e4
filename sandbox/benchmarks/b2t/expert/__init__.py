"""The expert planner: solves benchmark instances through the episode environment and records
chain-of-action traces (sandbox/benchmarks/b2t/expert/planner.py)."""

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sandbox.benchmarks.b2t.expert.planner import Expert, ExpertFailure, ExpertResult
from sandbox.benchmarks.b2t.world.store import open_world

__all__ = ["Expert", "ExpertFailure", "ExpertResult", "expert_answers"]


def expert_answers(
    pairs: Iterable[tuple[dict[str, Any], dict[str, Any]]], store: str | Path
) -> Iterator[tuple[str, str | None]]:
    """(id, answer text) per (visible, ground truth) pair; None where the expert found no plan."""

    expert = Expert(open_world(store))
    for visible, truth in pairs:
        result = expert.solve(visible, truth)
        yield visible["id"], result.answer
