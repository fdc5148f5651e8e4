"""Declared tool parameters and their validation.

One declaration per parameter feeds both the JSON schema shown to the agent and the checks run on
every call, so the two cannot drift apart. Every failed check raises `ToolArgError` with a message
that tells the agent what to fix; the registry turns it into an error result.
"""

import datetime as dt
import math
import re
from dataclasses import dataclass, field
from typing import Any

N_MIN, N_MAX = 1, 20
_TIME_RE = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$|^24:00$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class ToolArgError(ValueError):
    """An invalid tool call; the message is shown to the agent."""


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # JSON schema type: "string", "integer", "number", "object", "array"
    description: str
    required: bool = False
    default: Any = None
    schema_extra: dict[str, Any] = field(default_factory=dict)

    def json_schema(self) -> dict[str, Any]:
        schema = {"type": self.type, "description": self.description, **self.schema_extra}
        if not self.required and self.default is not None:
            schema["default"] = self.default
        return schema


def function_schema(name: str, description: str, params: tuple[Param, ...]) -> dict[str, Any]:
    """The OpenAI-style function schema the prompt lists for a tool (every benchmark's and role's tools)."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {p.name: p.json_schema() for p in params},
                "required": [p.name for p in params if p.required],
            },
        },
    }


def _type_ok(value: Any, json_type: str) -> bool:
    if json_type == "string":
        return isinstance(value, str)
    if json_type == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if json_type == "number":  # finite: NaN passes every comparison it is put through (`NaN > x` is False)
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and math.isfinite(value)
        )
    if json_type == "object":
        return isinstance(value, dict)
    if json_type == "array":  # HiMAP's protocol tools take lists (sub-goals, activities, items)
        return isinstance(value, list)
    raise AssertionError(json_type)


def validate_arguments(tool: str, params: tuple[Param, ...], arguments: Any) -> dict[str, Any]:
    """Checked arguments with defaults filled in; `null` for an optional argument means its default."""
    if not isinstance(arguments, dict):
        raise ToolArgError(f"{tool} arguments must be a JSON object, got {type(arguments).__name__}")
    known = {p.name: p for p in params}
    unknown = sorted(k for k in arguments if k not in known)
    if unknown:
        raise ToolArgError(f"{tool} got unknown argument(s) {unknown}; valid arguments: {list(known)}")
    out: dict[str, Any] = {}
    for p in params:
        value = arguments.get(p.name)
        if value is None:
            if p.required:
                raise ToolArgError(
                    f"{tool} is missing required argument {p.name!r} ({p.type}: {p.description})"
                )
            out[p.name] = p.default
            continue
        if not _type_ok(value, p.type):
            raise ToolArgError(
                f"{tool} argument {p.name!r} must be {_article(p.type)} {p.type}, "
                f"got {type(value).__name__} {value!r:.60}"
            )
        out[p.name] = int(value) if p.type == "integer" else value
    return out


def _article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def check_n(n: int) -> int:
    if not N_MIN <= n <= N_MAX:
        raise ToolArgError(f"n must be between {N_MIN} and {N_MAX}, got {n}")
    return n


def check_time(value: str | None, name: str) -> str | None:
    if value is None:
        return None
    if not _TIME_RE.match(value.strip()):
        raise ToolArgError(f'{name} must be a time "HH:MM" (24-hour), got {value!r}')
    return value.strip()


def check_date(value: str, name: str, first: str, last: str) -> str:
    """A real calendar date "YYYY-MM-DD" within [first, last] (the store's calendar)."""
    value = value.strip()
    if not _DATE_RE.match(value):
        raise ToolArgError(f'{name} must be a date "YYYY-MM-DD", got {value!r}')
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        raise ToolArgError(f"{name} {value!r} is not a real calendar date") from None
    if first and last and not first <= value <= last:
        raise ToolArgError(f"{name} {value} is outside the available dates {first} to {last}")
    return value


def check_range(value: float | None, name: str, low: float, high: float) -> float | None:
    if value is not None and not low <= value <= high:
        raise ToolArgError(f"{name} must be between {low:g} and {high:g}, got {value:g}")
    return value


def match_vocab(key: str, value: Any, options: tuple[str, ...]) -> list[str]:
    """Canonical vocabulary values for a preference given as a string or a list of strings.

    Accepts the exact value, any letter case, or an unambiguous prefix ("Budget", "5-Star").
    """
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) for v in values):
        raise ToolArgError(f"preference {key!r} must be a list of strings from {list(options)}")
    out = []
    for v in values:
        folded = v.strip().casefold()
        exact = [o for o in options if o.casefold() == folded]
        prefix = [o for o in options if o.casefold().startswith(folded)] if folded else []
        hits = exact or prefix
        if len(hits) != 1:
            raise ToolArgError(f"preference {key!r} has invalid value {v!r}; valid values: {list(options)}")
        if hits[0] not in out:
            out.append(hits[0])
    return out


def check_preferences(
    tool: str, preferences: dict[str, Any] | None, keys: dict[str, tuple[str, ...]]
) -> dict[str, list[str]]:
    """Validated preferences: only the tool's keys, each value mapped onto its vocabulary."""
    if not preferences:
        return {}
    unknown = sorted(k for k in preferences if k not in keys)
    if unknown:
        hint = f"valid keys: {list(keys)}" if keys else "this tool takes no preferences"
        raise ToolArgError(f"{tool} preferences has unknown key(s) {unknown}; {hint}")
    return {k: match_vocab(k, v, keys[k]) for k, v in preferences.items() if v is not None}
