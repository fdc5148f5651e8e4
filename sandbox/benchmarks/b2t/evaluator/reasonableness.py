"""Reasonableness (15 constraints): the plan is a day a person could actually live.

Times are minutes after midnight. Exact rules:
- Meal windows: breakfast 07:00-09:30, lunch 11:00-14:00, dinner 17:00-20:30. A meal is owed
  when the traveller is in the destination for at least 90 minutes of its window (so arriving at
  12:30 still owes lunch, departing at 18:00 does not owe dinner); each owed meal appears exactly
  once that day, an optional one at most once, and every meal starts and ends inside its window.
- Gaps: consecutive activities are at least max(30 min, the next one's stated transport time)
  apart. Idle time inside 09:00-21:00 between covered intervals (activities and their legs) is at
  most 2 h; on days 2..N the idle time from 09:00 to the first activity counts too, while the time
  after the day's last activity (resting at the hotel, or gone home) does not.
- Attractions, entertainment, lunch and dinner lie within 09:00-21:00 (breakfast has its window,
  hotel check-in and intercity transport their own rules).
- Days with under 4 hours in the destination within 09:00-21:00 (late arrival, early return) need
  no attraction; no attraction or entertainment may start after an arrival at or after 18:00.
- Night: no intercity transport and no local leg overlaps 23:00-06:00.
"""

from __future__ import annotations

from collections import Counter

from sandbox.benchmarks.b2t.evaluator.context import DAY_MINUTES, DayView, EvalContext
from sandbox.benchmarks.b2t.evaluator.registry import constraint
from sandbox.benchmarks.b2t.plan import MEALS, minutes_to_time, normalize_name

MEAL_WINDOWS = {
    "breakfast": (7 * 60, 9 * 60 + 30),
    "lunch": (11 * 60, 14 * 60),
    "dinner": (17 * 60, 20 * 60 + 30),
}
MEAL_MIN_PRESENCE = 90
DAY_START, DAY_END = 9 * 60, 21 * 60
HOTEL_CHECKIN_EARLIEST = 18 * 60
LATE_ARRIVAL = 18 * 60
NIGHT_START, NIGHT_END = 23 * 60, 6 * 60
MIN_GAP = 30
MAX_IDLE = 120
MAX_DAILY_LOCAL_TRANSPORT = 120
MAX_LEG = 60
MAX_ATTRACTIONS = 4
MIN_DAY_FOR_ATTRACTION = 240


def _hm(minutes: float) -> str:
    return minutes_to_time(int(minutes) % DAY_MINUTES)


def meal_owed(view: DayView, meal: str) -> bool:
    lo, hi = MEAL_WINDOWS[meal]
    return min(hi, view.depart) - max(lo, view.arrive) >= MEAL_MIN_PRESENCE


def _leg_min(act) -> float:
    return (act.transport.duration_min or 0.0) if act.transport else 0.0


@constraint(
    "complete_meals",
    "Reasonableness",
    "Breakfast, lunch and dinner every day the traveller is in town for the meal's "
    "window (>= 90 min of it), each exactly once.",
)
def complete_meals(ctx: EvalContext) -> list[str]:
    out = []
    for view in ctx.days:
        counts = Counter(a.meal for a in view.day.activities if a.type == "meal")
        for meal in MEALS:
            if counts[meal] == 0 and meal_owed(view, meal):
                out.append(f"day {view.day.number}: no {meal}")
            elif counts[meal] > 1:
                out.append(f"day {view.day.number}: {counts[meal]} {meal}s")
    return out


@constraint("no_repeated_restaurants", "Reasonableness", "No restaurant appears twice in the plan.")
def no_repeated_restaurants(ctx: EvalContext) -> list[str]:
    seen: dict[str, str] = {}
    out = []
    for view in ctx.days:
        for act in view.day.activities:
            if act.type == "meal" and act.name:
                key, where = normalize_name(act.name), f"day {view.day.number} {act.label}"
                if key in seen:
                    out.append(f"{where} repeats {seen[key]}")
                else:
                    seen[key] = where
    return out


