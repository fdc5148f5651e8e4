"""Typed dataclass fields: a raw value (YAML, `key=value`) converted and checked by the field's annotation.

Every config section (rollout.config.RolloutConfig, the training config in b2tjax.config) declares
its knobs as annotated dataclass fields, a choice as a `Literal` and a number's range as
`Annotated[int, Range(ge=0)]` (or one of the aliases below); these helpers read the annotation, so
a knob's type, choices and range are written once, beside it, and `field_errors` is the one checker.
They live in models/, the lowest package that rollout/ and b2tjax/ may both import (sandbox/ stays
the benchmarks' pure floor; this module imports no JAX either).
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal


@dataclass(frozen=True)
class Range:
    """The numbers a field admits, declared in its annotation; None = unbounded on that side."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def admits(self, value: Any) -> bool:
        """Written as what a value must satisfy (never `not (v < lo)`), so NaN fails every bound."""
        return (
            (self.ge is None or value >= self.ge)
            and (self.gt is None or value > self.gt)
            and (self.le is None or value <= self.le)
            and (self.lt is None or value < self.lt)
        )

    def __str__(self) -> str:
        low = _num(self.ge if self.gt is None else self.gt)
        high = _num(self.le if self.lt is None else self.lt)
        if low is not None and high is not None:
            return f"in {'[' if self.gt is None else '('}{low}, {high}{']' if self.lt is None else ')'}"
        if low is not None:
            return f"{'>=' if self.gt is None else '>'} {low}"
        return f"{'<=' if self.lt is None else '<'} {high}"


def _num(bound: float | None) -> str | None:
    """A bound as written: an int exactly (a seed's 2**63 - 1 is not 9.22337e+18), a float short."""
    return None if bound is None else str(bound) if isinstance(bound, int) else f"{bound:g}"


# The ranges most knobs have (0 is usually "off" or "all": the knob's comment says which).
NonNegInt = Annotated[int, Range(ge=0)]
PosInt = Annotated[int, Range(ge=1)]
NonNegFloat = Annotated[float, Range(ge=0)]
PosFloat = Annotated[float, Range(gt=0)]


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)  # Annotated[...] stripped to the type


@functools.cache
def _ranges(cls: type) -> dict[str, Range]:
    """Field name -> the Range its annotation declares (fields without one are absent)."""
    out = {}
    for name, hint in typing.get_type_hints(cls, include_extras=True).items():
        if typing.get_origin(hint) in (typing.Union, types.UnionType):  # `Annotated[...] | None`
            hint = next((a for a in typing.get_args(hint) if typing.get_origin(a) is Annotated), hint)
        if typing.get_origin(hint) is Annotated:
            out.update((name, extra) for extra in hint.__metadata__ if isinstance(extra, Range))
    return out


def field_type(cls: type, name: str) -> Any:
    """The resolved annotation of a dataclass field (string annotations evaluated)."""
    return _hints(cls)[name]


def field_types(cls: type) -> dict[str, Any]:
    """Every field name of a dataclass -> its resolved annotation."""
    return _hints(cls)


def allowed_values(hint: Any) -> tuple | None:
    """The values a choice type admits (a Literal's arguments, an Enum's values); None otherwise."""
    if typing.get_origin(hint) is Literal:
        return typing.get_args(hint)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return tuple(member.value for member in hint)
    return None


def choice_error(key: str, value: Any, hint: Any) -> str | None:
    """One line naming `key` and the allowed values when `value` is not one of them; None if it
    is (or when `hint` is no choice type)."""
    allowed = allowed_values(hint)
    if allowed is None or value in allowed:
        return None
    return f"{key} must be one of {', '.join(map(str, allowed))}; got {value!r}"


def field_range(cls: type, name: str) -> Range | None:
    """The Range a dataclass field declares, if any."""
    return _ranges(cls).get(name)


