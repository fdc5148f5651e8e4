"""Rollout records read back from a file, checked before the report decodes them.

A rollouts file is input: it may be hand-edited, truncated or written by another tool. The report
indexes `ids` by the turn offsets, decodes the ids with a tokenizer and pairs log-probs with
tokens, so every one of those must hold, or the page build dies deep inside with a traceback. Each
problem here is one line naming the file, the line and the field.
"""

from __future__ import annotations

from typing import Any


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _int_list(row: dict[str, Any], name: str) -> str | None:
    value = row.get(name, [])
    if not isinstance(value, list):
        return f"'{name}' is not a list"
    bad = next((x for x in value if not _is_int(x) or x < 0), None)
    if bad is not None:
        return f"'{name}' holds {bad!r}, not a non-negative integer"
    return None


def _turns(row: dict[str, Any], length: int) -> str | None:
    turns = row.get("turns", [])
    if not isinstance(turns, list):
        return "'turns' is not a list"
    for k, turn in enumerate(turns):
        if not (isinstance(turn, list) and len(turn) == 2 and all(_is_int(x) for x in turn)):
            return f"turn {k} is {str(turn)[:40]}, not a [start, end] pair of integers"
        start, end = turn
        if not 0 <= start <= end <= length:
            return f"turn {k} spans [{start}, {end}), outside the record's {length} ids"
    return None


def record_problem(row: dict[str, Any]) -> str | None:
    """What makes a rollouts-file object unusable as a report's record (None: usable)."""
    if not isinstance(row.get("instance_id"), str) or not isinstance(row.get("ids"), list):
        return "not a rollout record (no instance_id / ids)"
    problem = _int_list(row, "ids")
    if problem:
        return problem
    length = len(row["ids"])
    for name in ("loss_mask", "logprobs"):
        value = row.get(name, [])
        if not isinstance(value, list) or (value and len(value) != length):
            return f"'{name}' does not have one entry per id ({length})"
    episode = row.get("episode", 0)
    if not _is_int(episode) or episode < 0:
        return f"'episode' is {episode!r}, not a non-negative integer"
    for name in ("calls", "errors"):
        if not isinstance(row.get(name, []), list):
            return f"'{name}' is not a list"
    return _turns(row, length)


def id_beyond(records: list[Any], vocab_size: int) -> tuple[int, int] | None:
    """(record index, id) of the first token id the tokenizer does not have."""
    for index, record in enumerate(records):
        top = max(record.ids, default=-1)
        if top >= vocab_size:
            return index, top
    return None
