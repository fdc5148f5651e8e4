"""The official submission file: JSONL, one `{"idx", "query", "plan"}` per query in dataset order.

`idx` counts from 1 (the official scripts match plans to queries by line position, not by idx);
`plan` is the list of day dicts, or null when no plan was delivered.
"""

import json
from pathlib import Path
from typing import Any

from sandbox.benchmarks.travelplanner.plan_reader import read_plan
from sandbox.jsonl import read_jsonl_objects


class SubmissionError(ValueError):
    """A submission file is malformed (the message names the file and line)."""


def write_submission(path: str | Path, queries: list[dict[str, Any]], plans: list[list[Any] | None]) -> None:
    """Write one line per query, in the order given (the dataset order)."""
    if len(queries) != len(plans):
        raise SubmissionError(f"{len(queries)} queries but {len(plans)} plans")
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    with file.open("w", encoding="utf-8") as handle:
        for idx, (query, plan) in enumerate(zip(queries, plans), start=1):
            record = {"idx": idx, "query": query.get("query", ""), "plan": plan or None}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def read_submission(path: str | Path) -> list[list[Any] | None]:
    """The plans of a submission file by line position (the official matching); a plan stored as a
    string (some tools write Python literals or text) is read by `plan_reader.read_plan`."""
    file = Path(path)
    plans: list[list[Any] | None] = []
    try:
        for line_no, record in read_jsonl_objects(file, SubmissionError):
            if "plan" not in record:
                raise SubmissionError(f"{file}:{line_no}: expected an object with a 'plan' field")
            plan = record["plan"]
            plans.append(read_plan(plan) if isinstance(plan, str) else plan)
    except OSError as err:
        raise SubmissionError(f"{file}: cannot read ({err.strerror})") from None
    return plans
