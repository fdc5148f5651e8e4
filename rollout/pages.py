"""The host side of the paged KV cache (models/paged_kv.py): page tables, the allocator with
reference counts, and the capacity rules the engine admits and preempts streams by.

Why on the host: which pages a row holds changes only when the scheduler seats, grows, shares or
frees a row, between device calls; the device gets the whole table [B, pages_per_row] with each
call (a few KiB), so no program ever allocates.

Pages belong to the shard of the rows (data x fsdp x expert on a mesh): a row takes pages of its own shard
only. A page is free when no row references it. Rows sharing a prefix (a GRPO group's prompt, a
HiMAP team's system + tools, a parked stream's own old row) reference its full pages, each page
once in memory (refcount = rows); the partly filled last page is copied into a page of the
destination's own (copy on write: its next token goes there). A row nobody is seated in keeps its
pages (another stream may still take its prefix, rollout/prefix.py) until an allocation needs them.
"""

from __future__ import annotations

import numpy as np

from rollout.prefix import Copy, PrefixIndex, common_prefix
from rollout.stream import Phase, RowTable, Stream


def pages_for(tokens: int, page_size: int) -> int:
    return -(-tokens // page_size)


class PageTable:
    """Every row's pages (`held[row]`, in slot order; `table` the device form, free entries =
    pages_per_shard) and per-shard free lists and reference counts."""

    def __init__(self, rows: int, shards: int, pages_per_shard: int, pages_per_row: int, page_size: int):
        if rows % shards:
            raise ValueError(f"rows ({rows}) must split evenly over {shards} shards")
        self.page_size, self.per_shard, self.rows_per_shard = page_size, pages_per_shard, rows // shards
        self.table = np.full((rows, pages_per_row), pages_per_shard, np.int32)
        self.held: list[list[int]] = [[] for _ in range(rows)]
        self.refs = np.zeros((shards, pages_per_shard), np.int32)
        # lowest page first (a stack popped from the end): deterministic tables
        self.free = [list(range(pages_per_shard - 1, -1, -1)) for _ in range(shards)]
        self.dirty = True  # the device copy of `table` is stale

    def shard(self, row: int) -> int:
        return row // self.rows_per_shard

    def in_use(self) -> int:
        return int((self.refs > 0).sum())

    def shared(self) -> int:
        return int((self.refs > 1).sum())

    def _take(self, row: int, count: int) -> list[int]:
        free = self.free[self.shard(row)]
        pages = [free.pop() for _ in range(count)]
        self.refs[self.shard(row), pages] += 1
        return pages

    def _set(self, row: int, pages: list[int]) -> None:
        self.held[row] = pages
        self.table[row] = self.per_shard
        self.table[row, : len(pages)] = pages
        self.dirty = True

    def grow(self, row: int, tokens: int) -> bool:
        """Give `row` pages for `tokens` slots (new ones after those it holds); False, allocating
        nothing, when its shard has too few free pages."""
        more = pages_for(tokens, self.page_size) - len(self.held[row])
        if more <= 0:
            return True
        if more > len(self.free[self.shard(row)]):
            return False
        self._set(row, self.held[row] + self._take(row, more))
        return True

    def drop(self, row: int) -> None:
        """The row references none of its pages any more; pages no row references are free."""
        if not self.held[row]:
            return
        shard = self.shard(row)
        for page in self.held[row]:
            self.refs[shard, page] -= 1
            if self.refs[shard, page] == 0:
                self.free[shard].append(page)
        self._set(row, [])

    def share(self, src: int, dst: int, length: int) -> list[tuple[int, int, int, int]] | None:
        """`dst` (holding nothing) takes the first `length` slots of `src`: its full pages by
        reference in the same shard, copies of the rest. Returns the page moves (src shard, src page,
        dst shard, dst page) to run on the device; None (nothing changed) when pages are short."""
        assert not self.held[dst], "share into a row that still holds pages"
        same = self.shard(src) == self.shard(dst)
        full = length // self.page_size if same else 0
        own = pages_for(length, self.page_size) - full
        if own > len(self.free[self.shard(dst)]):
            return None
        shared = self.held[src][:full]
        self.refs[self.shard(dst), shared] += 1
        fresh = self._take(dst, own)
        self._set(dst, shared + fresh)
        sources = self.held[src][full : full + own]
        return [(self.shard(src), s, self.shard(dst), d) for s, d in zip(sources, fresh)]

    def reclaimable(self, rows: list[int]) -> int:
        """Pages that dropping every row in `rows` (all of one shard) would free."""
        counts: dict[int, int] = {}
        for row in rows:
            for page in self.held[row]:
                counts[page] = counts.get(page, 0) + 1
        if not rows:
            return 0
        shard = self.shard(rows[0])
        return sum(1 for page, n in counts.items() if self.refs[shard, page] == n)


def token_room(stream: Stream) -> int:
    """Tokens a stream may still sample this turn (run.py's decode room): what a segment writes."""
    limits = stream.limits
    return min(limits.max_turn_tokens - stream.turn_sampled, limits.max_total_tokens - len(stream.record.ids))


class PageBudget:
    """The capacity rules over a PageTable: a row's pages grow before each prefill and decode
    segment (its record plus the segment's token room); rows nobody sits in give their pages up
    when an allocation needs them; admission asks whether a stream fits (`can_seat`) and which
    seated streams must make room (`over_capacity`: waiting ones first, then the newest sampling
    ones). `prefix` (rollout/prefix.py, or None without reuse) learns of rows emptied."""

    def __init__(self, table: PageTable, prefix: PrefixIndex | None):
        self.table, self.prefix = table, prefix

    # -- allocation ----------------------------------------------------------------------------
    def drop_reset(self, rows: RowTable) -> None:
        """Rows whose new stream restarts them at position 0 let their old pages go."""
        for r in rows.local:
            stream = rows.slots[r]
            if stream is not None and stream.reset:
                self.table.drop(r)

    def _evict(self, rows: RowTable, shard: int, keep: set[int]) -> bool:
        """Empty one row nobody sits in (not in `keep`) of `shard` that holds pages; False if none."""
        for r in rows.local:
            if (
                rows.slots[r] is None
                and self.table.held[r]
                and self.table.shard(r) == shard
                and r not in keep
            ):
                self.table.drop(r)
                if self.prefix is not None:
                    self.prefix.forget(r)
                return True
        return False

    def reserve(self, row: int, tokens: int, rows: RowTable) -> bool:
        """Pages for `tokens` slots of `row`, emptying unseated rows as needed; False if they do not fit."""
        while not self.table.grow(row, tokens):
            if not self._evict(rows, self.table.shard(row), set()):
                return False
        return True

    def share(self, copies: list[Copy], rows: RowTable) -> tuple[list[Copy], list[tuple[int, ...]]]:
        """The prefix copies whose destination could take the source's pages (by reference, the
        partial last page copied), and the page moves they need on the device."""
        done, moves = [], []
        sources = {c.src for c in copies}
        for copy in copies:
            while (more := self.table.share(copy.src, copy.dst, copy.length)) is None:
                if not self._evict(rows, self.table.shard(copy.dst), sources):
                    break
            if more is not None:
                done.append(copy)
                moves += more
        return done, moves

    # -- admission -----------------------------------------------------------------------------
    def _new_pages(self, stream: Stream, row: int, rows: RowTable, shared: bool = True) -> int:
        """Pages `stream` (seated, or about to be, at `row`) still needs for its prefill and segment;
        `shared` False: without the pages a fresh stream will take by reference (an upper bound)."""
        want = pages_for(len(stream.record.ids) + max(token_room(stream), 0), self.table.page_size)
        if stream.reset or rows.slots[row] is not stream:
            return max(0, want - (self._shared_estimate(stream, row, rows) if shared else 0))
        return max(0, want - len(self.table.held[row]))

    def _shared_estimate(self, stream: Stream, row: int, rows: RowTable) -> int:
        """Full pages a fresh stream will take by reference from a seated row of its shard (the
        prefix a leader holds or is prefilling); rows nobody sits in are not counted (their pages
        count as reclaimable instead)."""
        if self.prefix is None:
            return 0
        want = self.prefix.ids(stream)
        best = 0
        for r in rows.local:
            other = rows.slots[r]
            if r == row or other is None or other is stream or self.table.shard(r) != self.table.shard(row):
                continue
            n = min(common_prefix(self.prefix.ids(other), want), len(want) - 1)
            best = max(best, n if n >= self.prefix.min_tokens else 0)
        return best // self.table.page_size

    def _shortfall(
        self, shard: int, rows: RowTable, out: set[int], seat: tuple[Stream, int] | None = None
    ) -> int:
        """Pages the sampling streams of `shard` (less the rows in `out`; with `seat` = (stream, row)
        about to be seated) need beyond what is free or reclaimable. The shared-prefix estimates
        cost a prefix comparison with every seated row, so they are made only when the needs
        without them (an upper bound) do not fit: a roomy pool decides in time linear in its rows."""
        mine = [r for r in rows.local if self.table.shard(r) == shard]
        idle = [r for r in mine if rows.slots[r] is None or r in out or rows.slots[r].reset]
        needing = [
            (rows.slots[r], r)
            for r in mine
            if r not in out and rows.slots[r] is not None and rows.slots[r].phase is Phase.SAMPLING
        ] + ([seat] if seat is not None else [])
        room = len(self.table.free[shard]) + self.table.reclaimable(idle)
        most = sum(self._new_pages(stream, r, rows, shared=False) for stream, r in needing)
        if most <= room:
            return most - room
        return sum(self._new_pages(stream, r, rows) for stream, r in needing) - room

    def can_seat(self, stream: Stream, row: int, rows: RowTable) -> bool:
        """Whether `stream` fits at free `row` next to the streams already seated."""
        return self._shortfall(self.table.shard(row), rows, set(), (stream, row)) <= 0

    def over_capacity(self, rows: RowTable) -> list[Stream]:
        """Seated streams to give their rows up so the sampling ones fit: per shard, waiting
        streams (longest idle first), then sampling ones (newest first), until none is short."""
        out: set[int] = set()
        victims: list[Stream] = []
        for shard in sorted({self.table.shard(r) for r in rows.local}):
            while self._shortfall(shard, rows, out) > 0:
                seated = [rows.slots[r] for r in rows.local if self.table.shard(r) == shard and r not in out]
                waiting = [s for s in seated if s is not None and s.phase is Phase.WAITING]
                sampling = [s for s in seated if s is not None and s.phase is Phase.SAMPLING]
                if waiting:
                    victim = min(waiting, key=lambda s: (s.idle_since, s.episode_index, s.ordinal))
                elif len(sampling) > 1:
                    victim = max(sampling, key=lambda s: (s.episode_index, s.ordinal))
                else:
                    break  # one stream always fits (the pool holds a whole row per shard)
                out.add(victim.row)
                victims.append(victim)
        return victims
