"""The travel plan format (the `<answer>` body) and its tolerant reader.

A plan is a JSON list with one object per day (docs/ARCHITECTURE.md, "Plan format"):

    {"day": 1, "date": "YYYY-MM-DD", "city": str,
     "weather": {"condition": str, "max_temp": int, "min_temp": int}, "city_info": str,
     "activities": [activity, ...]}                       # in time order

Each activity has a `type`, a `start_time` and an `end_time` ("HH:MM", "24:00" allowed) and, by type:
- intercity_transport: mode ("train" | "flight"), number, from_city, to_city, seat_class, price;
- meal (meal: breakfast | lunch | dinner), attraction, entertainment, hotel: name, price and
  `transport` {"mode": one of vocab.INTRACITY_MODES, "duration_min": number, "distance_km": number}
  (the local trip that arrives at this activity); optional `description` and `tips`.

Models write JSON sloppily, and a reward that punishes a stray comma teaches nothing useful, so
`read_plan` normalises what is unambiguous: an `<answer>` wrapper, code fences, prose around the
list, trailing commas, a {"plan": [...]} wrapper, camelCase / spaced / synonym keys ("cost" ->
price, "time": "12:00-13:00" -> start/end), type and mode synonyms ("restaurant" -> meal, "metro" ->
Subway), "7:05" -> "07:05", numeric strings and "¥220" prices. What cannot be read as this structure
(not JSON, not a list of day objects, an activity without a known type or valid times) is a
format failure with a reason; the reader never raises. This module reads the structure; the
forgiving readers of text, keys and scalars it uses live in plan_lenient.py.

Only the structure is checked here; whether day numbers and dates fit the query, and every other
rule, is the evaluator's job (sandbox/benchmarks/b2t/evaluator/).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sandbox.benchmarks.b2t.plan_lenient import (
    FormatError,
    as_int,
    as_number,
    as_price,
    as_text,
    load_json,
    norm_keys,
    synonym_key,
)
from sandbox.benchmarks.b2t.plan_synonyms import (
    INTERCITY_MODE_SYNONYMS,
    LOCAL_MODE_SYNONYMS,
    PLAN_WRAPPERS,
    TYPE_SYNONYMS,
)

ACTIVITY_TYPES = ("intercity_transport", "meal", "attraction", "entertainment", "hotel")
# Activity types that happen at a named place reached by local transport.
LOCAL_TYPES = ("meal", "attraction", "entertainment", "hotel")
MEALS = ("breakfast", "lunch", "dinner")
INTERCITY_MODES = ("train", "flight")

# Hard limits: a plan beyond them is not a plan but a runaway generation (and plan_lenient's
# MAX_TEXT_CHARS for the answer's text).
MAX_DAYS = 60
MAX_ACTIVITIES_PER_DAY = 60

_TRAIN_NUMBER = re.compile(r"^[GDCKTZYL]\d{1,4}$")
_FLIGHT_NUMBER = re.compile(r"^[A-Z0-9]{2}\d{2,4}$")
_TIME = re.compile(r"^\s*(\d{1,2})[:：.](\d{2})(?::\d{2})?\s*$")
_TIME_RANGE = re.compile(r"^\s*(\d{1,2}[:：.]\d{2})\s*(?:-|–|—|~|to)\s*(\d{1,2}[:：.]\d{2})\s*$")


@dataclass(frozen=True)
class LocalTransport:
    """The local trip that arrives at an activity, as the plan states it."""

    mode: str | None
    duration_min: float | None
    distance_km: float | None


@dataclass(frozen=True)
class Weather:
    condition: str | None
    max_temp: float | None
    min_temp: float | None


@dataclass
class Activity:
    """One normalised activity. Fields the plan left out or wrote with a wrong type are None."""

    index: int  # position in its day, 0-based
    type: str
    start_time: str  # "HH:MM"
    end_time: str
    start: int  # minutes after midnight
    end: int
    name: str | None = None
    price: float | None = None
    meal: str | None = None
    transport: LocalTransport | None = None
    mode: str | None = None  # intercity: "train" | "flight"
    number: str | None = None
    from_city: str | None = None
    to_city: str | None = None
    seat_class: str | None = None
    description: str | None = None
    tips: str | None = None

    @property
    def label(self) -> str:
        """How reasons name this activity, e.g. "lunch 'Spicy House' 12:20-13:20"."""
        kind = self.meal or (self.mode if self.type == "intercity_transport" and self.mode else self.type)
        what = self.number if self.type == "intercity_transport" else self.name
        return (
            f"{kind} {what!r} {self.start_time}-{self.end_time}"
            if what
            else (f"{kind} {self.start_time}-{self.end_time}")
        )


@dataclass
class Day:
    number: int
    date: str | None
    city: str | None
    weather: Weather | None
    city_info: str | None
    activities: list[Activity]


@dataclass
class Plan:
    days: list[Day]


@dataclass(frozen=True)
class PlanReadResult:
    """`plan` is None exactly when the answer is not a readable plan; `reason` then says why."""

    plan: Plan | None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.plan is not None


def read_plan(answer: Any) -> PlanReadResult:
    """Read an answer (text, or already-parsed JSON) into a Plan; never raises."""
    try:
        data = load_json(answer) if isinstance(answer, str) else answer
        return PlanReadResult(_to_plan(data))
    except FormatError as err:
        return PlanReadResult(None, str(err))
    except RecursionError:
        return PlanReadResult(None, "plan JSON is nested too deeply")


def time_to_minutes(value: Any) -> int | None:
    """ "HH:MM" (also "H:MM", "HH:MM:SS", "HH.MM") -> minutes after midnight, "24:00" -> 1440."""
    if not isinstance(value, str):
        return None
    if len(value) == 5 and value[2] == ":" and value[:2].isdigit() and value[3:].isdigit():
        hours, minutes = int(value[:2]), int(value[3:])  # fast path for canonical "HH:MM"
        if minutes > 59 or hours > 24 or (hours == 24 and minutes):
            return None
        return hours * 60 + minutes
    match = _TIME.match(value)
    if not match:
        return None
    hours, minutes = int(match.group(1)), int(match.group(2))
    if minutes > 59 or hours > 24 or (hours == 24 and minutes):
        return None
    return hours * 60 + minutes


def minutes_to_time(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def normalize_name(name: str) -> str:
    """The form names are compared in: case-folded, inner whitespace collapsed."""
    return " ".join(name.split()).casefold()


# ---------------------------------------------------------------- JSON -> Plan


def _to_plan(data: Any) -> Plan:
    if isinstance(data, dict):
        wrapped = [
            v
            for k, v in data.items()
            if isinstance(k, str) and k.strip().lower() in PLAN_WRAPPERS and isinstance(v, list)
        ]
        if wrapped:
            data = wrapped[0]
        else:
            raise FormatError("plan must be a JSON list of day objects, got an object")
    if not isinstance(data, list):
        raise FormatError(f"plan must be a JSON list of day objects, got {type(data).__name__}")
    if not data:
        raise FormatError("plan is an empty list")
    if len(data) > MAX_DAYS:
        raise FormatError(f"plan has {len(data)} days (more than {MAX_DAYS})")
    return Plan([_to_day(position, raw) for position, raw in enumerate(data)])


def _to_day(position: int, raw: Any) -> Day:
    where = f"day {position + 1}"
    if not isinstance(raw, dict):
        raise FormatError(f"{where} must be an object, got {type(raw).__name__}")
    obj = norm_keys(raw)
    number = as_int(obj.get("day"))
    if "day" in obj and number is None:
        raise FormatError(f"{where}: 'day' must be a day number, got {obj['day']!r}")
    number = position + 1 if number is None else number
    activities = obj.get("activities")
    if not isinstance(activities, list):
        raise FormatError(f"{where} has no 'activities' list")
    if len(activities) > MAX_ACTIVITIES_PER_DAY:
        raise FormatError(f"{where} has {len(activities)} activities (more than {MAX_ACTIVITIES_PER_DAY})")
    return Day(
        number=number,
        date=as_text(obj.get("date")),
        city=as_text(obj.get("city")),
        weather=_to_weather(obj.get("weather")),
        city_info=as_text(obj.get("city_info")),
        activities=[_to_activity(f"day {number}", i, a) for i, a in enumerate(activities)],
    )


def _to_activity(where: str, index: int, raw: Any) -> Activity:
    where = f"{where} activity {index + 1}"
    if not isinstance(raw, dict):
        raise FormatError(f"{where} must be an object, got {type(raw).__name__}")
    obj = norm_keys(raw)
    raw_type = obj.get("type")
    type_key = synonym_key(raw_type) if isinstance(raw_type, str) and len(raw_type) < 100 else None
    kind = TYPE_SYNONYMS.get(type_key, type_key) if type_key else None
    if kind not in ACTIVITY_TYPES:
        raise FormatError(f"{where} has unknown type {raw_type!r}; use one of {', '.join(ACTIVITY_TYPES)}")
    if isinstance(obj.get("time"), str) and "start_time" not in obj:
        span = _TIME_RANGE.match(obj["time"])
        if span:
            obj["start_time"], obj["end_time"] = span.group(1), span.group(2)
    start, end = time_to_minutes(obj.get("start_time")), time_to_minutes(obj.get("end_time"))
    for key, value in (("start_time", start), ("end_time", end)):
        if value is None:
            raise FormatError(
                f"{where} ({obj.get('name') or obj.get('number') or kind}) has "
                f'missing or invalid {key} {obj.get(key)!r}; use "HH:MM"'
            )
    meal = as_text(obj.get("meal"))
    meal = meal.lower() if meal else (type_key if type_key in MEALS else None)
    number = as_text(obj.get("number"))
    mode = None
    if kind == "intercity_transport":
        mode = _intercity_mode(obj.get("mode"), type_key, number)
    return Activity(
        index=index,
        type=kind,
        start_time=_canonical_time(obj["start_time"], start),
        end_time=_canonical_time(obj["end_time"], end),
        start=start,
        end=end,
        name=as_text(obj.get("name")),
        price=as_price(obj.get("price")),
        meal=meal if kind == "meal" else None,
        transport=_to_transport(obj.get("transport")),
        mode=mode,
        number=number.upper() if number else None,
        from_city=as_text(obj.get("from_city")),
        to_city=as_text(obj.get("to_city")),
        seat_class=as_text(obj.get("seat_class")),
        description=as_text(obj.get("description")),
        tips=as_text(obj.get("tips")),
    )


def _canonical_time(text: str, minutes: int) -> str:
    return text if len(text) == 5 and text[2] == ":" else minutes_to_time(minutes)


def _intercity_mode(raw_mode: Any, type_key: str | None, number: str | None) -> str | None:
    if isinstance(raw_mode, str) and len(raw_mode) < 100:
        key = synonym_key(raw_mode)
        if key in INTERCITY_MODE_SYNONYMS:
            return INTERCITY_MODE_SYNONYMS[key]
    if type_key in ("train", "flight"):
        return type_key
    if number:
        if _TRAIN_NUMBER.match(number.upper()):
            return "train"
        if _FLIGHT_NUMBER.match(number.upper()):
            return "flight"
    return None


def _to_transport(raw: Any) -> LocalTransport | None:
    if isinstance(raw, str):  # "Subway, 25 min"
        raw = {"mode": raw.split(",")[0]}
    if not isinstance(raw, dict):
        return None
    obj = norm_keys(raw)
    mode = as_text(obj.get("mode"))
    if mode and len(mode) < 100:
        mode = LOCAL_MODE_SYNONYMS.get(synonym_key(mode), mode)
    return LocalTransport(
        mode=mode,
        duration_min=as_number(obj.get("duration_min")),
        distance_km=as_number(obj.get("distance_km")),
    )


def _to_weather(raw: Any) -> Weather | None:
    if isinstance(raw, str) and raw.strip():
        return Weather(condition=raw.strip(), max_temp=None, min_temp=None)
    if not isinstance(raw, dict):
        return None
    obj = norm_keys(raw)
    return Weather(
        condition=as_text(obj.get("condition")),
        max_temp=as_number(obj.get("max_temp")),
        min_temp=as_number(obj.get("min_temp")),
    )
