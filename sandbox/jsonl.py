"""Read a JSONL file of objects, reporting a bad line as `path:line: reason`.

The data files a user may write (store tables, instances, ground truth, plans, TravelPlanner
queries, submissions and reference blocks, SFT traces) are all JSONL of objects; this is the one
reader, so their error reports are alike while each caller raises its own error type.
"""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sandbox.strict_json import StrictJSONError, loads_strict

_FILE_DEPTH = 64  # a plan (list of days of activities of fields) nests far less


def read_jsonl_objects(path: Path, error: type[Exception]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number from 1, object) for each non-blank line; a line that is not a JSON object
    raises `error("path:line: ...")`, so a long job stops at the exact line at fault."""
    with path.open(encoding="utf-8") as handle:
        try:
            yield from _objects(path, handle, error)
        except UnicodeDecodeError:  # the file decodes block by block: no exact line to name
            raise error(f"{path}: not UTF-8 text") from None


def read_jsonl(path: Path, error: type[Exception], limit: int = 0) -> list[dict[str, Any]]:
    """The objects of the file in order (the first `limit` when > 0); errors as read_jsonl_objects."""
    rows = []
    for _, record in read_jsonl_objects(path, error):
        rows.append(record)
        if limit and len(rows) >= limit:
            break
    return rows


def read_jsonl_by_id(path: Path, error: type[Exception]) -> dict[str, dict[str, Any]]:
    """The objects of the file keyed by their string `id`, in file order. A second line with the
    same id is refused (naming both lines): with last-wins a stale or planted ground-truth
    line would silently replace the real one."""
    rows: dict[str, dict[str, Any]] = {}
    lines: dict[str, int] = {}
    for line_no, record in read_jsonl_objects(path, error):
        ident = record.get("id")
        if not isinstance(ident, str):
            raise error(f"{path}:{line_no}: expected a string 'id', got {ident!r}")
        if ident in rows:
            raise error(f"{path}:{line_no}: id {ident!r} appears again (first on line {lines[ident]})")
        rows[ident], lines[ident] = record, line_no
    return rows


def _objects(path: Path, handle: Any, error: type[Exception]) -> Iterator[tuple[int, dict[str, Any]]]:
    for line_no, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            record = loads_strict(line, max_depth=_FILE_DEPTH)
        except StrictJSONError as err:
            raise error(f"{path}:{line_no}: {err}") from None
        if not isinstance(record, dict):
            raise error(f"{path}:{line_no}: expected a JSON object, got {type(record).__name__}")
        yield line_no, record
