"""What a benchmark supplies to HiMAP: the small domain interface the protocol is written against.

The protocol (sandbox/himap/protocol.py) knows nothing about trains, hotels or TravelPlanner's
routes. A domain, bound to ONE visible instance, tells it: the task tuple the coordinator's
`information_extractor` returns (read from the visible instance only), the trip's day slots
(city and day type per day), the flat split used without a coordinator, which of the benchmark's
world tools each role may call, the benchmark-specific sub-goal fields, Σ's pricing and the
visited set, how a submitted day is checked and turned into Σ items, and `merge`, which turns the
accepted days into the benchmark's answer.
"""

from __future__ import annotations

import abc
import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from sandbox.tools.args import Param

DAY_TYPES = ("departure", "stay", "travel", "return")
# departure: leave the origin and arrive at the first city; stay: a whole day in one city;
# travel: move between two cities of a multi-city route; return: go back to the origin.


@dataclasses.dataclass(frozen=True)
class DaySlot:
    """One day of the trip as the task fixes it (before any planning)."""

    day: int  # 1-based
    date: str | None  # YYYY-MM-DD when the task has dates
    city: str  # where the day is spent (a travel day: where it ends)
    day_type: str  # one of DAY_TYPES


@dataclasses.dataclass(frozen=True)
class SubGoal:
    """z_d: what one executor is asked to plan. `extra` holds the domain's own fields."""

    day: int
    city: str
    budget: float | None  # the budget hint b_d (None: no hint)
    day_type: str
    transport_mode: str | None = None  # the trip's intercity mode, fixed by the coordinator
    date: str | None = None
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"day": self.day, "date": self.date, "city": self.city}
        out.update(day_type=self.day_type, budget=self.budget, transport_mode=self.transport_mode)
        out.update(self.extra)
        return {k: v for k, v in out.items() if v is not None}


class HimapDomain(abc.ABC):
    """One benchmark instance as HiMAP sees it. Subclasses: B2TDomain, TravelPlannerDomain."""

    name: str
    transport_modes: tuple[str, ...]  # values distribute_task's `transport_mode` accepts
    subgoal_fields: tuple[Param, ...] = ()  # benchmark-specific sub-goal fields (all optional)
    reject_codes: tuple[str, ...] = ("budget", "no_options", "timing", "other")
    item_description: str = "items of your day in the plan format"  # what check/commit_items take
    # World tools whose results, when the coordinator calls them, every executor is shown (once, in
    # the shared part of its prompt) instead of searching again: e.g. B2T's places near the hotel.
    shared_lookups: tuple[str, ...] = ()

    @abc.abstractmethod
    def task(self) -> dict[str, Any]:
        """The task tuple from the VISIBLE instance: origin, destination(s), days, dates, people,
        budget, hard constraints, soft preferences (JSON-able)."""

    @abc.abstractmethod
    def request(self) -> list[dict[str, str]]:
        """The user's request as chat messages: the single agent's prompt without its system message
        (the coordinator reads it; executors never do)."""

    @abc.abstractmethod
    def instruction(self) -> str:
        """The request's text without the behaviour log (what a flat executor is shown)."""

    @abc.abstractmethod
    def slots(self) -> list[DaySlot]:
        """The trip's days in order (the coordinator may change cities and types)."""

    @property
    def budget(self) -> float | None:
        return self.task().get("budget")

    @property
    def num_days(self) -> int:
        return len(self.slots())

    def flat_split(self) -> list[SubGoal]:
        """Sub-goals without a coordinator (the paper's flat ablation): the slots, equal budget."""
        slots = self.slots()
        share = None if self.budget is None else round(self.budget / len(slots), 2)
        return [SubGoal(s.day, s.city, share, s.day_type, None, s.date) for s in slots]

    @abc.abstractmethod
    def world(self) -> Any:
        """The benchmark's world of this instance (`call_tool`, `tool_schemas`)."""

    @abc.abstractmethod
    def coordinator_tools(self) -> tuple[str, ...]:
        """World tools the coordinator may call besides information_extractor/distribute_task."""

    @abc.abstractmethod
    def executor_tools(self) -> tuple[str, ...]:
        """World tools a day executor may call (the benchmark's search tools)."""

    @abc.abstractmethod
    def pricing(self) -> Any:
        """Σ's Pricing for this instance (sandbox.himap.state.Pricing)."""

    @abc.abstractmethod
    def visited(self) -> set[str]:
        """Venue keys the user has been to (from the visible instance), for Σ."""

    @abc.abstractmethod
    def day_problem(self, goal: SubGoal, day: dict[str, Any]) -> str | None:
        """Why a submitted day cannot be a day of the plan (structure), or None."""

    @abc.abstractmethod
    def day_items(self, goal: SubGoal, day: dict[str, Any]) -> list[dict[str, Any]]:
        """The day's priced items in Σ's item shape."""

    @abc.abstractmethod
    def merge(self, days: dict[int, dict[str, Any]]) -> str:
        """The benchmark's answer text from the accepted days (day number -> submitted day);
        a day without an accepted plan is written empty, so the answer still has every day."""

    @abc.abstractmethod
    def day_fields(self) -> tuple[Param, ...]:
        """The arguments of submit_day: the fields of one day of the benchmark's plan."""

    def complete_subgoals(
        self, goals: list[dict[str, Any]], earlier: dict[int, SubGoal]
    ) -> list[dict[str, Any]]:
        """distribute_task's sub-goals (checked arguments, before the slot defaults) with what
        follows from the others filled in (TravelPlanner: a moving day's city and route, a city's
        stay on its arrival day), so the coordinator writes each choice once; `earlier`: the
        sub-goals of earlier rounds by day (accepted days keep theirs)."""
        return goals

    def subgoal_details(self, goal: SubGoal) -> dict[str, Any] | str:
        """What the sub-goal's references name, looked up for the executor (B2T: the hotel's search
        record), so the coordinator writes a name, not the record; a str is why a reference is bad."""
        return {}

    def executor_brief(self, goal: SubGoal) -> str:
        """Domain notes for an executor's prompt about this sub-goal (e.g. where the day starts)."""
        return ""


def dumps(value: Any) -> str:
    """JSON as every HiMAP reply writes it (stable key order, non-ASCII kept)."""
    return json.dumps(value, ensure_ascii=False, sort_keys=False)


def subgoal_from_args(raw: dict[str, Any], extra_names: Sequence[str]) -> SubGoal:
    """A SubGoal from one validated `distribute_task` entry (the caller checked the types)."""
    extra = {k: raw[k] for k in extra_names if raw.get(k) is not None}
    budget = raw.get("budget")
    return SubGoal(
        int(raw["day"]),
        str(raw["city"]),
        None if budget is None else float(budget),
        str(raw["day_type"]),
        extra=extra,
    )