@constraint(
    "reasonable_meal_times",
    "Reasonableness",
    "Every meal lies inside its window: breakfast 07:00-09:30, lunch 11:00-14:00, dinner 17:00-20:30.",
)
def reasonable_meal_times(ctx: EvalContext) -> list[str]:
    out = []
    for view in ctx.days:
        for act in view.day.activities:
            if act.type == "meal" and act.meal in MEAL_WINDOWS:
                lo, hi = MEAL_WINDOWS[act.meal]
                if act.start < lo or act.end > hi:
                    out.append(
                        f"day {view.day.number} {act.label}: outside {act.meal} time {_hm(lo)}-{_hm(hi)}"
                    )
    return out


@constraint(
    "daily_accommodation",
    "Reasonableness",
    "Every day but the last ends with a hotel check-in for the night.",
)
def daily_accommodation(ctx: EvalContext) -> list[str]:
    out = []
    for view in ctx.days[:-1]:
        acts = view.day.activities
        if not any(a.type == "hotel" for a in acts):
            out.append(f"day {view.day.number}: no hotel for the night")
        elif acts[-1].type != "hotel":
            out.append(f"day {view.day.number}: the hotel check-in is not the day's last activity")
    return out


@constraint("accommodation_time", "Reasonableness", "Hotel check-in is at or after 18:00.")
def accommodation_time(ctx: EvalContext) -> list[str]:
    return [
        f"day {view.day.number} {act.label}: check-in before 18:00"
        for view in ctx.days
        for act in view.day.activities
        if act.type == "hotel" and act.start < HOTEL_CHECKIN_EARLIEST
    ]


def _overlaps_night(start: float, end: float) -> bool:
    """Whether [start, end] (minutes; may run past 24:00 or start before 0) touches 23:00-06:00."""
    for night_lo in (NIGHT_START - DAY_MINUTES, NIGHT_START, NIGHT_START + DAY_MINUTES):
        if start < night_lo + (DAY_MINUTES - NIGHT_START + NIGHT_END) and night_lo < end:
            return True
    return False


@constraint(
    "no_midnight_travel",
    "Reasonableness",
    "No intercity transport and no local trip between 23:00 and 06:00.",
)
def no_midnight_travel(ctx: EvalContext) -> list[str]:
    out = []
    for view in ctx.days:
        for act in view.day.activities:
            if act.type == "intercity_transport":
                end = act.end + (DAY_MINUTES if act.end < act.start else 0)
                if _overlaps_night(act.start, end):
                    out.append(f"day {view.day.number} {act.label}: travels at night")
        for leg in view.legs:
            start = leg.activity.start - leg.stated_min
            if leg.stated_min > 0 and _overlaps_night(start, leg.activity.start):
                out.append(
                    f"day {view.day.number}: local trip to {leg.activity.label} from {_hm(start)} is at night"
                )
    return out


@constraint(
    "no_sightseeing_after_late_arrival",
    "Reasonableness",
    "No attraction or entertainment after arriving in the city at or after 18:00.",
)
def no_sightseeing_after_late_arrival(ctx: EvalContext) -> list[str]:
    out = []
    for view in ctx.days:
        late = [a.end for a in view.outbound if a.end >= LATE_ARRIVAL and a.end >= a.start]
        if not late:
            continue
        for act in view.day.activities:
            if act.type in ("attraction", "entertainment") and act.start >= min(late):
                out.append(f"day {view.day.number} {act.label}: after arriving at {_hm(min(late))}")
    return out


@constraint(
    "daily_local_transport_limit", "Reasonableness", "Local transport adds up to at most 2 hours per day."
)
def daily_local_transport_limit(ctx: EvalContext) -> list[str]:
    out = []
    for view in ctx.days:
        total = sum(leg.stated_min for leg in view.legs)
        if total > MAX_DAILY_LOCAL_TRANSPORT:
            out.append(
                f"day {view.day.number}: {total:g} min of local transport (max {MAX_DAILY_LOCAL_TRANSPORT})"
            )
    return out


