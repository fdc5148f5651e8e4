"""Structured TravelPlanner queries from their natural-language text, by rules (no LLM).

The official query texts are formulaic: origin after a departure cue ("from", "departing",
"starting in", ...), the destination city (3-day trips) or state (5- and 7-day trips), the
duration, dates in March 2022, the party size, a "$N" budget and the local constraints as
keywords. Only the 9 structured training files carry these fields; this parser recovers them for
the other 36 training queries (and for any user file that has only the text). It never sees
validation or test queries unless a user passes them, and nothing is tuned on them.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import Any

CUISINES = ("Chinese", "American", "Italian", "Mexican", "Indian", "Mediterranean", "French")
_NUMBER_WORDS = {
    "one": 1,
    "single": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_NUM = r"(\d+|one|two|three|four|five|six|seven|eight|nine|ten)"
_MONTHS = {
    m: i
    for i, m in enumerate(
        (
            "January",
            "February",
            "March",
            "April",
            "May",
            "June",
            "July",
            "August",
            "September",
            "October",
            "November",
            "December",
        ),
        1,
    )
}
# Words that put the origin city right after them ("departing from X", "starting in X", ...).
_ORIGIN_CUE = re.compile(
    r"\b(?:from|departing|departs|depart|starting in|starts in|starting at|start in|"
    r"beginning in|leaving|originating from|setting off from|taking off from|"
    r"starting)\s+(?:from\s+|in\s+)?$"
)
_HOUSE_RULES = (
    ("children under", "children under 10"),
    ("smok", "smoking"),
    ("part", "parties"),
    ("visitor", "visitors"),
    ("pet", "pets"),
)
_ROOM_TYPES = (
    ("not shared", "not shared room"),
    ("shared room", "shared room"),
    ("private room", "private room"),
    ("entire room", "entire room"),
)


class QueryTextError(ValueError):
    """The text lacks a field the rules need (the message names it)."""


def _number(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBER_WORDS[word.lower()]


def _find_places(text: str, names: Sequence[str]) -> list[tuple[int, int, str]]:
    """(start, end, name) of every whole-word occurrence, longest names first, no overlaps."""
    taken: list[tuple[int, int, str]] = []
    for name in sorted(names, key=len, reverse=True):
        for m in re.finditer(r"(?<![\w.])" + re.escape(name) + r"(?!\w)", text):
            if all(m.end() <= s or m.start() >= e for s, e, _ in taken):
                taken.append((m.start(), m.end(), name))
    return sorted(taken)


def parse_days(text: str) -> int:
    """The stated duration, else the length of the date range ("from March 24th to March 26th")."""
    if re.search(r"\bweek\b|week-long|one-week", text, re.I):
        return 7
    m = re.search(_NUM + r"[- ]days?\b", text, re.I)
    if m:
        return _number(m.group(1))
    first, last = _date_range(text)
    if last is None:
        raise QueryTextError('no trip duration ("N days", "a week" or a date range) in the query text')
    return (last - first).days + 1


def parse_people(text: str) -> int:
    """Party size; a text that names none is a solo trip (as the official queries are)."""
    for pattern in (
        r"(?:group|party) of " + _NUM,
        _NUM + r" (?:people|persons|individuals|travell?ers)\b",
        r"\bfor " + _NUM + r"(?![\w-])(?! (?:days?|weeks?|cities)\b)",
    ):
        m = re.search(pattern, text, re.I)
        if m and m.group(1).lower() != "single":
            return _number(m.group(1))
    if re.search(r"\b(?:a pair|a couple)\b", text, re.I):
        return 2
    return 1


def _date_range(text: str) -> tuple[dt.date, dt.date | None]:
    """First and (if given) second day of month in the text, in the month and year it names.

    The official texts keep a trip inside one month ("between March 9th and 13th, 2022").
    """
    year_match = re.search(r"\b(20\d\d)\b", text)
    month_match = re.search(r"\b(?:" + "|".join(_MONTHS) + r")\b", text)
    day_numbers = [int(d) for d in re.findall(r"\b(\d{1,2})(?:st|nd|rd|th)\b", text)]
    if not (year_match and month_match and day_numbers):
        raise QueryTextError('no start date ("March 16th, 2022") in the query text')
    year, month = int(year_match.group(1)), _MONTHS[month_match.group(0)]
    try:
        first = dt.date(year, month, day_numbers[0])
        last = dt.date(year, month, day_numbers[1]) if len(day_numbers) > 1 else None
    except ValueError as err:
        raise QueryTextError(f"an impossible date in the query text ({err})") from None
    return first, last


def parse_dates(text: str, days: int) -> list[str]:
    """The trip's dates: the first day named in the text, then `days` days on."""
    start = _date_range(text)[0]
    return [(start + dt.timedelta(days=i)).isoformat() for i in range(days)]