def field_errors(obj: Any, prefix: str = "") -> list[str]:
    """Every field of the dataclass `obj`, nested sections included, outside its declared choices or
    range, or a float that is NaN or infinite: one line each, naming the key (`prefix` + dotted
    name). None values pass (= "unset")."""
    errors = []
    for f in dataclasses.fields(obj):
        key, value = prefix + f.name, getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            errors += field_errors(value, key + ".")
            continue
        if value is None:
            continue
        if isinstance(value, float) and not math.isfinite(value):
            errors.append(f"{key} must be a finite number, got {value!r}")
            continue
        choice = choice_error(key, value, field_type(type(obj), f.name))
        if choice is not None:
            errors.append(choice)
        allowed = field_range(type(obj), f.name)
        if allowed is not None and not allowed.admits(value):
            errors.append(f"{key} must be {allowed}, got {value!r}")
    return errors


def check_fields(obj: Any, prefix: str = "") -> None:
    """A one-line ValueError naming the first of `field_errors(obj)`; for a frozen dataclass's
    `__post_init__`, so a value built in code is held to the ranges a file's value is."""
    errors = field_errors(obj, prefix)
    if errors:
        raise ValueError(errors[0])


def read_fields(cls: type, raw: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """The entries of `raw` (a file's JSON object) that name fields of the dataclass `cls`, each
    converted by its field's annotation (`coerce`: finite, typed); other keys are left out."""
    hints = _hints(cls)
    return {key: coerce(value, hints[key], prefix + key) for key, value in raw.items() if key in hints}


def coerce(value: Any, hint: Any, key: str) -> Any:
    """`value` converted to the annotation `hint`, or a one-line ValueError naming `key`.

    Handles bool, int, float, str, Literal/Enum choices, `X | None`, `list[X]` and `dict[K, V]`
    (elements converted in turn, their keys named `key[i]`); any other annotation passes as is.
    """
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [arg for arg in args if arg is not type(None)]  # only Optional unions are fields
        return coerce(value, inner, key)
    choices = allowed_values(hint)
    if choices is not None:
        kinds = {type(choice) for choice in choices}
        value = coerce(value, kinds.pop(), key) if len(kinds) == 1 and value is not None else value
        error = choice_error(key, value, hint)
        if error is not None:
            raise ValueError(error)
        return hint(value) if isinstance(hint, type) else value
    if hint in _SCALARS:
        return _SCALARS[hint](value, key)
    if hint is list or origin is list:
        items = list(value) if isinstance(value, (list, tuple)) else [value]  # `a=x` means [x]
        return [coerce(item, args[0], f"{key}[{i}]") for i, item in enumerate(items)] if args else items
    if hint is dict or origin is dict:
        if not isinstance(value, dict):
            _bad(key, "a mapping", value)
        if not args:
            return dict(value)
        return {coerce(k, args[0], key): coerce(v, args[1], f"{key}.{k}") for k, v in value.items()}
    return value


def _to_bool(value: Any, key: str) -> bool:
    """Only a YAML/JSON boolean: a string such as "false" is refused, never read as a truthy value."""
    if isinstance(value, bool):
        return value
    raise ValueError(f"{key}: expected true/false (a boolean, not a string or number), got {value!r}")


def _to_int(value: Any, key: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    try:
        number = float(value) if isinstance(value, str) else None
    except (ValueError, OverflowError):
        number = None
    if number is None or not number.is_integer():
        _bad(key, "an integer", value)
    return int(number)


def _to_float(value: Any, key: str) -> float:
    """A finite float: NaN passes no comparison (so no range check) and infinity no knob means."""
    if isinstance(value, bool):
        _bad(key, "a finite number", value)
    try:
        number = float(value)  # YAML reads "1e-6" as a string
    except (TypeError, ValueError, OverflowError):
        _bad(key, "a finite number", value)
    if not math.isfinite(number):
        _bad(key, "a finite number", value)
    return number


def finite_float(text: str) -> float:
    """An argparse `type=` for a number flag: a finite float (`float` alone takes "nan" and "inf",
    which pass no comparison a limit or timeout makes); anything else is argparse's one-line error."""
    return _to_float(text, "value")


def _to_str(value: Any, key: str) -> str:
    if isinstance(value, (dict, list)):
        _bad(key, "a string", value)
    return str(value)


_SCALARS = {bool: _to_bool, int: _to_int, float: _to_float, str: _to_str}


def _bad(key: str, what: str, value: Any) -> typing.NoReturn:
    raise ValueError(f"{key}: expected {what}, got {value!r}")
