"""Everything the checks share about one plan, derived once: query, profile, POI records, legs.

Conventions every check follows (documented in sandbox/benchmarks/b2t/README.md):
- POIs are looked up in the query's destination city by normalised name, in the table of their
  activity type (meal -> restaurants). A check that needs a store record FAILS for an item the
  store does not know (`unknown_places`): a preference, opening hours or a price of a place that
  does not exist is not met, so a plan of invented places cannot collect the credit of every
  check that could not look at them (it once scored 1.955 of 2 against 1.9 for an honest plan
  missing one preference).
- The local leg of an activity goes from the previous place of the day to this activity's place.
  Day 1 starts at the city centre (standing for the station or airport, as after any intercity
  arrival), later days at the previous night's hotel; where that place is unknown (no hotel, or
  one the store lacks) the leg is not checked. A leg is timed [start - duration, start].
- Presence: on the arrival day the traveller is in the destination from the outbound arrival
  time, on the last day until the return departure; other days all day.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from sandbox.benchmarks.b2t import geo
from sandbox.benchmarks.b2t.evaluator.lookup import CityInfo, Poi, WorldIndex
from sandbox.benchmarks.b2t.plan import LOCAL_TYPES, Activity, Day, Plan, normalize_name

# Routes between store places repeat across plans of a world: compute each once.
_local_route = lru_cache(maxsize=65536)(geo.local_route)

POI_KIND = {
    "meal": "restaurant",
    "attraction": "attraction",
    "entertainment": "entertainment",
    "hotel": "hotel",
}
DAY_MINUTES = 24 * 60


@dataclass(frozen=True)
class Query:
    origin: str | None
    destination: str | None
    start_date: dt.date | None
    days: int | None
    people: int
    budget: float | None

    @property
    def needs_intercity(self) -> bool:
        """A trip from another city starts and ends with intercity transport."""
        return bool(
            self.origin
            and self.destination
            and normalize_name(self.origin) != normalize_name(self.destination)
        )

    def date_of(self, day_number: int) -> str | None:
        if self.start_date is None:
            return None
        return (self.start_date + dt.timedelta(days=day_number - 1)).isoformat()


@dataclass
class Leg:
    """The local transport into `activity`, with the geo model's route when both ends are known."""

    activity: Activity
    origin: tuple[float, float] | None
    destination: tuple[float, float] | None
    expected: geo.Route | None  # geo.local_route of the stated mode; None when not computable
    unknown_end: bool = False  # an end is a place the plan names but the store does not know

    @property
    def stated_min(self) -> float:
        return self.activity.transport.duration_min or 0.0


@dataclass
class DayView:
    day: Day
    date: str | None
    pois: dict[int, Poi | None]  # activity index -> store record (local activities only)
    legs: list[Leg]
    arrive: int  # minutes the traveller is in the destination from (0 if all day)
    depart: int  # ... until (1440 if all day)
    is_first: bool
    is_last: bool
    outbound: list[Activity] = field(default_factory=list)  # intercity into the destination
    returns: list[Activity] = field(default_factory=list)  # intercity out of the destination


def parse_query(ground_truth: dict) -> Query:
    raw = ground_truth.get("query") if isinstance(ground_truth, dict) else None
    raw = raw if isinstance(raw, dict) else {}
    try:
        start = dt.date.fromisoformat(str(raw.get("start_date")))
    except ValueError:
        start = None
    days = raw.get("days")
    people = raw.get("people")
    budget = raw.get("budget")
    return Query(
        origin=raw.get("origin") if isinstance(raw.get("origin"), str) else None,
        destination=raw.get("destination") if isinstance(raw.get("destination"), str) else None,
        start_date=start,
        days=days if isinstance(days, int) and days > 0 else None,
        people=people if isinstance(people, int) and people > 0 else 1,
        budget=float(budget) if isinstance(budget, (int, float)) and budget > 0 else None,
    )


class Profile:
    """The hidden user profile; `get` returns None for anything absent or null (unconstrained)."""

    def __init__(self, ground_truth: dict):
        raw = ground_truth.get("profile") if isinstance(ground_truth, dict) else None
        self._raw = raw if isinstance(raw, dict) else {}

    def get(self, dimension: str, attribute: str) -> Any:
        section = self._raw.get(dimension)
        if not isinstance(section, dict):
            return None
        value = section.get(attribute)
        return None if value in (None, [], "") else value

    def values(self, dimension: str, attribute: str) -> list[str] | None:
        """A list-or-string attribute as a list of strings (None: unconstrained)."""
        value = self.get(dimension, attribute)
        if value is None:
            return None
        items = value if isinstance(value, list) else [value]
        return [v for v in items if isinstance(v, str)] or None

    def history_names(self, attribute: str) -> frozenset[str]:
        """Normalised names (or numbers) of the user's past records of one kind."""
        items = self.get("history", attribute) or []
        names = set()
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict):
                item = item.get("name") or item.get("poi_name") or item.get("number")
            if isinstance(item, str):
                names.add(normalize_name(item))
        return frozenset(names)


