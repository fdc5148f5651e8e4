"""A HiMAP session's figures as one typed value: what the trainer logs, launch/eval.py and the
notebook print, the report draws and benchmarks/bench_himap.py tabulates. Readers name fields, so a
renamed or missing figure is an error where it is read, not a KeyError in another package."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class PhaseTimes:
    """Wall seconds of the paper's Table-15 phases: the coordinator's first turn(s), the first
    round's executors, and the bargaining after it."""

    coordinator: float
    executors: float
    bargaining: float


@dataclasses.dataclass(frozen=True)
class SessionFigures:
    """Rounds, accepted and fallback days, rejections by the executors' / session's reason code,
    Σ's non-ok verdicts by code, turns per role, executors started, phase times, Σ's spending."""

    rounds: int
    accepted_days: int
    fallback_days: int
    days: int
    rejections: dict[str, int]
    sigma_rejections: dict[str, int]
    coordinator_turns: int
    executor_turns: int
    executors: int
    phase_s: PhaseTimes
    spent: float | None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (eval.json's `himap` list, the report)."""
        return dataclasses.asdict(self)
