"""The forgiving half of the plan reader (plan.py): the JSON a model wrote, read without fuss.

Answer text -> JSON (the last `<answer>` block, a code fence, prose around the list, trailing
commas), key spellings -> the format's keys (camelCase, spaces, synonyms), and the scalar readers
that turn "¥220", "9" and 9.0 into numbers and text. Kept apart from plan.py, which knows the plan's
structure; nothing here knows what a day or an activity is.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from sandbox.benchmarks.b2t.plan_synonyms import KEY_SYNONYMS
from sandbox.textscan import code_fences

# Hard limit: an answer beyond it is not a plan but a runaway generation.
MAX_TEXT_CHARS = 1_000_000

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_NON_WORD = re.compile(r"[^a-z0-9]+")
_TRAILING_COMMA = re.compile(r",(\s*[\]}])")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


class FormatError(ValueError):
    """The answer cannot be read as a plan; the message is the reason the reward reports."""


# ---------------------------------------------------------------- text -> JSON


def load_json(text: str) -> Any:
    """The JSON value of an answer: its body as written, else its outermost [...], each also
    without trailing commas; the first decoding error is the one reported."""
    if len(text) > MAX_TEXT_CHARS:
        raise FormatError(f"answer is too large ({len(text)} characters > {MAX_TEXT_CHARS})")
    body = answer_body(text)
    if not body.strip():
        raise FormatError("answer is empty")
    candidates = [body]
    start, stop = body.find("["), body.rfind("]")
    if 0 <= start < stop:
        candidates.append(body[start : stop + 1])
    first_error = None
    for candidate in candidates:
        for variant in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
            try:
                return json.loads(variant)
            except json.JSONDecodeError as err:
                first_error = first_error or err
            except ValueError as err:  # e.g. integer strings beyond the conversion limit
                raise FormatError(f"answer is not valid JSON: {err}") from None
    raise FormatError(
        f"answer is not valid JSON ({first_error.msg} at line {first_error.lineno} "
        f"column {first_error.colno})"
    )


def answer_body(text: str) -> str:
    """The plan text inside the last `<answer>` block and any code fence."""
    open_at = text.rfind("<answer>")
    if open_at >= 0:
        text = text[open_at + len("<answer>") :]
        close_at = text.find("</answer>")
        if close_at >= 0:
            text = text[:close_at]
    fences = code_fences(text, languages=("json", "JSON"))  # linear; the old regex was not
    return fences[0].strip() if fences else text


# ---------------------------------------------------------------- keys


@lru_cache(maxsize=8192)
def _norm_str_key(key: str) -> str:
    snake = _NON_WORD.sub("_", _CAMEL.sub("_", key.strip()).lower()).strip("_")
    return KEY_SYNONYMS.get(snake, snake)


def _norm_key(key: Any) -> str:
    return _norm_str_key(key) if isinstance(key, str) and len(key) < 100 else str(key)


@lru_cache(maxsize=4096)
def synonym_key(raw: str) -> str:
    """A type or mode word as a synonym table's key: lower snake case."""
    return _NON_WORD.sub("_", raw.strip().lower()).strip("_")


_KEY_CACHE: dict[str, str] = {}


def norm_keys(obj: dict) -> dict:
    """Keys normalised (first spelling of a key wins); hot path, hence the plain dict cache."""
    out: dict[str, Any] = {}
    cache = _KEY_CACHE
    for key, value in obj.items():
        norm = cache.get(key) if isinstance(key, str) else None
        if norm is None:
            norm = _norm_key(key)
            if isinstance(key, str) and len(cache) < 8192:
                cache[key] = norm
        if norm not in out:
            out[norm] = value
    return out


# ---------------------------------------------------------------- scalars


def as_text(value: Any) -> str | None:
    """A string (stripped, None when blank) or a number's text; anything else None."""
    kind = type(value)
    if kind is str:
        return value.strip() or None
    if kind is int or kind is float:
        try:
            return str(value)
        except ValueError:  # an integer over Python's 4,300-digit conversion limit
            return None
    return None


def as_number(value: Any) -> float | None:
    """A finite number, also the first number in a string ("¥1,220" -> 1220.0); else None."""
    kind = type(value)
    if kind is int or kind is float:
        try:
            number = float(value)
        except OverflowError:
            return None
        return number if number == number and abs(number) != float("inf") else None
    if kind is str:
        match = _NUMBER.search(value.replace(",", ""))
        number = float(match.group()) if match else None  # "9" * 400 reads as infinity
        return number if number is not None and abs(number) != float("inf") else None
    return None


def as_price(value: Any) -> float | None:
    """A number that can be a price (not negative); else None."""
    number = as_number(value)
    return number if number is not None and number >= 0 else None


def as_int(value: Any) -> int | None:
    """A whole number (9.0 counts); else None."""
    number = as_number(value)
    return int(number) if number is not None and number == int(number) else None
