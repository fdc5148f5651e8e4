"""HiMAP's switches: the paper's Table-7 ablations, rounds, the fallback and per-role limits.

`HimapOptions` is also the training config's `himap:` section (b2tjax/config): one type from the
YAML recipe to the protocol. A role's limits are a `StreamLimits` (sandbox/limits.py), the type the
rollout engine takes for the role's streams.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sandbox.himap.kinds import ROLES, Role
from sandbox.limits import StreamLimits

ABLATIONS = ("full", "no_sigma", "flat", "no_bargaining", "no_early_detection", "serial")


@dataclasses.dataclass(frozen=True)
class HimapOptions:
    """What a HiMAP episode runs with. The defaults are the full system.

    global_state: Σ exists (budget, venues, mode lock); without it nothing is enforced.
    coordinator: a coordinator distributes the days; without it (flat) each day gets an equal
      budget share and the instruction, and there is one round.
    bargaining: executors may reject a sub-goal and the coordinator re-distributes (<= max_rounds).
    early_detection: executors check/commit against Σ while they plan; without it Σ is applied
      when the days are merged (a conflicting day is rejected then).
    parallel: executors of a round run together; without it one after another.
    fallback: with bargaining, when the last round leaves days open the coordinator gets the round
      report and may hand in a complete plan itself (submit_plan) instead of leaving them empty.
    coordinator_limits / executor_limits: each role's streams; `max_turns` must be set (the role's
      environment enforces it), the token limits None = the rollout config's.
    max_response_chars: tool replies are cut to this (training: the rollout section's value).
    sft_instances: training only: train instances the scripted expert solves for SFT (0 = all).
    """

    global_state: bool = True
    coordinator: bool = True
    bargaining: bool = True
    early_detection: bool = True
    parallel: bool = True
    fallback: bool = True
    max_rounds: int = 3
    # 8 turns plan and bargain; the rest leave room for a fallback plan (searches, timing, submit)
    coordinator_limits: StreamLimits = dataclasses.field(default_factory=lambda: StreamLimits(max_turns=16))
    executor_limits: StreamLimits = dataclasses.field(default_factory=lambda: StreamLimits(max_turns=16))
    max_response_chars: int = 6000
    sft_instances: int = 0

    def __post_init__(self) -> None:
        problems = self.errors()
        if problems:
            raise ValueError(problems[0])

    def errors(self, prefix: str = "HimapOptions.") -> list[str]:
        """One line per setting a HiMAP episode cannot run with (the config checks call it too,
        since values loaded from YAML are set after construction)."""
        out = [] if self.max_rounds >= 1 else [f"{prefix}max_rounds must be >= 1, got {self.max_rounds}"]
        for role in ROLES:
            turns = self.limits(role).max_turns
            if turns is None or turns < 1:
                out.append(f"{prefix}{role}_limits.max_turns must be >= 1, got {turns}")
        if self.sft_instances < 0:
            out.append(f"{prefix}sft_instances must be >= 0 (0 = all), got {self.sft_instances}")
        return out

    def limits(self, role: Role) -> StreamLimits:
        return self.coordinator_limits if role == Role.COORDINATOR else self.executor_limits

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
