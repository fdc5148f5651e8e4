"""The 45 TravelPlanner training queries as structured queries, with their reference information
and human plans.

9 of them come fully structured (`structured/plan_{i}.json`, i = 1-based position in the training
order); the other 36 are parsed from their formulaic text (sandbox.benchmarks.travelplanner.query_text). The
reference information names the cities the annotators used, which is what the expert plans over.
Queries use the official dataset's field names (`visiting_city_number`, `people_number`,
`local_constraint` = {house rule, cuisine, room type, transportation}, level easy|medium|hard).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.benchmarks.travelplanner.loader import (
    LoaderError,
    read_reference_info,
    read_structured,
    read_training_chats,
)
from sandbox.benchmarks.travelplanner.query_text import QueryTextError, parse_query_text

CHAT_FILE = "std_travelplanner.jsonl"
REF_FILE = "train_ref_info.jsonl"
STRUCTURED_DIR = "structured"


@dataclass(frozen=True)
class TrainingExample:
    index: int  # 0-based position in the training order
    query: dict[str, Any]  # structured (official field names)
    reference_info: dict[str, Any]
    human_plan: list[dict[str, Any]]  # the annotated plan, padding {} entries removed
    structured: bool  # True when the query came from a structured file

    @property
    def reference_cities(self) -> list[str]:
        """Cities with place blocks in the reference information, in its order."""
        return [k.split(" in ", 1)[1] for k in self.reference_info if k.startswith("Accommodations in ")]


def _city_states(data_dir: Path) -> dict[str, str]:
    path = data_dir / "database" / "citySet_with_states.txt"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise LoaderError(f"{path}: cannot read ({err.strerror})") from None
    return dict(line.split("\t", 1) for line in lines if "\t" in line)


def load_training(data_dir: str | Path) -> list[TrainingExample]:
    """The 45 training examples in training order from the offline TravelPlanner data directory;
    LoaderError (one line, naming the file) when a file is missing or malformed."""
    root = Path(data_dir)
    chats, refs = read_training_chats(root / CHAT_FILE), read_reference_info(root / REF_FILE)
    if len(chats) != len(refs):
        raise LoaderError(f"{root}: {len(chats)} chat examples but {len(refs)} reference blocks")
    structured = {
        int(re.search(r"plan_(\d+)\.json$", p.name).group(1)) - 1: read_structured(p)[0]
        for p in (root / STRUCTURED_DIR).glob("plan_*.json")
    }
    city_states = _city_states(root)
    examples = []
    for i, (chat, ref) in enumerate(zip(chats, refs)):
        try:
            query = structured[i] if i in structured else parse_query_text(chat.query_text, city_states)
        except QueryTextError as err:
            raise LoaderError(f"{root / CHAT_FILE}: query {i + 1}: {err}") from None
        examples.append(TrainingExample(i, query, ref, [day for day in chat.plan if day], i in structured))
    return examples
