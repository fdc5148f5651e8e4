"""Read a TravelPlanner plan out of a model's answer, by rules (no language model).

Accepted, tried in this order:
1. JSON: a list of day objects, or an object with a "plan" list (code fences allowed);
2. a Python literal of the same (single quotes, None), as the official training file writes plans;
3. the text format of the official prompts:
       Day 1:
       Current City: from A to B
       Transportation: Flight Number: F123, from A to B, ...
       Breakfast: -
       Attraction: X, B;Y, B;
       Lunch: ...
       Dinner: ...
       Accommodation: ...
   (keys case-insensitive, markdown bold/bullets ignored; a field not written is "-").
Returns None when none of these finds a plan.
"""

import ast
import json
import re
from typing import Any

from sandbox.textscan import code_fences, split_field

FIELD_KEYS = {
    "current city": "current_city",
    "current_city": "current_city",
    "transportation": "transportation",
    "breakfast": "breakfast",
    "attraction": "attraction",
    "attractions": "attraction",
    "lunch": "lunch",
    "dinner": "dinner",
    "accommodation": "accommodation",
    "accommodations": "accommodation",
}
PLAN_FIELDS = (
    "current_city",
    "transportation",
    "breakfast",
    "attraction",
    "lunch",
    "dinner",
    "accommodation",
)

# Each reader is linear in the answer (sandbox/textscan.py says why the old patterns were not).
_DAY_HEADER = re.compile(r"^[\s*#>-]*day\s*(\d+)[*:\s]*(.*)$", re.IGNORECASE)
_PREFIX = re.compile(r"[\s*#>-]*")
_KEY = re.compile(r"[A-Za-z_ ]+")
_MAX_DAY_DIGITS = 4


def _as_plan(value: Any) -> list[Any] | None:
    if isinstance(value, dict) and isinstance(value.get("plan"), list):
        value = value["plan"]
    if isinstance(value, list) and value and all(isinstance(d, dict) for d in value):
        return value
    return None


def _structured(text: str) -> list[Any] | None:
    """JSON or a Python literal, of the whole text or of its outermost [...] / {...} span."""
    candidates = [text]
    for opener, closer in (("[", "]"), ("{", "}")):
        start, end = text.find(opener), text.rfind(closer)
        if 0 <= start < end:
            candidates.append(text[start : end + 1])
    for candidate in candidates:
        for parse in (json.loads, ast.literal_eval):
            try:
                plan = _as_plan(parse(candidate))
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if plan is not None:
                return plan
    return None


def _text_format(text: str) -> list[dict[str, Any]] | None:
    days: list[dict[str, Any]] = []
    for line in text.splitlines():
        header = _DAY_HEADER.match(line)
        if header and len(header.group(1)) <= _MAX_DAY_DIGITS:
            days.append({"days": int(header.group(1)), **{f: "-" for f in PLAN_FIELDS}})
            line = header.group(2)  # "Day 1: Current City: X" carries a field on the same line
        field = split_field(line, _PREFIX, _KEY)
        if days and field:
            key = FIELD_KEYS.get(field[0].strip().lower())
            if key is not None:
                days[-1][key] = field[1] or "-"
    return days or None


def read_plan(answer: str) -> list[dict[str, Any]] | None:
    """The plan in `answer` (see the module docstring), or None."""
    if not isinstance(answer, str) or not answer.strip():
        return None
    fenced = code_fences(answer)
    for text in [*fenced, answer]:
        plan = _structured(text.strip())
        if plan is not None:
            return plan
    return _text_format(answer)
