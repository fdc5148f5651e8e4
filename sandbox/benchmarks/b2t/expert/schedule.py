"""Timing one plan day: which stops, in which order, at which times.

The rules are the evaluator's (sandbox/benchmarks/b2t/evaluator/reasonableness.py, authenticity.py): meal
windows and the 90-minute presence rule for owed meals, business hours, 09:00-21:00 for
sightseeing and lunch/dinner, hotel check-in from 18:00 as the day's last stop, >= max(30 min,
leg) between stops, no idle stretch over 2 h inside 09:00-21:00, legs <= 1 h and <= 2 h a day,
nothing in 23:00-06:00, >= 1 attraction on days with >= 4 h in town, none after an arrival at
or after 18:00, walking within the tolerance. Times are minutes after midnight.
"""

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

# The limits are the evaluator's own, imported so that the expert cannot drift from what it scores.
from sandbox.benchmarks.b2t.evaluator.reasonableness import (
    DAY_END,
    DAY_START,
    LATE_ARRIVAL,
    MAX_IDLE,
    MAX_LEG,
    MEAL_WINDOWS,
    MIN_DAY_FOR_ATTRACTION,
    MIN_GAP,
    NIGHT_END,
    NIGHT_START,
)
from sandbox.benchmarks.b2t.evaluator.reasonableness import HOTEL_CHECKIN_EARLIEST as CHECKIN_EARLIEST
from sandbox.benchmarks.b2t.evaluator.reasonableness import MAX_DAILY_LOCAL_TRANSPORT as MAX_DAILY_LEGS
from sandbox.benchmarks.b2t.evaluator.reasonableness import MEAL_MIN_PRESENCE as MIN_PRESENCE_FOR_MEAL
from sandbox.benchmarks.b2t.plan import MEALS

MEAL_MINUTES = {"breakfast": 40, "lunch": 60, "dinner": 60}
MEAL_TARGET = {"breakfast": 8 * 60 + 20, "lunch": 11 * 60, "dinner": 17 * 60}
CHECKIN_MINUTES = 30
ATTRACTION_MIN, ATTRACTION_MAX = 45, 330


@dataclass(frozen=True)
class Place:
    """A place a plan visits, as the searches described it."""

    kind: str  # "restaurant" | "attraction" | "hotel" | "entertainment" | "centre"
    name: str
    lat: float
    lon: float
    open_min: int = 0
    close_min: int = 24 * 60
    price: float = 0.0  # per person (hotel: per room and night)
    walking_km: float = 0.0
    info: dict = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True)
class Leg:
    mode: str
    duration_min: int
    distance_km: float


@dataclass
class Stop:
    """One timed activity of a day. `kind`: breakfast/lunch/dinner/attraction/hotel/outbound/return."""

    kind: str
    place: Place | None
    start: int
    end: int
    leg: Leg | None = None


LegFn = Callable[[Place, Place], Leg]


@dataclass(frozen=True)
class DayFrame:
    """Where and when a day starts and ends; `arrive`/`depart` are the intercity times, if any."""

    start_place: Place  # city centre after an arrival, else last night's hotel
    arrive: tuple[int, int] | None = None  # outbound (departure, arrival) on day 1
    depart: tuple[int, int] | None = None  # return (departure, arrival) on the last day
    walking_limit: float = float("inf")

    @property
    def present_from(self) -> int:
        return self.arrive[1] if self.arrive else 0

    @property
    def present_until(self) -> int:
        return self.depart[0] if self.depart else 24 * 60


def meal_owed(frame: DayFrame, meal: str) -> bool:
    lo, hi = MEAL_WINDOWS[meal]
    return min(hi, frame.present_until) - max(lo, frame.present_from) >= MIN_PRESENCE_FOR_MEAL


def meal_possible(frame: DayFrame, meal: str) -> bool:
    lo, hi = MEAL_WINDOWS[meal]
    return (
        min(hi, frame.present_until - MIN_GAP) - max(lo, frame.present_from + MIN_GAP) >= MEAL_MINUTES[meal]
    )


