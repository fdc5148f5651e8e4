"""A TravelPlanner query in one canonical shape, whatever spelling the official files use.

The dataset stores `date` and `local_constraint` as Python literals, spells keys with spaces or
underscores ("people number" / "people_number"), writes absent constraints as None or "None", puts the
four local constraints at top level in the structured example files, and calls medium `middle`.
`normalize_query` accepts all of these and returns the form the official evaluator is typed for.
"""

import ast
from typing import Any

CONSTRAINT_KEYS = ("house rule", "cuisine", "room type", "transportation")
LEVELS = ("easy", "medium", "hard")
_INT_KEYS = ("days", "visiting_city_number", "people_number", "budget")


class QueryError(ValueError):
    """A query lacks a field or has a value of the wrong shape (the message names it)."""


def _canonical_key(key: str) -> str:
    return key.strip().replace(" ", "_") if key.strip() not in CONSTRAINT_KEYS else key.strip()


def _none_if_absent(value: Any) -> Any:
    return None if value is None or value == "None" or value == "" else value


def _literal(value: Any, what: str) -> Any:
    """Parse a Python-literal string ("['2022-03-16', ...]", "{'house rule': None, ...}")."""
    if not isinstance(value, str):
        return value
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):
        raise QueryError(f"{what}: not a Python literal: {value[:60]!r}") from None


def _as_int(value: Any, what: str) -> int:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise QueryError(f"{what}: expected a number, got {value!r}") from None
    if not number.is_integer():
        raise QueryError(f"{what}: expected a whole number, got {value!r}")
    return int(number)


def normalize_query(raw: dict[str, Any]) -> dict[str, Any]:
    """The canonical query: keys org, dest, days, visiting_city_number, date (list), people_number,
    local_constraint (dict of the four keys, None when absent), budget, query, level; other keys kept."""
    if not isinstance(raw, dict):
        raise QueryError(f"a query must be an object, got {type(raw).__name__}")
    query = {_canonical_key(k): v for k, v in raw.items()}
    nested = _literal(query.pop("local_constraint", None), "local_constraint") or {}
    if not isinstance(nested, dict):
        raise QueryError(f"local_constraint: expected a dict, got {type(nested).__name__}")
    nested = {k.strip(): v for k, v in nested.items()}
    constraints = {}
    for key in CONSTRAINT_KEYS:
        value = _none_if_absent(nested.get(key, query.pop(key, None)))
        query.pop(key, None)
        if key == "cuisine" and value is not None:
            value = _literal(value, "cuisine")
            value = [value] if isinstance(value, str) else list(value)
        constraints[key] = value
    query["local_constraint"] = constraints
    for key in ("org", "dest", "days", "visiting_city_number", "people_number", "budget"):
        if key not in query:
            raise QueryError(f"query lacks {key!r} (keys given: {sorted(raw)})")
    for key in _INT_KEYS:
        query[key] = _as_int(query[key], key)
    dates = _literal(query.get("date", []), "date")
    query["date"] = [dates] if isinstance(dates, str) else list(dates or [])
    level = query.get("level")
    if level is not None:
        level = "medium" if level == "middle" else level
        if level not in LEVELS:
            raise QueryError(f"level: expected one of {LEVELS} (or 'middle'), got {level!r}")
        query["level"] = level
    return query