def parse_local_constraint(text: str) -> dict[str, Any]:
    lower = text.lower()
    # word boundaries: "Indianapolis" is no Indian cuisine
    found = ((re.search(rf"\b{c.lower()}\b", lower), c) for c in CUISINES)
    cuisines = sorted((m.start(), c) for m, c in found if m)
    house_rule = next((rule for key, rule in _HOUSE_RULES if _has_house_rule(lower, key)), None)
    room_type = next((room for key, room in _ROOM_TYPES if key in lower), None)
    transport = None
    if re.search(r"\bfl(?:y|ying|ight|ights)\b", lower):
        transport = "no flight"
    elif re.search(r"self-driv|self-drive|drive ourselves|driving ourselves", lower):
        transport = "no self-driving"
    return {
        "house rule": house_rule,
        "cuisine": [c for _, c in cuisines] or None,
        "room type": room_type,
        "transportation": transport,
    }


def _has_house_rule(lower: str, key: str) -> bool:
    if key == "part":
        return re.search(r"\bpart(?:y|ies)\b(?! of)", lower) is not None  # "a party of 5" is people
    if key == "pet":
        return re.search(r"\bpets?\b|pet-friendly", lower) is not None
    return key in lower


def level_of(local_constraint: dict[str, Any]) -> str:
    """easy: budget only; medium: one local constraint; hard: more (the official levels)."""
    n = sum(v is not None for v in local_constraint.values())
    return "easy" if n == 0 else "medium" if n == 1 else "hard"


def parse_query_text(text: str, city_states: dict[str, str]) -> dict[str, Any]:
    """The structured query (official field names) of a formulaic query text.

    `city_states` maps each city of the city list to its state. QueryTextError when a field the
    rules need is missing.
    """
    days = parse_days(text)
    cities = _find_places(text, list(city_states))
    origins = [c for c in cities if _ORIGIN_CUE.search(text[: c[0]])]
    if not origins:
        raise QueryTextError('no origin city after a departure cue ("from X") in the query text')
    org = origins[0]
    rest = [c for c in cities if c[0] >= org[1] or c[1] <= org[0]]
    if days == 3:
        dest_cities = [c[2] for c in rest if c[2] != org[2]]
        if not dest_cities:
            raise QueryTextError("no destination city in the query text")
        dest = dest_cities[0]
    else:
        outside_org = text[: org[0]] + " " * (org[1] - org[0]) + text[org[1] :]
        states = _find_places(outside_org, sorted(set(city_states.values())))
        if not states:
            raise QueryTextError("no destination state in the query text")
        dest = states[0][2]
    m = re.search(_NUM + r"\s+(?:\w+\s+)?cities\b", text, re.I)
    visiting = _number(m.group(1)) if m else 1
    budget = re.search(r"\$\s?([\d,]+)", text)
    if not budget:
        raise QueryTextError('no budget ("$N") in the query text')
    local = parse_local_constraint(text)
    return {
        "org": org[2],
        "dest": dest,
        "days": days,
        "visiting_city_number": visiting,
        "date": parse_dates(text, days),
        "people_number": parse_people(text),
        "local_constraint": local,
        "budget": int(budget.group(1).replace(",", "")),
        "query": text,
        "level": level_of(local),
    }
