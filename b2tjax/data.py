"""Input pipeline: grain over in-memory examples, shuffled per epoch, sharded by JAX process.

Each JAX process reads its own slice (`examples[process_index::process_count]`) and shuffles it
with the run seed; `repeat()` makes every epoch a fresh permutation. The iterator state is a small
JSON dict saved in the train_state checkpoint item, so `--resume` continues with the very next
example.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grain
import jax

from sandbox import jsonl


def example_dataset(
    examples: Sequence[Any], seed: int, *, process_index: int | None = None, process_count: int | None = None
) -> grain.MapDataset:
    """Infinite, per-epoch shuffled, process-sharded dataset over `examples`."""
    if len(examples) == 0:
        raise ValueError("the training set is empty")
    index = jax.process_index() if process_index is None else process_index
    count = jax.process_count() if process_count is None else process_count
    shard = grain.MapDataset.source(list(examples))[index::count]
    if len(shard) == 0:
        raise ValueError(f"{len(examples)} examples are too few for {count} processes")
    return shard.shuffle(seed=seed).repeat()


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
