"""The sampler's KV cache as the run's device calls see it: a pool of pages (models/paged_kv.py)
whose host page tables (rollout/pages.py) say which pages each row holds. Admission and each
segment ask the pool first, the page tables ride with every device call that reads or writes the
cache, and a prefix copy shares whole pages by reference and moves only the partly filled last one.

Why pages and not a fixed span per row: a row holds only the pages its tokens fill, so the same
memory decodes more rows at live lengths, and streams sharing a prefix (a GRPO group's prompt, a
HiMAP team's system prompt) hold its pages once. With `kv_pages` 0 the pool has the memory of
`batch_rows` whole rows, so no stream ever waits for pages.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from models.paged_kv import row_shards
from rollout.buckets import pow2_bucket
from rollout.config import RolloutConfig
from rollout.hosts import put_rows
from rollout.pages import PageBudget, PageTable
from rollout.prefix import PrefixIndex
from rollout.stats import EngineStats


class KVPool(PageBudget):
    """The page pool with the host's page tables; see the module docstring."""

    def __init__(self, table: PageTable, prefix: PrefixIndex | None, cfg: RolloutConfig, slot_bytes: int):
        super().__init__(table, prefix)
        self.pages = (cfg.page_size, cfg.pool_pages)  # (page_size, pool pages), for its allocation
        self.page_bytes = slot_bytes * cfg.page_size

    def account(self, stats: EngineStats) -> None:
        in_use = self.table.in_use()
        stats.pages_used += in_use
        stats.kv_bytes_held += in_use * self.page_bytes
        stats.peak_pages = max(stats.peak_pages, in_use)
        stats.peak_shared_pages = max(stats.peak_shared_pages, self.table.shared())

    def synced(self, cache: Any, mesh: Any) -> Any:
        """The host's page tables onto the device before a call that reads or writes the cache."""
        if not self.table.dirty:
            return cache
        self.table.dirty = False
        return cache.replace(pages=put_rows(self.table.table, mesh))

    def copy(self, runner: Any, cache: Any, pairs: np.ndarray, moves: list[tuple[int, ...]]) -> Any:
        """The page `moves` (the rest is shared through the page table) and the rows' fill lengths."""
        table = np.zeros((pow2_bucket(max(len(moves), 1), 1), 4), np.int32)
        table[: len(moves)] = np.asarray(moves, np.int32).reshape(-1, 4)  # none: (0, 4), not (0,)
        src, dst = jnp.asarray(table[:, :2]), jnp.asarray(table[:, 2:])
        count = jnp.int32(len(moves))
        return runner.copy_pages(cache, src, dst, count, jnp.asarray(pairs[1]), jnp.asarray(pairs[2]))


def kv_pool(cfg: RolloutConfig, mesh: Any, prefix: PrefixIndex | None, slot_bytes: int) -> KVPool:
    """The run's pool (module docstring); one too small for one stream per row shard is refused
    in one line."""
    shards = row_shards(mesh, cfg.batch_rows)
    per_shard = cfg.pool_pages // shards
    if per_shard < cfg.pages_per_row:
        raise ValueError(
            f"rollout.kv_pages={cfg.pool_pages} gives {per_shard} pages per row shard; one stream "
            f"needs {cfg.pages_per_row} (cache_len / page_size): raise kv_pages"
        )
    table = PageTable(cfg.batch_rows, shards, per_shard, cfg.pages_per_row, cfg.page_size)
    return KVPool(table, prefix, cfg, slot_bytes)
