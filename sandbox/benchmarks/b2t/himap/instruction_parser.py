"""The B2T task tuple, read from what the agent sees: the instruction text and the behaviour log.

The instruction is one of the generator's phrasings (sandbox/benchmarks/b2t/instances/instructions.py); each
template is turned back into a pattern, so the reader follows the templates instead of guessing.
The trajectory becomes a summary: for every kind of place, how often each attribute value was
favourited or booked (noise behaviours are only ever clicks, so clicks are left out), and what
the user booked in the destination before (the places a new plan must not revisit). The summary
names no event, id or timestamp: it is what an executor may see instead of the trajectory.
"""

from __future__ import annotations

import collections
import datetime as dt
import re
from typing import Any

from sandbox.benchmarks.b2t.instances.instructions import (
    _EN_PARTY,
    _EN_PEOPLE,
    _EN_TEMPLATES,
    _ZH_PARTY,
    _ZH_TEMPLATES,
)
from sandbox.benchmarks.b2t.world.cities import CITIES


class TaskParseError(ValueError):
    """The instruction is not one the B2T generator writes."""


_FIELD = {
    "days": r"(?P<days>\d+)",
    "origin": r"(?P<origin>.+?)",
    "destination": r"(?P<destination>.+?)",
    "party": r"(?P<party>.+?)",
    "people_text": r"(?P<people_text>\d+ travellers?)",
    "start": r"(?P<start>.+?)",
    "end": r"(?P<end>.+?)",
    "budget": r"(?P<budget>[\d,]+)",
}


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{\w+\})", template)
    body = "".join(_FIELD[p[1:-1]] if p.startswith("{") else re.escape(p) for p in parts)
    return re.compile(f"^{body}$")


_EN = [_pattern(t) for t in _EN_TEMPLATES]
_ZH = [_pattern(t) for t in _ZH_TEMPLATES]
_EN_PARTY_SIZE = {text: n for n, texts in _EN_PARTY.items() for text in texts}
_EN_PEOPLE_SIZE = {text: n for n, text in _EN_PEOPLE.items()}
_ZH_PARTY_SIZE = {text: n for n, text in _ZH_PARTY.items()}
_ZH_CITY = {c.name_zh: c.name for c in CITIES}
_ZH_DATE = re.compile(r"^(\d{4})年(\d{1,2})月(\d{1,2})日$")


def _date(text: str) -> dt.date:
    m = _ZH_DATE.match(text)
    if m:
        return dt.date(int(m[1]), int(m[2]), int(m[3]))
    return dt.datetime.strptime(text, "%B %d, %Y").date()


def parse_instruction(text: str) -> dict[str, Any]:
    """origin, destination, start_date, end_date, days, people, budget of a B2T instruction."""
    for patterns, zh in ((_EN, False), (_ZH, True)):
        for pattern in patterns:
            m = pattern.match(text.strip())
            if m is None:
                continue
            fields = m.groupdict()
            try:
                people = (
                    _ZH_PARTY_SIZE[fields["party"]]
                    if zh
                    else _EN_PEOPLE_SIZE.get(fields.get("people_text") or "")
                    or _EN_PARTY_SIZE[fields["party"]]
                )
                start, end = _date(fields["start"]), _date(fields["end"])
            except (KeyError, ValueError):
                continue  # another template may read it
            origin, destination = fields["origin"], fields["destination"]
            if zh:
                origin, destination = _ZH_CITY.get(origin, origin), _ZH_CITY.get(destination, destination)
            return {
                "origin": origin,
                "destination": destination,
                "start_date": start.isoformat(),
                "end_date": end.isoformat(),
                "days": int(fields["days"]),
                "people": people,
                "budget": float(fields["budget"].replace(",", "")),
            }
    raise TaskParseError(f"not a B2T travel request: {text[:80]!r}")


# Attributes worth summarising per place kind (the event details' keys).
_SUMMARY_KEYS = {
    "hotel": ("star", "facilities", "hotel_type"),
    "restaurant": ("cuisine", "price_level", "environment"),
    "attraction": ("attraction_type", "walking_km"),
    "train": ("mode", "seat_class"),
    "flight": ("mode", "seat_class"),
}
_STRONG = ("add_to_favorites", "favorite", "book")


def _walking_band(km: float) -> str:
    return "<=3 km" if km <= 3 else "3-5 km" if km <= 5 else ">5 km"


def preference_summary(trajectory: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, int]]]:
    """{kind: {attribute: {value: count}}} over favourited and booked places (one count per place)."""
    seen: dict[str, dict[str, Any]] = {}
    for event in trajectory:
        if event.get("action") in _STRONG and event.get("poi_type") in _SUMMARY_KEYS:
            seen[str(event.get("poi_id"))] = event
    summary: dict[str, dict[str, collections.Counter[str]]] = {}
    for event in seen.values():
        kind, details = event["poi_type"], event.get("details") or {}
        kind_key = "transport" if kind in ("train", "flight") else kind
        for key in _SUMMARY_KEYS[kind]:
            value = details.get(key)
            values = value if isinstance(value, list) else [value]
            if key == "walking_km" and isinstance(value, (int, float)):
                values = [_walking_band(float(value))]
            counter = summary.setdefault(kind_key, {}).setdefault(key, collections.Counter())
            counter.update(str(v) for v in values if v not in (None, ""))
    return {
        kind: {k: dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))) for k, c in attrs.items() if c}
        for kind, attrs in sorted(summary.items())
    }


_HISTORY = {"hotel": "hotels", "restaurant": "restaurants", "attraction": "attractions"}


def booked_before(trajectory: list[dict[str, Any]], destination: str) -> dict[str, list[str]]:
    """Names of the places the user booked in `destination` (the profile history's source)."""
    out: dict[str, list[str]] = {}
    for event in trajectory:
        details = event.get("details") or {}
        kind = _HISTORY.get(str(event.get("poi_type")))
        if event.get("action") == "book" and kind and details.get("city") == destination:
            names = out.setdefault(kind, [])
            if event.get("poi_name") not in names:
                names.append(str(event.get("poi_name")))
    return out


def task_tuple(visible: dict[str, Any]) -> dict[str, Any]:
    """The coordinator's task tuple of a visible B2T instance."""
    query = parse_instruction(str(visible.get("instruction", "")))
    start = dt.date.fromisoformat(query["start_date"])
    trajectory = visible.get("trajectory") or []
    return {
        **query,
        "dates": [(start + dt.timedelta(days=i)).isoformat() for i in range(query["days"])],
        "hard_constraints": {
            "budget_total": query["budget"],
            "round_trip": f"{query['origin']} -> {query['destination']} -> {query['origin']}",
            "do_not_revisit": booked_before(trajectory, query["destination"]),
        },
        "soft_preferences": preference_summary(trajectory),
    }