@constraint(
    "weather_and_city_info",
    "Reasonableness",
    "Each day names the destination city, its city information and that date's weather as the store has it.",
)
def weather_and_city_info(ctx: EvalContext) -> list[str]:
    out = []
    dest = normalize_name(ctx.destination)
    for view in ctx.days:
        day, where = view.day, f"day {view.day.number}"
        if not day.city or normalize_name(day.city) != dest:
            out.append(f"{where}: city {day.city!r} is not the destination {ctx.destination}")
        if not day.city_info:
            out.append(f"{where}: no city information")
        if day.weather is None or not day.weather.condition:
            out.append(f"{where}: no weather")
            continue
        record = ctx.index.weather(ctx.destination, view.date) if view.date else None
        if record is None:
            continue
        stated = day.weather
        if normalize_name(stated.condition) != normalize_name(record.condition):
            out.append(f"{where}: weather {stated.condition!r} but the forecast is {record.condition!r}")
        for label, mine, truth in (
            ("max", stated.max_temp, record.max_temp),
            ("min", stated.min_temp, record.min_temp),
        ):
            if mine is not None and abs(mine - truth) > 0.5:
                out.append(f"{where}: {label} temperature {mine:g} but the forecast says {truth:g}")
    return out


def _hours_in_town(view: DayView) -> int:
    return min(view.depart, DAY_END) - max(view.arrive, DAY_START)


@constraint(
    "min_one_attraction",
    "Reasonableness",
    "At least one attraction each day (days with under 4 h in town within 09:00-21:00 are exempt).",
)
def min_one_attraction(ctx: EvalContext) -> list[str]:
    return [
        f"day {view.day.number}: no attraction"
        for view in ctx.days
        if _hours_in_town(view) >= MIN_DAY_FOR_ATTRACTION
        and not any(a.type == "attraction" for a in view.day.activities)
    ]


@constraint("max_four_attractions", "Reasonableness", "At most 4 attractions per day.")
def max_four_attractions(ctx: EvalContext) -> list[str]:
    out = []
    for view in ctx.days:
        n = sum(a.type == "attraction" for a in view.day.activities)
        if n > MAX_ATTRACTIONS:
            out.append(f"day {view.day.number}: {n} attractions (max {MAX_ATTRACTIONS})")
    return out


@constraint(
    "no_time_conflicts",
    "Reasonableness",
    "Activities are in time order without overlap, at least max(30 min, the stated transport time) apart.",
)
def no_time_conflicts(ctx: EvalContext) -> list[str]:
    out = []
    for view in ctx.days:
        acts = view.day.activities
        where = f"day {view.day.number}"
        for i, act in enumerate(acts):
            overnight = act.end < act.start
            if overnight and (act.type != "intercity_transport" or i != len(acts) - 1):
                out.append(f"{where} {act.label}: ends before it starts")
            if i == 0:
                continue
            prev = acts[i - 1]
            if prev.end < prev.start:
                continue  # already reported
            need = max(MIN_GAP, _leg_min(act))
            gap = act.start - prev.end
            if gap < need:
                out.append(
                    f"{where} {act.label}: starts {gap} min after {prev.label} ends (needs >= {need:g})"
                )
    return out


@constraint(
    "activity_time_range",
    "Reasonableness",
    "Attractions, entertainment, lunch and dinner happen between 09:00 and 21:00.",
)
def activity_time_range(ctx: EvalContext) -> list[str]:
    return [
        f"day {view.day.number} {act.label}: outside 09:00-21:00"
        for view in ctx.days
        for act in view.day.activities
        if (act.type in ("attraction", "entertainment") or act.meal in ("lunch", "dinner"))
        and (act.start < DAY_START or act.end > DAY_END or act.end < act.start)
    ]


@constraint(
    "inter_attraction_transport", "Reasonableness", "Each local trip between places takes at most 1 hour."
)
def inter_attraction_transport(ctx: EvalContext) -> list[str]:
    return [
        f"day {view.day.number}: trip to {leg.activity.label} takes {leg.stated_min:g} min (max {MAX_LEG})"
        for view in ctx.days
        for leg in view.legs
        if leg.stated_min > MAX_LEG
    ]


@constraint("no_long_gaps", "Reasonableness", "No idle stretch longer than 2 hours within 09:00-21:00.")
def no_long_gaps(ctx: EvalContext) -> list[str]:
    out = []
    for view in ctx.days:
        spans = []
        for act in view.day.activities:
            end = DAY_MINUTES if act.end < act.start else act.end
            spans.append((act.start - _leg_min(act), end))
        spans.sort()
        cursor = None if view.is_first else DAY_START
        for start, end in spans:
            if cursor is not None:
                lo, hi = max(cursor, DAY_START), min(start, DAY_END)
                if hi - lo > MAX_IDLE:
                    out.append(f"day {view.day.number}: idle from {_hm(lo)} to {_hm(hi)}")
            cursor = end if cursor is None else max(cursor, end)
    return out