class EvalContext:
    """One plan with the instance it answers, resolved against the store."""

    def __init__(self, plan: Plan, query: Query, profile: Profile, index: WorldIndex):
        self.plan = plan
        self.query = query
        self.profile = profile
        self.index = index
        self.destination = query.destination or (plan.days[0].city if plan.days else None) or ""
        self.city: CityInfo | None = index.city(self.destination)
        self.days = self._build_days()

    def _build_days(self) -> list[DayView]:
        views = []
        last = len(self.plan.days) - 1
        centre = (self.city.latitude, self.city.longitude) if self.city else None
        start: tuple[float, float] | None = centre
        start_unknown = False
        for position, day in enumerate(self.plan.days):
            view = self._day_view(day, position == 0, position == last, start, centre, start_unknown)
            views.append(view)
            hotels = [view.pois.get(a.index) for a in day.activities if a.type == "hotel"]
            start = (hotels[-1].latitude, hotels[-1].longitude) if hotels and hotels[-1] else None
            start_unknown = bool(hotels) and hotels[-1] is None
        return views

    def _day_view(
        self,
        day: Day,
        is_first: bool,
        is_last: bool,
        start: tuple[float, float] | None,
        centre: tuple[float, float] | None,
        start_unknown: bool = False,
    ) -> DayView:
        """`start`: where the day begins (None when unknown: then its first leg is not checked;
        `start_unknown`: because the night's hotel is one the store does not know)."""
        dest = normalize_name(self.destination)
        place, place_unknown = start, start_unknown
        pois: dict[int, Poi | None] = {}
        legs: list[Leg] = []
        outbound, returns = [], []
        for act in day.activities:
            if act.type == "intercity_transport":
                if act.to_city and normalize_name(act.to_city) == dest:
                    outbound.append(act)
                    place, place_unknown = centre, False
                elif act.from_city and normalize_name(act.from_city) == dest:
                    returns.append(act)
                continue
            poi = self.index.poi(POI_KIND[act.type], self.destination, act.name) if act.name else None
            pois[act.index] = poi
            here = (poi.latitude, poi.longitude) if poi else None
            if act.transport is not None:
                expected = None
                if place and here and act.transport.mode in geo.LOCAL_MODES:
                    expected = _local_route(act.transport.mode, *place, *here)
                legs.append(Leg(act, place, here, expected, place_unknown or poi is None))
            place, place_unknown = here, poi is None
        arrive = min((a.end for a in outbound), default=0) if is_first else 0
        depart = max((a.start for a in returns), default=DAY_MINUTES) if is_last else DAY_MINUTES
        return DayView(
            day,
            self.query.date_of(day.number),
            pois,
            legs,
            arrive,
            depart,
            is_first,
            is_last,
            outbound,
            returns,
        )

    # ---- helpers shared by checks

    def unknown_places(self, kinds: tuple[str, ...] | None = None, what: str = "it") -> list[str]:
        """One failure per local activity (of POI `kinds`, default all) the store does not know."""
        return [
            f"day {view.day.number} {act.label}: {act.name or 'an unnamed place'!r} is no "
            f"{POI_KIND[act.type]} the store knows in {self.destination}, so {what} cannot be verified"
            for view, act, poi in self.local_activities()
            if poi is None and (kinds is None or POI_KIND[act.type] in kinds)
        ]

    def local_activities(self) -> Iterator[tuple[DayView, Activity, Poi | None]]:
        """(day view, activity, store record or None) for every meal/attraction/entertainment/hotel."""
        for view in self.days:
            for act in view.day.activities:
                if act.type in LOCAL_TYPES:
                    yield view, act, view.pois.get(act.index)

    def intercity(self) -> Iterator[tuple[DayView, Activity]]:
        """(day view, activity) for every train/flight of the plan, in day order."""
        for view in self.days:
            for act in view.day.activities:
                if act.type == "intercity_transport":
                    yield view, act