def needs_attraction(frame: DayFrame) -> bool:
    return min(frame.present_until, DAY_END) - max(frame.present_from, DAY_START) >= MIN_DAY_FOR_ATTRACTION


def sightseeing_allowed(frame: DayFrame) -> bool:
    return not (frame.arrive and frame.arrive[1] >= LATE_ARRIVAL)


def sequences(frame: DayFrame, max_attractions: int = 2) -> Iterator[list[str]]:
    """Stop-kind orders worth trying for a day, most natural first."""
    owed = [m for m in MEALS if meal_owed(frame, m)]
    optional = [m for m in MEALS if m not in owed and meal_possible(frame, m)]
    need = needs_attraction(frame)
    counts = ([1, 2] if need else [0, 1, 2]) if sightseeing_allowed(frame) else [0]
    counts = [c for c in counts if c <= max_attractions]
    tail = [] if frame.depart else ["hotel"]
    for extra in _subsets(optional):
        meals = [m for m in MEALS if m in owed or m in extra]
        for n in counts:
            for where in itertools.combinations_with_replacement(_slot_order(meals), n):
                seq: list[str] = []
                for i in range(len(meals) + 1):
                    seq += ["attraction"] * where.count(i)
                    if i < len(meals):
                        seq.append(meals[i])
                yield seq + tail


def _slot_order(meals: list[str]) -> list[int]:
    """Gaps for attractions (index i = before meals[i]), the afternoon gap first."""

    def rank(i: int) -> tuple[int, int]:
        after = meals[i - 1] if i > 0 else None
        return (0 if after == "lunch" else 1 if i < len(meals) and meals[i] == "lunch" else 2, -i)

    return sorted(range(len(meals) + 1), key=rank)


def _subsets(items: list[str]) -> Iterator[tuple[str, ...]]:
    for r in range(len(items) + 1):
        yield from itertools.combinations(items, r)


def _next_fixed_start(kinds: list[str], i: int, frame: DayFrame, prev_end: int) -> int | None:
    """Target start of the stop after an attraction: what the attraction stretches towards."""
    if i + 1 >= len(kinds):
        return frame.depart[0] if frame.depart else None
    nxt = kinds[i + 1]
    if nxt in MEAL_WINDOWS:
        return max(MEAL_WINDOWS[nxt][0], prev_end)
    if nxt == "hotel":
        return max(CHECKIN_EARLIEST, prev_end)
    return None


def timeline(kinds: list[str], places: list[Place], frame: DayFrame, leg: LegFn) -> list[Stop]:
    """Times for the day's stops (without validation): meals as early as their windows allow,
    attractions stretched towards the next fixed stop, check-in from 18:00."""
    stops: list[Stop] = []
    if frame.arrive:
        stops.append(Stop("outbound", None, frame.arrive[0], frame.arrive[1]))
    here = frame.start_place
    prev_end = frame.arrive[1] if frame.arrive else None
    for i, (kind, place) in enumerate(zip(kinds, places)):
        lg = leg(here, place)
        gap = max(MIN_GAP, lg.duration_min) if prev_end is not None else lg.duration_min
        earliest = (prev_end + gap) if prev_end is not None else NIGHT_END + lg.duration_min
        if kind in MEAL_WINDOWS:
            start = max(
                earliest, MEAL_TARGET[kind] if prev_end is None else MEAL_WINDOWS[kind][0], place.open_min
            )
            if kind == "breakfast" and prev_end is None:
                start = max(earliest, min(MEAL_TARGET[kind], _latest_before_depart(frame, kind)))
            end = start + MEAL_MINUTES[kind]
        elif kind == "attraction":
            start = max(earliest, DAY_START, place.open_min)
            target = _next_fixed_start(kinds, i, frame, start + ATTRACTION_MIN)
            if target is None:
                end = start + 120
            else:
                nxt_leg = leg(place, places[i + 1]).duration_min if i + 1 < len(places) else 0
                end = target - max(MIN_GAP, nxt_leg)
            end = min(max(end, start + ATTRACTION_MIN), start + ATTRACTION_MAX, place.close_min, DAY_END)
        else:  # hotel
            start = max(earliest, CHECKIN_EARLIEST)
            end = start + CHECKIN_MINUTES
        stops.append(Stop(kind, place, start, end, lg))
        here, prev_end = place, end
    if frame.depart:
        stops.append(Stop("return", None, frame.depart[0], frame.depart[1]))
    return stops


