"""The 45 TravelPlanner training queries as structured queries, with their reference information
and human plans.

9 of them come fully structured (`structured/plan_{i}.json`, i = 1-based position in the training
order); the other 36 are parsed from their formulaic text (sandbox.travelplanner.query_text). The
reference information names the cities the annotators used, which is what the expert plans over.
Queries use the official dataset's field names (`visiting_city_number`, `people_number`,
`local_constraint` = {house rule, cuisine, room type, transportation}, level easy|medium|hard).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.travelplanner.query import normalize_query
from sandbox.travelplanner.query_text import parse_query_text

CHAT_FILE = "std_travelplanner.jsonl"
REF_FILE = "train_ref_info.jsonl"
STRUCTURED_DIR = "structured"
_QUERY_MARK = "Query:"


class TrainingDataError(ValueError):
    """The training files are missing or malformed (the message names the file)."""


@dataclass(frozen=True)
class TrainingExample:
    index: int                          # 0-based position in the training order
    query: dict[str, Any]               # structured (official field names)
    reference_info: dict[str, Any]
    human_plan: list[dict[str, Any]]    # the annotated plan, padding {} entries removed
    structured: bool                    # True when the query came from a structured file

    @property
    def reference_cities(self) -> list[str]:
        """Cities with place blocks in the reference information, in its order."""
        return [k.split(" in ", 1)[1] for k in self.reference_info if k.startswith("Accommodations in ")]


def _read_jsonl(path: Path) -> list[Any]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError) as err:
        raise TrainingDataError(f"{path}: cannot read ({err})") from None


def _city_states(data_dir: Path) -> dict[str, str]:
    path = data_dir / "database" / "citySet_with_states.txt"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise TrainingDataError(f"{path}: cannot read ({err.strerror})") from None
    return dict(line.split("\t", 1) for line in lines if "\t" in line)


def _structured_files(data_dir: Path) -> dict[int, dict[str, Any]]:
    out = {}
    for path in sorted((data_dir / STRUCTURED_DIR).glob("plan_*.json")):
        number = int(re.search(r"plan_(\d+)\.json$", path.name).group(1))
        out[number - 1] = json.loads(path.read_text(encoding="utf-8"))
    return out


def load_training(data_dir: str | Path) -> list[TrainingExample]:
    """The 45 training examples in training order from the offline TravelPlanner data directory."""
    root = Path(data_dir)
    chats, refs = _read_jsonl(root / CHAT_FILE), _read_jsonl(root / REF_FILE)
    if len(chats) != len(refs):
        raise TrainingDataError(f"{root}: {len(chats)} chat examples but {len(refs)} reference blocks")
    structured = _structured_files(root)
    city_states = _city_states(root)
    examples = []
    for i, (chat, ref) in enumerate(zip(chats, refs)):
        user, assistant = chat["messages"][1]["content"], chat["messages"][2]["content"]
        plan = [day for day in ast.literal_eval(assistant) if day]
        if i in structured:
            query = normalize_query(structured[i])
            query.pop("annotated_plan", None)          # the plan is `human_plan`, not part of the query
        else:
            query = parse_query_text(user.rsplit(_QUERY_MARK, 1)[1].strip(), city_states)
        examples.append(TrainingExample(i, query, ref, plan, i in structured))
    return examples
