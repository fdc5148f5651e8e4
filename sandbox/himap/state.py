"""Σ, the synchronized global state of a HiMAP episode.

Executors plan days in parallel, so the trip-wide rules cannot be checked by any one of them:
the total budget, "no restaurant or attraction twice", "one intercity mode". Σ holds what the days
have committed so far and accepts a batch of items for a day only if the whole trip would still obey
those rules; otherwise it rejects the batch with a one-line reason the model can act on, and
nothing changes. `check` answers the same question without committing (early conflict detection).

Invariants (kept under one lock, so executors may call from threads):
- spent == fsum of the costs of the committed items, and spent <= budget (+1e-6, the evaluator's
  tolerance);
- no venue key is committed twice, and no item's history key is in the visited set;
- a day holds each slot (a meal, the night's accommodation...) at most once;
- every committed intercity item has the same mode (the first one locks it; releasing the last
  one unlocks it);
- `release(day)` removes exactly that day's items: the snapshot equals the one before its commits
  (when other days did not change in between).

Σ knows nothing about a benchmark: costs, venue keys and modes come from a `Pricing`, which must use
the benchmark evaluator's own lookup so that Σ's spend is the evaluator's cost. Items are dicts of the
benchmark's shape; Σ stores a copy of each with "day" set to the day it was committed to (an item
that names another day is a BAD_ITEM), so a merged plan can be rebuilt from `committed(day)`.
The event log records every check, commit and release (for reports and metrics); it is not part of
the state, so `snapshot()` leaves it out.
"""

from __future__ import annotations

import copy
import enum
import json
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

# The evaluators accept a total up to budget + 1e-6; Σ uses the same tolerance.
BUDGET_TOLERANCE = 1e-6


class SigmaCode(str, enum.Enum):
    """A verdict's code; the value is the string shown to the model in tool replies."""

    OK = "ok"
    BUDGET = "budget"
    DUPLICATE_VENUE = "duplicate_venue"
    VISITED_BEFORE = "visited_before"
    MODE_LOCK = "mode_lock"
    UNKNOWN_PLACE = "unknown_place"
    BAD_ITEM = "bad_item"
    SLOT_TAKEN = "slot_taken"


@dataclass(frozen=True)
class SigmaVerdict:
    """The answer to a check or commit; `cost` is the batch's total cost (0 when rejected early)."""

    code: SigmaCode
    message: str
    cost: float = 0.0

    @property
    def ok(self) -> bool:
        return self.code is SigmaCode.OK


@dataclass(frozen=True)
class SigmaEvent:
    """One entry of Σ's log: every check, commit (accepted or not) and release, in order."""

    op: Literal["check", "commit", "release"]
    day: int
    code: SigmaCode
    cost: float
    spent_after: float
    seq: int


class UnknownPlace(LookupError):
    """A venue or transport service that the benchmark's database does not have."""


class BadItem(ValueError):
    """An item that is not of the benchmark's item shape (missing field, wrong type)."""


class ModeForbidden(ValueError):
    """An intercity mode the query itself rules out (TravelPlanner's "no flight"); a MODE_LOCK."""


class Pricing(Protocol):
    """What Σ needs from a benchmark (implemented once per benchmark).

    Σ prices an item with its "day" set to the day it is committed to. Every method may raise
    BadItem for a malformed item; `cost` raises UnknownPlace for a venue or service not in the
    database; `transport_mode` raises ModeForbidden for a mode the query rules out.
    """

    def cost(self, item: dict) -> float:
        """The item's cost exactly as the benchmark's evaluator counts it."""
        ...

    def venue_key(self, item: dict) -> str | None:
        """Canonical key of a venue that must not repeat in a trip (None: may repeat / not a venue)."""
        ...

    def transport_mode(self, item: dict) -> str | None:
        """The item's intercity mode ("flight", "train", "self-driving", "taxi"...), else None.

        Items with equal modes may share a trip: a benchmark where several modes mix (TravelPlanner:
        flight with taxi) returns one name for the compatible group."""
        ...

    def history_key(self, item: dict) -> str | None:
        """Key matched against the visited set (venue keys, and e.g. hotels that may repeat within
        the trip but not be ones the traveller stayed at before); None: not subject to it."""
        ...

    def slot(self, item: dict) -> str | None:
        """What a day holds at most once ("lunch", "accommodation"...); None: any number per day."""
        ...

    def label(self, item: dict) -> str:
        """How messages name the item, e.g. "lunch 'Spicy House'" (one line)."""
        ...


@dataclass(frozen=True)
class _Entry:
    """A committed item with what Σ derived from it (priced once, at commit)."""

    item: dict
    cost: float
    venue: str | None
    mode: str | None
    history: str | None
    slot: str | None


