"""HiMAP's switches: the paper's Table-7 ablations, rounds and per-role limits."""

from __future__ import annotations

import dataclasses
from typing import Any

ABLATIONS = ("full", "no_sigma", "flat", "no_bargaining", "no_early_detection", "serial")


@dataclasses.dataclass(frozen=True)
class RoleLimits:
    """Per-role stream limits (None: the engine config's value); the environment enforces
    `max_turns` itself, the engine the token limits (rollout.episodes.StreamLimits)."""

    max_turns: int
    max_turn_tokens: int | None = None
    max_total_tokens: int | None = None


@dataclasses.dataclass(frozen=True)
class HimapOptions:
    """What a HiMAP episode runs with. The defaults are the full system.

    global_state: Σ exists (budget, venues, mode lock); without it nothing is enforced.
    coordinator: a coordinator distributes the days; without it (flat) each day gets an equal
      budget share and the instruction, and there is one round.
    bargaining: executors may reject a sub-goal and the coordinator re-distributes (<= max_rounds).
    early_detection: executors check/commit against Σ while they plan; without it Σ is applied
      when the days are merged (a conflicting day is rejected then).
    parallel: executors of a round run together (lockstep turns); without it one after another.
    fallback: with bargaining, when the last round leaves days open the coordinator gets the round
      report and may hand in a complete plan itself (submit_plan) instead of leaving them empty.
    """

    global_state: bool = True
    coordinator: bool = True
    bargaining: bool = True
    early_detection: bool = True
    parallel: bool = True
    fallback: bool = True
    max_rounds: int = 3
    # 8 turns plan and bargain; the rest leave room for a fallback plan (searches, timing, submit)
    coordinator_limits: RoleLimits = RoleLimits(max_turns=16)
    executor_limits: RoleLimits = RoleLimits(max_turns=16)
    max_response_chars: int = 6000

    def __post_init__(self) -> None:
        if self.max_rounds < 1:
            raise ValueError(f"HimapOptions.max_rounds must be >= 1, got {self.max_rounds}")
        for role in ("coordinator", "executor"):
            if self.limits(role).max_turns < 1:
                raise ValueError(f"HimapOptions.{role}_limits.max_turns must be >= 1")

    def limits(self, role: str) -> RoleLimits:
        return self.coordinator_limits if role == "coordinator" else self.executor_limits

    @property
    def rounds(self) -> int:
        """Rounds the protocol can run: one without bargaining or without a coordinator."""
        return self.max_rounds if self.bargaining and self.coordinator else 1

    @property
    def fallback_allowed(self) -> bool:
        """The coordinator may plan left-open days itself after the last round (bargaining's end)."""
        return self.fallback and self.bargaining and self.coordinator

    @property
    def sigma_while_planning(self) -> bool:
        return self.global_state and self.early_detection

    @classmethod
    def ablation(cls, name: str, **overrides: Any) -> HimapOptions:
        """The full system or one of the paper's Table-7 ablations, by name (see ABLATIONS)."""
        switches = {
            "full": {},
            "no_sigma": {"global_state": False},
            "flat": {"coordinator": False},
            "no_bargaining": {"bargaining": False},
            "no_early_detection": {"early_detection": False},
            "serial": {"parallel": False},
        }
        if name not in switches:
            raise ValueError(f"unknown HiMAP ablation {name!r}; choose from {', '.join(ABLATIONS)}")
        return cls(**{**switches[name], **overrides})
