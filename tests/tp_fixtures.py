"""Shared TravelPlanner test data: the shipped database, the 45 training queries and human plans."""

import json
from pathlib import Path
from typing import Any

import pytest

from sandbox.benchmarks.travelplanner import Database
from sandbox.benchmarks.travelplanner.loader import read_training_chats
from tests.tp_harness import DATA_DIR, DATABASE_DIR

# The 45 training queries in structured form: the 9 structured files verbatim, the other 36
# transcribed by hand from their query texts (org/dest/dates from the reference information).
TRAIN_QUERIES_FILE = Path(__file__).parent / "data" / "tp_train_queries.jsonl"


@pytest.fixture(scope="session")
def tp_db() -> Database:
    return Database.from_dir(DATABASE_DIR)


@pytest.fixture(scope="session")
def train_queries() -> list[dict[str, Any]]:
    return [json.loads(line) for line in TRAIN_QUERIES_FILE.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="session")
def human_plans() -> list[list[Any]]:
    """The human plans of the 45 training queries (padding `{}` entries included)."""
    return [chat.plan for chat in read_training_chats(DATA_DIR / "std_travelplanner.jsonl")]


@pytest.fixture(scope="session")
def tp_data(tmp_path_factory) -> Path:
    """A TravelPlanner data directory built by make_data from the shipped data: the 45 official
    training queries (and the generated dev split), no expert traces."""
    from b2tjax.cli import make_data

    out = tmp_path_factory.mktemp("tp_data") / "tp"
    argv = ["--benchmark", "travelplanner", "--out", str(out), "--generated", "0", "--no-expert"]
    assert make_data.main(argv) == 0
    return out
