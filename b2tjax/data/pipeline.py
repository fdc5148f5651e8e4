"""Input pipeline: grain over in-memory examples, shuffled per epoch.

Every JAX process draws the same global batches (the examples are small: prompts and traces), and
each places only its own devices' rows of them (`StepFns.shard_rows`). Why not a slice per process:
the run's batches, metrics and checkpointed iterator state are then those of one process, so a run
resumes on any process count (2 -> 1, 1 -> 2) and a pod run reproduces a one-host run.
`repeat()` makes every epoch a fresh permutation. The iterator state is a small
JSON dict saved in the train_state checkpoint item, so `--resume` continues with the very next
example.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grain

from sandbox import jsonl


def example_dataset(examples: Sequence[Any], seed: int) -> grain.MapDataset:
    """Infinite, per-epoch shuffled dataset over `examples` (the same on every process)."""
    if len(examples) == 0:
        raise ValueError("the training set is empty")
    return grain.MapDataset.source(list(examples)).shuffle(seed=seed).repeat()


class BatchIterator:
    """Draws fixed-size batches from an `example_dataset`; checkpointable via get_state/set_state."""

    def __init__(self, dataset: grain.MapDataset):
        self._iter = iter(dataset.to_iter_dataset())

    def next_batch(self, size: int) -> list[Any]:
        return [next(self._iter) for _ in range(size)]

    def get_state(self) -> dict:
        return json.loads(json.dumps(self._iter.get_state()))

    def set_state(self, state: dict) -> None:
        self._iter.set_state(state)


def read_jsonl(path: str | Path, limit: int = 0) -> list[dict]:
    """Objects of a JSONL file (first `limit` when > 0), with the line number in any parse error."""
    return jsonl.read_jsonl(Path(path), ValueError, limit)
