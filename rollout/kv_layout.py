"""The KV cache's layout as the run's device calls see it, chosen once per run (`kv_layout`) from
`rollout.kv_cache`: what admission may seat, what a segment reserves, what memory a segment holds,
and how a prefix copy runs.

`ContiguousRows`: every row holds `cache_slots` slots from its first token, so a free row is all a
stream needs and a prefix copy moves slots between rows. `PagedPool`: rows hold the pages of a
shared pool that their tokens fill (rollout/pages.py `PageBudget` says which), so admission and
each segment ask the pool first, the page tables ride with every device call, and a prefix copy
shares whole pages by reference and moves only the partly filled last one.
"""

from __future__ import annotations

from typing import Any, Protocol

import jax.numpy as jnp
import numpy as np

from models.paged_kv import row_shards
from rollout.buckets import pow2_bucket
from rollout.config import RolloutConfig
from rollout.hosts import put_rows
from rollout.pages import PageBudget, PageTable
from rollout.prefix import Copy, PrefixIndex
from rollout.stats import EngineStats
from rollout.stream import RowTable, Stream

Moves = list[tuple[int, ...]]


class KVLayout(Protocol):
    pages: tuple[int, int] | None  # (page_size, pool pages) of a paged cache, for its allocation

    def can_seat(self, stream: Stream, row: int, rows: RowTable) -> bool: ...

    def over_capacity(self, rows: RowTable) -> list[Stream]: ...

    def drop_reset(self, rows: RowTable) -> None: ...

    def share(self, copies: list[Copy], rows: RowTable) -> tuple[list[Copy], Moves]: ...

    def reserve(self, row: int, tokens: int, rows: RowTable) -> bool: ...

    def account(self, stats: EngineStats) -> None: ...

    def synced(self, cache: Any, mesh: Any) -> Any: ...

    def copy(self, runner: Any, cache: Any, pairs: np.ndarray, moves: Moves) -> Any: ...


class ContiguousRows:
    """Every row its own `cache_slots` slots; see the module docstring."""

    pages = None

    def __init__(self, cfg: RolloutConfig, slot_bytes: int):
        self.bytes_held = cfg.batch_rows * cfg.cache_slots * slot_bytes

    def can_seat(self, stream: Stream, row: int, rows: RowTable) -> bool:
        return True

    def over_capacity(self, rows: RowTable) -> list[Stream]:
        return []

    def drop_reset(self, rows: RowTable) -> None:
        pass

    def share(self, copies: list[Copy], rows: RowTable) -> tuple[list[Copy], Moves]:
        return copies, []

    def reserve(self, row: int, tokens: int, rows: RowTable) -> bool:
        return True

    def account(self, stats: EngineStats) -> None:
        stats.kv_bytes_held += self.bytes_held  # the whole cache, whatever its rows hold

    def synced(self, cache: Any, mesh: Any) -> Any:
        return cache

    def copy(self, runner: Any, cache: Any, pairs: np.ndarray, moves: Moves) -> Any:
        return runner.copy_prefix(cache, *(jnp.asarray(p) for p in pairs))


class PagedPool(PageBudget):
    """A page pool with the host's page tables; see the module docstring."""

    def __init__(self, table: PageTable, prefix: PrefixIndex | None, cfg: RolloutConfig, slot_bytes: int):
        super().__init__(table, prefix)
        self.pages = (cfg.page_size, cfg.pool_pages)
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

    def copy(self, runner: Any, cache: Any, pairs: np.ndarray, moves: Moves) -> Any:
        """The page `moves` (the rest is shared through the page table) and the rows' fill lengths."""
        table = np.zeros((pow2_bucket(max(len(moves), 1), 1), 4), np.int32)
        table[: len(moves)] = np.asarray(moves, np.int32).reshape(-1, 4)  # none: (0, 4), not (0,)
        src, dst = jnp.asarray(table[:, :2]), jnp.asarray(table[:, 2:])
        count = jnp.int32(len(moves))
        return runner.copy_pages(cache, src, dst, count, jnp.asarray(pairs[1]), jnp.asarray(pairs[2]))


def kv_layout(cfg: RolloutConfig, mesh: Any, prefix: PrefixIndex | None, slot_bytes: int) -> KVLayout:
    """The run's layout (module docstring); a paged pool too small for one stream per row shard is
    refused in one line."""
    if cfg.kv_cache == "contiguous":
        return ContiguousRows(cfg, slot_bytes)
    shards = row_shards(mesh, cfg.batch_rows)
    per_shard = cfg.pool_pages // shards
    if per_shard < cfg.pages_per_row:
        raise ValueError(
            f"rollout.kv_pages={cfg.pool_pages} gives {per_shard} pages per row shard; one stream "
            f"needs {cfg.pages_per_row} (cache_len / page_size): raise kv_pages"
        )
    table = PageTable(cfg.batch_rows, shards, per_shard, cfg.pages_per_row, cfg.page_size)
    return PagedPool(table, prefix, cfg, slot_bytes)
