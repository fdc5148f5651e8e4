"""JSON written by a model or a user, read strictly: what `json.loads` lets through breaks later.

`json.loads` accepts `NaN`/`Infinity` (not JSON; comparisons with NaN are always false, so a
NaN budget passes every `>` check), turns `1e999` into infinity, raises a long ValueError on
integers over 4,300 digits, and returns strings holding lone surrogates (`"\\ud800"`) that no
UTF-8 encoder (and no tokenizer) accepts. `loads_strict` refuses all of these, and too-deep
nesting, with a one-line `StrictJSONError`; its cost is linear in the text.
"""

import json
import math
import re
from typing import Any

from sandbox.nesting import MAX_JSON_DEPTH, nested_deeper_than

MAX_INT_DIGITS = 64  # no price, count or id needs more; bounds int() to linear time


class StrictJSONError(ValueError):
    """The text is not JSON this project accepts; the message is one line. `syntax`: not JSON at all."""

    def __init__(self, message: str, syntax: bool = False) -> None:
        super().__init__(message)
        self.syntax = syntax


def _parse_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise StrictJSONError(f"an integer has {digits} digits; at most {MAX_INT_DIGITS} are accepted")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise StrictJSONError(f"the number {text[:40]} is out of range")
    return value


def _parse_constant(name: str) -> Any:
    raise StrictJSONError(f"{name} is not a JSON number; use a finite number")


def has_lone_surrogate(text: str) -> bool:
    """Whether `text` holds a surrogate code point (never valid on its own in UTF-8)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def scrub_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD; clean text comes back as it is."""
    if not has_lone_surrogate(text):
        return text
    return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)


# A terminal's escape sequences (CSI "ESC [ ... final", OSC "ESC ] ... BEL or ESC \\", two-character
# ones), then every other control character but tab, newline and carriage return (NUL, BEL,
# backspace, DEL, C1). A tool's output is shown to a model and in reports, never to a terminal.
_TERMINAL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]"
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]"
)


def scrub_terminal(text: str) -> str:
    """`text` without NUL, other control characters and terminal escape sequences (tab, newline and
    carriage return kept); clean text comes back as it is."""
    return _TERMINAL.sub("", text)


def _strings_clean(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def loads_strict(text: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse `text` as JSON, refusing what the module docstring lists."""
    try:
        value = json.loads(
            text, parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant
        )
    except StrictJSONError:
        raise
    except json.JSONDecodeError as e:
        raise StrictJSONError(f"not valid JSON ({e.msg} at position {e.pos})", syntax=True) from None
    except RecursionError:  # the decoder's own limit, around 1000 levels
        raise StrictJSONError(f"JSON is nested more than {max_depth} levels deep") from None
    except ValueError as e:  # e.g. a float literal float() rejects
        raise StrictJSONError(f"not valid JSON ({str(e).splitlines()[0][:80]})", syntax=True) from None
    if nested_deeper_than(value, max_depth):
        raise StrictJSONError(f"JSON is nested more than {max_depth} levels deep")
    if not _strings_clean(value):
        raise StrictJSONError("a string holds an unpaired surrogate (e.g. \\ud800), which is not text")
    return value
