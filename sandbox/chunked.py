"""Work spread over processes in fixed chunks, each finished chunk kept as a file.

Why: make_data's stages (the expert's instances, the trace-length table) run for hours at full
scale. Results come back in task order, so the output is the same bytes for any worker count; a
chunk's file is written by one rename when the chunk is done, so a build killed at any moment and
run again loads the finished chunks and computes only the rest. Every result, fresh or loaded,
goes through the same JSON round trip, so a resumed build writes what an uninterrupted one does.
Chunks have a fixed size (not one per worker), so a rerun may use another worker count.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

CHUNKS_DIR = ".chunks"  # inside the directory being built; removed before it is published


class Workers:
    """`count` processes, each set up once by `initializer(*initargs)` if given; with one, the
    calling process itself. Forkserver, never fork: the caller may be a multi-threaded JAX process."""

    def __init__(self, count: int, initializer: Callable[..., None] | None = None, initargs: tuple = ()):
        if count < 1:
            raise ValueError(f"workers must be >= 1, got {count}")
        self.count, self.initializer, self.initargs = count, initializer, initargs
        self.pool: Any = None

    def __enter__(self) -> Workers:
        if self.count > 1:
            ctx = mp.get_context("forkserver")
            self.pool = ctx.Pool(self.count, self.initializer, self.initargs)
        elif self.initializer is not None:
            self.initializer(*self.initargs)
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        if self.pool is not None:
            (self.pool.close if kind is None else self.pool.terminate)()
            self.pool.join()

    def imap(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Any]:
        """fn over items, results in order."""
        return self.pool.imap(fn, items) if self.pool is not None else map(fn, items)


def map_chunks(
    workers: Workers,
    fn: Callable[[list[Any]], list[Any]],
    tasks: Sequence[Any],
    *,
    store: Path,
    label: str,
    size: int,
    log: Callable[[str], None],
) -> Iterator[Any]:
    """fn(chunk of tasks) -> JSON-able list, one item per task; yields the items in task order.

    Chunk k's result lives in store/<label>-<k>.json; chunks already there are not recomputed."""
    store.mkdir(parents=True, exist_ok=True)
    chunks = [list(tasks[i : i + size]) for i in range(0, len(tasks), size)]
    paths = [store / f"{label}-{k:06d}.json" for k in range(len(chunks))]
    todo = [k for k, path in enumerate(paths) if not path.exists()]
    if len(todo) < len(chunks):
        log(f"[{label}] resuming: {len(chunks) - len(todo)} of {len(chunks)} chunks already done")
    started = last = time.monotonic()
    for done, (k, result) in enumerate(zip(todo, workers.imap(fn, [chunks[k] for k in todo])), 1):
        _write_atomic(paths[k], json.dumps(result, ensure_ascii=False))
        now = time.monotonic()
        if now - last >= 10.0 or done == len(todo):
            last = now
            rate = done * size / max(now - started, 1e-9)
            log(f"[{label}] {done}/{len(todo)} chunks of {size}, {rate:.1f}/s")
    for path in paths:
        yield from json.loads(path.read_text(encoding="utf-8"))


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
