"""Readers for the official TravelPlanner files (no pandas).

- dataset rows (`train` / `validation` / `test`, as CSV or JSONL exports of the official dataset):
  `read_queries`, checked against the official sizes with `check_split`;
- `*_ref_info.jsonl` (per query: "Attractions in X" -> rows, "Flight from A to B on D" -> rows, ...):
  `read_reference_info` (the Database reads them with `add_reference_info`);
- the training chat file `std_travelplanner.jsonl` (assistant message = the human plan as a Python
  literal padded with `{}`): `read_training_chats`;
- the structured example files `plan_N.json` (query fields + "annotated plan"): `read_structured`.
"""

import ast
import csv
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.benchmarks.travelplanner.query import QueryError, normalize_query
from sandbox.jsonl import read_jsonl

SPLIT_SIZES = {"train": 45, "validation": 180, "test": 1000}


class LoaderError(ValueError):
    """A TravelPlanner file cannot be read (the message names the file and line)."""


@dataclass(frozen=True)
class TrainingChat:
    """One line of `std_travelplanner.jsonl`."""

    system: str
    user: str
    query_text: str  # the natural-language query (after "Query:" in the user message)
    plan: list[Any]  # the human plan, padding `{}` entries included


def _rows(path: Path) -> list[dict[str, Any]]:
    """Objects of a JSONL file, or rows of a CSV file (by suffix)."""
    try:
        if path.suffix == ".csv":
            csv.field_size_limit(sys.maxsize)  # reference_information cells are large
            with path.open(encoding="utf-8", newline="") as handle:
                return list(csv.DictReader(handle))
        return read_jsonl(path, LoaderError)
    except OSError as err:
        raise LoaderError(f"{path}: cannot read ({err.strerror})") from None


def read_queries(path: str | Path) -> list[dict[str, Any]]:
    """Queries of a dataset file (CSV or JSONL), normalised (see `query.normalize_query`), in file order."""
    file = Path(path)
    queries = []
    for number, row in enumerate(_rows(file), start=1):
        try:
            queries.append(normalize_query(row))
        except QueryError as err:
            raise LoaderError(f"{file}: query {number}: {err}") from None
    return queries


def check_split(queries: list[Any], split: str) -> None:
    """Raise LoaderError unless `queries` has the official size of `split`."""
    if split not in SPLIT_SIZES:
        raise LoaderError(f"unknown split {split!r}; expected one of {sorted(SPLIT_SIZES)}")
    if len(queries) != SPLIT_SIZES[split]:
        raise LoaderError(f"the {split} split has {SPLIT_SIZES[split]} queries, the file has {len(queries)}")


def read_reference_info(path: str | Path) -> list[dict[str, Any]]:
    """The per-query reference information dicts of a `*_ref_info.jsonl` file."""
    return _rows(Path(path))


def parse_python_plan(text: str) -> list[Any]:
    """A plan written as a Python literal (single quotes, None) -> list of day dicts."""
    value = ast.literal_eval(text.strip())
    if not isinstance(value, list):
        raise TypeError(f"expected a list of days, got {type(value).__name__}")
    return value


def read_training_chats(path: str | Path) -> list[TrainingChat]:
    """The examples of `std_travelplanner.jsonl` in file order."""
    file = Path(path)
    chats = []
    for number, row in enumerate(_rows(file), start=1):
        try:
            by_role = {m["role"]: m["content"] for m in row["messages"]}
            plan = parse_python_plan(by_role["assistant"])
            user = by_role["user"]
        except (KeyError, TypeError, ValueError, SyntaxError) as err:
            raise LoaderError(f"{file}:{number}: not a training chat ({err})") from None
        query_text = user.rsplit("Query:", 1)[-1].strip()
        chats.append(TrainingChat(by_role.get("system", ""), user, query_text, plan))
    return chats


def read_structured(path: str | Path) -> tuple[dict[str, Any], list[Any]]:
    """(normalised query, annotated plan) of a structured example file `plan_N.json`."""
    file = Path(path)
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
        plan = raw.pop("annotated plan", None) or raw.pop("annotated_plan", None) or []
        return normalize_query(raw), plan
    except (OSError, json.JSONDecodeError, QueryError, AttributeError) as err:
        raise LoaderError(f"{file}: not a structured TravelPlanner example ({err})") from None