class GlobalState:
    """The budget, venue and mode bookkeeping shared by the executors of one episode."""

    def __init__(self, pricing: Pricing, budget: float | None, visited: Iterable[str] = ()):
        """`budget` None means unlimited; `visited` holds history keys (as `pricing.history_key`
        makes them) of places the traveller has been to, which must not be planned again."""
        if budget is not None and not (isinstance(budget, (int, float)) and math.isfinite(budget)):
            raise ValueError(f"budget must be a finite number or None, got {budget!r}")
        self._pricing = pricing
        self._budget = None if budget is None else float(budget)
        self._visited = frozenset(visited)
        self._lock = threading.Lock()
        self._days: dict[int, list[_Entry]] = {}
        self._spent = 0.0
        self._events: list[SigmaEvent] = []

    # ----- read-only views ---------------------------------------------------------------------

    @property
    def budget(self) -> float | None:
        return self._budget

    @property
    def spent(self) -> float:
        with self._lock:
            return self._spent

    @property
    def remaining(self) -> float | None:
        """Budget left (None when unlimited)."""
        with self._lock:
            return None if self._budget is None else self._budget - self._spent

    @property
    def mode(self) -> str | None:
        """The locked intercity mode: the mode of the committed intercity items, or None."""
        with self._lock:
            return self._locked_mode()

    @property
    def visited(self) -> frozenset[str]:
        return self._visited

    @property
    def events(self) -> list[SigmaEvent]:
        with self._lock:
            return list(self._events)

    def committed(self, day: int) -> list[dict]:
        """Copies of the items committed for a day, in commit order."""
        with self._lock:
            return [copy.deepcopy(e.item) for e in self._days.get(day, [])]

    def days(self) -> list[int]:
        """The days that have committed items, ascending."""
        with self._lock:
            return sorted(d for d, entries in self._days.items() if entries)

    def venues(self) -> set[str]:
        with self._lock:
            return {e.venue for entries in self._days.values() for e in entries if e.venue is not None}

    def snapshot(self) -> dict[str, Any]:
        """The whole state as JSON-able data (the event log is not state and is left out)."""
        with self._lock:
            return {
                "budget": self._budget,
                "spent": self._spent,
                "remaining": None if self._budget is None else self._budget - self._spent,
                "mode": self._locked_mode(),
                "venues": sorted(
                    e.venue for entries in self._days.values() for e in entries if e.venue is not None
                ),
                "days": {
                    str(day): [{"item": copy.deepcopy(e.item), "cost": e.cost} for e in entries]
                    for day, entries in sorted(self._days.items())
                    if entries
                },
            }

    # ----- operations --------------------------------------------------------------------------

    def check(self, day: int, items: Sequence[dict]) -> SigmaVerdict:
        """Would `commit(day, items)` be accepted now? Never changes the state (the check is logged)."""
        with self._lock:
            verdict, _ = self._validate(day, items)
            self._log("check", day, verdict.code, verdict.cost)
            return verdict

    def commit(self, day: int, items: Sequence[dict]) -> SigmaVerdict:
        """Add all items to `day` (after what it already has), or none of them if any breaks a rule."""
        with self._lock:
            verdict, entries = self._validate(day, items)
            if verdict.ok:
                self._days.setdefault(day, []).extend(entries)
                self._recompute_spent()
            self._log("commit", day, verdict.code, verdict.cost)
            return verdict

    def release(self, day: int) -> None:
        """Undo every commit of `day` (bargaining re-plans the day); its venues and mode free up."""
        with self._lock:
            entries = self._days.pop(day, [])
            self._recompute_spent()
            self._log("release", day, SigmaCode.OK, math.fsum(e.cost for e in entries))

    # ----- internals (called with the lock held) -----------------------------------------------

    def _recompute_spent(self) -> None:
        # fsum is exact and order-free, so commit-then-release gives back the same float.
        self._spent = math.fsum(e.cost for entries in self._days.values() for e in entries)

    def _locked_mode(self) -> str | None:
        return next((e.mode for entries in self._days.values() for e in entries if e.mode), None)

    def _log(self, op: str, day: int, code: SigmaCode, cost: float) -> None:
        self._events.append(SigmaEvent(op, day, code, cost, self._spent, len(self._events)))

    def _validate(self, day: int, items: Sequence[dict]) -> tuple[SigmaVerdict, list[_Entry]]:
        """The verdict for committing `items` to `day` on top of the current state, and their entries."""
        if isinstance(day, bool) or not isinstance(day, int):
            return SigmaVerdict(SigmaCode.BAD_ITEM, f"day must be a day number, got {day!r}"), []
        if isinstance(items, (dict, str, bytes)) or not isinstance(items, Sequence):
            return SigmaVerdict(SigmaCode.BAD_ITEM, "items must be a list of item objects"), []
        if not items:
            return SigmaVerdict(SigmaCode.BAD_ITEM, "nothing to commit: the item list is empty"), []
        entries = []
        for position, item in enumerate(items, 1):
            entry = self._price(day, position, item)
            if isinstance(entry, SigmaVerdict):
                return entry, []
            entries.append(entry)
        rule = (
            self._slot_rule(day, entries)
            or self._repeat_rule(day, entries)
            or self._venue_rule(entries)
            or self._mode_rule(entries)
            or self._budget_rule(entries)
        )
        if rule is not None:
            return rule, []
        total = math.fsum(e.cost for e in entries)
        return SigmaVerdict(SigmaCode.OK, self._ok_message(entries, total), total), entries

    def _price(self, day: int, position: int, item: Any) -> _Entry | SigmaVerdict:
        """The item (copied, its "day" set) with what the pricing derives from it, or why not."""
        if not isinstance(item, dict):
            return SigmaVerdict(
                SigmaCode.BAD_ITEM, f"item {position} must be an object, got {type(item).__name__}"
            )
        if item.get("day", day) != day:
            return SigmaVerdict(
                SigmaCode.BAD_ITEM, f"item {position} says day {item['day']!r} but is committed to day {day}"
            )
        item = {**copy.deepcopy(item), "day": day}
        p = self._pricing
        try:
            cost = float(p.cost(item))
            entry = _Entry(
                item, cost, p.venue_key(item), p.transport_mode(item), p.history_key(item), p.slot(item)
            )
        except UnknownPlace as err:
            return SigmaVerdict(SigmaCode.UNKNOWN_PLACE, f"item {position}: {_one_line(err)}")
        except ModeForbidden as err:
            return SigmaVerdict(SigmaCode.MODE_LOCK, f"item {position}: {_one_line(err)}")
        except BadItem as err:
            return SigmaVerdict(SigmaCode.BAD_ITEM, f"item {position}: {_one_line(err)}")
        if not math.isfinite(cost) or cost < 0:
            return SigmaVerdict(SigmaCode.BAD_ITEM, f"item {position}: cost {cost!r} is not a price")
        return entry

    def _slot_rule(self, day: int, entries: list[_Entry]) -> SigmaVerdict | None:
        taken = {e.slot for e in self._days.get(day, []) if e.slot is not None}
        for entry in entries:
            if entry.slot is None:
                continue
            if entry.slot in taken:
                return SigmaVerdict(
                    SigmaCode.SLOT_TAKEN,
                    f"{self._pricing.label(entry.item)}: day {day} already has a {entry.slot} "
                    "(release the day to re-plan it)",
                )
            taken.add(entry.slot)
        return None

    def _repeat_rule(self, day: int, entries: list[_Entry]) -> SigmaVerdict | None:
        """An item at most once per day: items without a venue or slot (a train, a show) could
        otherwise be committed nine times over."""
        seen = {_identity(e.item) for e in self._days.get(day, [])}
        for entry in entries:
            key = _identity(entry.item)
            if key in seen:
                return SigmaVerdict(
                    SigmaCode.DUPLICATE_VENUE, f"{self._pricing.label(entry.item)} is already in day {day}"
                )
            seen.add(key)
        return None

    def _venue_rule(self, entries: list[_Entry]) -> SigmaVerdict | None:
        taken = {e.venue: day for day, es in self._days.items() for e in es if e.venue is not None}
        batch: set[str] = set()
        for entry in entries:
            what = self._pricing.label(entry.item)
            if entry.history is not None and entry.history in self._visited:
                return SigmaVerdict(
                    SigmaCode.VISITED_BEFORE, f"{what}: the traveller has been there before; pick another"
                )
            if entry.venue is None:
                continue
            if entry.venue in taken:
                return SigmaVerdict(
                    SigmaCode.DUPLICATE_VENUE, f"{what} is already planned on day {taken[entry.venue]}"
                )
            if entry.venue in batch:
                return SigmaVerdict(SigmaCode.DUPLICATE_VENUE, f"{what} appears twice in this commit")
            batch.add(entry.venue)
        return None

    def _mode_rule(self, entries: list[_Entry]) -> SigmaVerdict | None:
        locked = self._locked_mode()
        for entry in entries:
            if entry.mode is None:
                continue
            if locked is not None and entry.mode != locked:
                return SigmaVerdict(
                    SigmaCode.MODE_LOCK,
                    f"{self._pricing.label(entry.item)} uses {entry.mode} but the trip's intercity "
                    f"mode is locked to {locked}",
                )
            locked = entry.mode
        return None

    def _budget_rule(self, entries: list[_Entry]) -> SigmaVerdict | None:
        if self._budget is None:
            return None
        total = math.fsum(e.cost for e in entries)
        if self._spent + total <= self._budget + BUDGET_TOLERANCE:
            return None
        top = max(entries, key=lambda e: e.cost)
        return SigmaVerdict(
            SigmaCode.BUDGET,
            f"over budget: this commit costs {total:.2f} (largest {self._pricing.label(top.item)} "
            f"{top.cost:.2f}), spent {self._spent:.2f} of {self._budget:.2f}, "
            f"remaining {self._budget - self._spent:.2f}",
            total,
        )

    def _ok_message(self, entries: list[_Entry], total: float) -> str:
        left = "" if self._budget is None else f", remaining {self._budget - self._spent - total:.2f}"
        return f"ok: {len(entries)} item(s) cost {total:.2f}{left}"


def _identity(item: dict) -> str:
    """An item's content without its day, as canonical JSON (field order does not matter)."""
    return json.dumps({k: v for k, v in item.items() if k != "day"}, sort_keys=True, default=repr)


def _one_line(err: Exception) -> str:
    return " ".join(str(err).split()) or type(err).__name__