def _latest_before_depart(frame: DayFrame, meal: str) -> int:
    if not frame.depart:
        return 24 * 60
    return frame.depart[0] - MIN_GAP - MEAL_MINUTES[meal]


def problems(stops: list[Stop], frame: DayFrame, is_first: bool) -> list[str]:
    """Why a timed day breaks a rule ([] = it passes every per-day check)."""
    out = []
    kinds = [s.kind for s in stops]
    for meal in MEALS:
        n = kinds.count(meal)
        if n > 1 or (n == 0 and meal_owed(frame, meal)):
            out.append(f"{meal} count {n}")
    if needs_attraction(frame) and "attraction" not in kinds:
        out.append("no attraction")
    if kinds.count("attraction") > 4:
        out.append("too many attractions")
    if not frame.depart and (not kinds or kinds[-1] != "hotel"):
        out.append("day does not end at the hotel")
    legs_total, walked = 0, 0.0
    for i, s in enumerate(stops):
        if s.end < s.start:
            out.append(f"{s.kind} ends before it starts")
        if i > 0:
            need = max(MIN_GAP, s.leg.duration_min if s.leg else 0)
            if s.start - stops[i - 1].end < need:
                out.append(f"{s.kind} too close to the previous stop")
        if s.kind in MEAL_WINDOWS:
            lo, hi = MEAL_WINDOWS[s.kind]
            if s.start < lo or s.end > hi:
                out.append(f"{s.kind} outside its window")
        if s.kind in ("attraction", "lunch", "dinner") and (s.start < DAY_START or s.end > DAY_END):
            out.append(f"{s.kind} outside 09:00-21:00")
        if s.kind == "attraction":
            if s.end - s.start < ATTRACTION_MIN:
                out.append("attraction too short")
            if frame.arrive and frame.arrive[1] >= LATE_ARRIVAL:
                out.append("sightseeing after a late arrival")
            walked += s.place.walking_km
        if s.kind == "hotel" and s.start < CHECKIN_EARLIEST:
            out.append("check-in before 18:00")
        if s.place is not None and not (s.place.open_min <= s.start and s.end <= s.place.close_min):
            out.append(f"{s.kind} outside business hours")
        if s.leg is not None:
            legs_total += s.leg.duration_min
            if s.leg.duration_min > MAX_LEG:
                out.append("leg over an hour")
            if s.leg.mode == "Walking":
                walked += s.leg.distance_km
            if s.start - s.leg.duration_min < NIGHT_END or s.start > NIGHT_START:
                out.append("travel at night")
    if legs_total > MAX_DAILY_LEGS:
        out.append("over 2 h of local transport")
    if walked > frame.walking_limit + 1e-9:
        out.append("too much walking")
    out += _idle_problems(stops, is_first)
    return out


def _idle_problems(stops: list[Stop], is_first: bool) -> list[str]:
    spans = sorted((s.start - (s.leg.duration_min if s.leg else 0), s.end) for s in stops)
    cursor = None if is_first else DAY_START
    for start, end in spans:
        if cursor is not None and min(start, DAY_END) - max(cursor, DAY_START) > MAX_IDLE:
            return ["idle over 2 h"]
        cursor = end if cursor is None else max(cursor, end)
    return []
