"""The typed values a HiMAP episode hands across modules and packages: roles, how a role ended,
how a day ended, and the stream a driver starts.

str-enums: records, reports and round reports write them, and a str-enum serializes as its value
(JSON, `==` against the plain string), so what lands on disk is the same text as before.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sandbox.types import Prompt, StrEnum


class Role(StrEnum):
    """Who writes a stream's turns: a single agent (one stream per episode), or in a HiMAP team the
    coordinator (splits the trip, bargains) or a day executor."""

    AGENT = "agent"
    COORDINATOR = "coordinator"
    EXECUTOR = "executor"


ROLES: tuple[Role, ...] = (Role.COORDINATOR, Role.EXECUTOR)  # a HiMAP team's roles
COORDINATOR = Role.COORDINATOR.value  # the coordinator's one stream has its role's name


def executor_stream(day: int, round_: int) -> str:
    """The stream of day `day`'s executor in round `round_`."""
    return f"day{day}.r{round_}"


class DayStatus(StrEnum):
    """How a day stands: accepted | rejected | submitted (handed in, Σ checks it at the merge) |
    replaced (accepted, then re-planned by the coordinator's fallback)."""

    ACCEPTED = "accepted"
    REJECTED = "rejected"
    SUBMITTED = "submitted"
    REPLACED = "replaced"


class EndKind(StrEnum):
    """Which ending tool ended a role: submit_day (committed to Σ or only handed in),
    reject_subgoal, or the coordinator's submit_plan."""

    ACCEPTED = "accepted"
    SUBMITTED = "submitted"
    REJECTED = "rejected"
    FALLBACK = "fallback"


@dataclasses.dataclass(frozen=True)
class Ending:
    """What an ending tool's run set on its `RoleEnv`: the day handed in (plan, Σ's cost), the
    refusal (code, reason), or the days the coordinator's fallback planned."""

    kind: EndKind
    plan: dict[str, Any] | None = None
    cost: float | None = None
    code: str | None = None
    reason: str = ""
    days: tuple[int, ...] = ()


@dataclasses.dataclass
class DayOutcome:
    """How one executor ended (a fallback day's outcome has stream "coordinator")."""

    day: int
    round: int
    stream: str
    status: DayStatus
    code: str | None = None  # rejected: the executor's code, a Σ code, "turn_limit" or "cut"
    reason: str = ""
    cost: float | None = None
    plan: dict[str, Any] | None = None

    @classmethod
    def of_ending(cls, day: int, round_: int, stream: str, ending: Ending | None) -> DayOutcome:
        """The outcome of an executor whose role ended with `ending` (None: out of turns)."""
        if ending is None:
            reason = "ran out of turns without submitting"
            return cls(day, round_, stream, DayStatus.REJECTED, "turn_limit", reason)
        if ending.kind is EndKind.REJECTED:
            return cls(day, round_, stream, DayStatus.REJECTED, ending.code, ending.reason)
        return cls(day, round_, stream, DayStatus(ending.kind.value), cost=ending.cost, plan=ending.plan)


@dataclasses.dataclass(frozen=True)
class StreamStart:
    """A stream the driver starts: its name, role, (day, round) for an executor, and prompt."""

    name: str
    role: Role
    day: int | None
    round: int | None
    prompt: Prompt
