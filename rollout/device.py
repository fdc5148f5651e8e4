"""The engine's device calls: the KV cache and next-token logits of one run, the argument building
for the jitted prefill and decode programs (rollout/programs.py), and every host <-> device
transfer of a rollout (token ids in; sampled ids, log-probs, counts and finish codes out).

Keeping all transfers here is what multi-host needs: there each process will feed its own rows'
tokens as process-local data and read back only its addressable shards, and every process must
call each program in the same order -- a change to this module, not to the scheduling around it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from rollout.buckets import pow2_bucket
from rollout.hosts import agree, multihost, put_rows, read_local
from rollout.kv_pool import kv_pool
from rollout.placement import kv_bytes_per_slot, new_rollout_arrays
from rollout.prefix import Copy, PrefixIndex
from rollout.programs import decode_bucket
from rollout.sampling import SamplingArrays
from rollout.stats import EngineStats, Span
from rollout.stream import Phase, RowTable, Stream


def episode_seed(index: int) -> int:
    """The sampling seed of the episode at `index` in `run(episodes)` (int32). The factor 64 is
    historical (it once made room for the stream ordinal, now folded in separately); it is kept so
    single-agent runs, and the learning curves made with them, reproduce bit for bit."""
    return (index * 64) % (2**31 - 1)


class Segment(NamedTuple):
    """A decode segment's results on the host, per row of the batch: ids int32 [B, N], logprobs
    fp32 [B, N], count int32 [B] (valid prefix of ids), finish int32 [B] (programs.Finish), and
    with router replay the experts chosen for the ids [B, N, L, k] (else None)."""

    ids: np.ndarray
    logprobs: np.ndarray
    count: np.ndarray
    finish: np.ndarray
    routes: np.ndarray | None = None


class DeviceCalls:
    """One run's device state and the calls on it. `engine` is the RolloutEngine (runner, config,
    mesh, stop ids, trace hook); device time and token counts go to `stats`."""

    def __init__(self, engine: Any, stats: EngineStats):
        self.engine, self.cfg, self.stats = engine, engine.config, stats
        self.spans: list[Span] = []  # (start, end) of every device call, results on the host
        cfg = self.cfg
        self.prefix = PrefixIndex(cfg.batch_rows, cfg.prefix_min_tokens) if cfg.prefix_reuse else None
        slot_bytes = kv_bytes_per_slot(engine.model_config, engine.cache_dtype)
        self.kv = kv_pool(cfg, engine.mesh, self.prefix, slot_bytes)
        self.cache, self.next_logits = new_rollout_arrays(
            engine.model_config,
            cfg.batch_rows,
            cfg.cache_slots,
            engine.cache_dtype,
            self.kv.pages,
            engine.mesh,
        )
        self._rows = RowTable(cfg.batch_rows)  # replaced by the run's table at its first call

    # -- capacity (the admission hook of rollout/run.py) ----------------------------------------
    def can_seat(self, stream: Stream, row: int, rows: RowTable) -> bool:
        """Whether `stream` fits at free `row`: when its prompt and turn room fit in the pages free
        or reclaimable."""
        self._rows = rows
        return self.kv.can_seat(stream, row, rows)

    def over_capacity(self, rows: RowTable) -> list[Stream]:
        """Seated streams that must give their rows up for the sampling ones to fit."""
        self._rows = rows
        return self.kv.over_capacity(rows)

    def _account_memory(self, batch: Sequence[tuple[int, Stream, int]]) -> None:
        """Per segment: rows decoding (and their peak), KV memory held (the pages in use) and live
        tokens, and the page peaks, into `stats`."""
        stats, live = self.stats, sum(s.cached for s in self._rows.slots if s is not None)
        stats.rows_decoding += len(batch)
        stats.peak_rows_decoding = max(stats.peak_rows_decoding, len(batch))
        stats.live_tokens += live
        self.kv.account(stats)

    def _sync_pages(self) -> None:
        self.cache = self.kv.synced(self.cache, self.engine.mesh)

    def _done(self, t0: float) -> None:
        """Account a device call that started at t0 and whose results are now on the host."""
        t1 = time.perf_counter()
        self.stats.device_s += t1 - t0
        self.spans.append((t0, t1))

    # -- prefill -------------------------------------------------------------------------------
    def prefill(self, rows: RowTable, feed: bool = True) -> None:
        """Feed pending tokens of the rows about to sample (phase SAMPLING), computing only those
        (row count bucketed), in chunks of at most `prefill_chunk` per row. A stream whose turn is
        complete keeps its tokens pending: it may stop or be parked before it samples again.
        Several processes: every one calls each chunk (`feed=False`: with no rows of its own), the
        chunk width agreed by one collective per chunk.

        This is the one step that puts a stream's context into its row: with prefix reuse, each
        round first copies what is resident in other rows (rollout/prefix.py), then prefills the
        rest; rows waiting for a leader's shared prefix sit the round out."""
        self._rows = rows  # the run's row table (one per run): decode's page reservations evict from it
        while True:
            self.kv.drop_reset(rows)
            copies, waiting = self.prefix.plan(rows) if self.prefix is not None and feed else ([], set())
            # shared by reference; a copy short of pages is prefilled instead
            copies, moves = self.kv.share(copies, rows)
            for copy in copies:  # the host's view first: the copied tokens leave `pending`
                self._copied(rows.slots[copy.dst], copy)
            pending = [
                r
                for r, s in enumerate(rows.slots)
                if feed and s is not None and s.pending and s.phase is Phase.SAMPLING and r not in waiting
            ]
            # a row short of pages sits out (admission makes room next round)
            pending = [r for r in pending if self._reserve(rows, r, 0)]
            width = self._chunk_width(rows, pending)
            if multihost():
                agreed = agree([width, len(copies), len(moves)])
                width = int(agreed[:, 0].max())
                copies = [
                    Copy(*c) for c in _everyones([tuple(vars(c).values()) for c in copies], 3, agreed[:, 1])
                ]
                moves = _everyones(moves, 4, agreed[:, 2])
            if copies:
                self._copy(copies, moves)
            if not width:
                return
            self._prefill_chunk(rows, pending, width)

    def _chunk_width(self, rows: RowTable, pending: list[int]) -> int:
        """The bucketed token width of the next chunk of `pending` rows (0: nothing to feed)."""
        if not pending:
            return 0
        longest = max(min(len(rows.slots[r].pending), self.cfg.prefill_chunk) for r in pending)
        return pow2_bucket(longest, self.cfg.prefill_min_bucket)

    def _reserve(self, rows: RowTable, row: int, room: int) -> bool:
        """Pages for the row's cached and pending tokens plus `room` more."""
        stream = rows.slots[row]
        return self.kv.reserve(row, stream.cached + len(stream.pending) + room, rows)

    def _copy(self, copies: list[Copy], moves: list[tuple[int, ...]]) -> None:
        """One in-place device call copying resident prefixes between rows (rollout/prefix.py,
        rollout/kv_pool.py). The pairs are the same on every process (a replicated argument)."""
        n, size = len(copies), pow2_bucket(len(copies), 1)
        pairs = np.zeros((3, size), np.int32)
        pairs[1, n:] = self.cfg.batch_rows  # no-op pairs: length 0, destination out of range
        for i, copy in enumerate(copies):
            pairs[:, i] = copy.src, copy.dst, copy.length
        t0 = time.perf_counter()
        self._sync_pages()
        self.cache = self.kv.copy(self.engine.runner, self.cache, pairs, moves)
        self.cache.lengths.block_until_ready()
        self._done(t0)

    def _copied(self, stream: Stream, copy: Copy) -> None:
        """The stream's row holds its first `copy.length` record tokens now: they leave pending."""
        ids = stream.record.ids[: copy.length]
        if self.engine.trace is not None:
            self.engine.trace(stream.key, "copy", ids, 0)
        source = self.prefix.holder[copy.src].record  # its first copy.length ids are these
        if source.routes is not None:  # router replay: same tokens after the same prefix, same routes
            stream.record.put_routes(0, source.routes[: copy.length])
        stream.reset, stream.cached, stream.pending = False, copy.length, stream.pending[copy.length :]
        self.prefix.copied(copy, stream)
        self.stats.reused_tokens += copy.length

    def _chunk_rows(self, rows: RowTable, pending: list[int]) -> list[int]:
        if self.engine.mesh is not None:  # rows are split over devices: each extends its own rows
            return list(range(len(rows)))
        num_rows = min(pow2_bucket(len(pending), 1), len(rows))
        return pending + [r for r in range(len(rows)) if r not in pending][: num_rows - len(pending)]

    def _prefill_chunk(self, rows: RowTable, pending: list[int], width: int) -> None:
        chosen = self._chunk_rows(rows, pending)
        takes = [rows.slots[r].pending[: self.cfg.prefill_chunk] if r in pending else [] for r in chosen]
        tokens = np.zeros((len(chosen), width), np.int32)
        num_new = np.zeros((len(chosen),), np.int32)
        reset = np.zeros((len(chosen),), bool)
        trace, starts = self.engine.trace, {}
        for i, (r, take) in enumerate(zip(chosen, takes)):
            if not take:
                continue
            stream = rows.slots[r]
            tokens[i, : len(take)], num_new[i], reset[i] = take, len(take), stream.reset
            if stream.reset:
                stream.reset, stream.cached = False, 0
            starts[i] = stream.cached  # the record position of its first token
            if trace is not None:
                trace(stream.key, "prefill", list(take), stream.cached)
            # tokens this stream had in a cache before it was parked are fed a second time
            self.stats.reprefill_tokens += max(
                0, min(stream.cached + len(take), stream.refeed) - stream.cached
            )
            stream.cached += len(take)
            stream.pending = stream.pending[len(take) :]
        self._sync_pages()
        t0 = time.perf_counter()
        runner, mesh = self.engine.runner, self.engine.mesh
        rows_arg = None if mesh is not None else jnp.asarray(chosen, jnp.int32)
        self.next_logits, self.cache, routes = runner.prefill(
            runner.state,
            rows_arg,
            put_rows(tokens, mesh),
            put_rows(num_new, mesh),
            self.cache,
            self.next_logits,
            put_rows(reset, mesh),
        )
        self.next_logits.block_until_ready()
        routes = None if routes is None else read_local(routes)  # [R, T, L, k]: router replay
        self._done(t0)
        self.stats.prefill_tokens += int(num_new.sum())
        if routes is not None:  # router replay: the experts that computed each row's new tokens
            for i, start in starts.items():
                rows.slots[chosen[i]].record.put_routes(start, routes[i, : num_new[i]])

    # -- decode --------------------------------------------------------------------------------
    def decode(
        self, batch: Sequence[tuple[int, Stream, int]], key: jax.Array, total_rows: int | None = None
    ) -> Segment:
        """One decode segment over `batch` = (row, stream, token budget) of every row to sample.
        Several processes: `batch` holds this process' rows, `total_rows` counts every process'; the
        segment's results are read back for this process' rows only (the others' are 0)."""
        cfg, n = self.cfg, self.cfg.batch_rows
        active, budget = np.zeros(n, bool), np.zeros(n, np.int32)
        seeds, stream_ids = np.zeros(n, np.int32), np.zeros(n, np.int32)
        temperature = np.full((n,), cfg.temperature, np.float32)
        top_p, top_k = np.full((n,), cfg.top_p, np.float32), np.full((n,), cfg.top_k, np.int32)
        for r, stream, room in batch:
            # the segment's room must be in the row's pages; a row short of them sits out
            active[r] = self.kv.reserve(r, stream.cached + room, self._rows)
            budget[r] = room
            seeds[r], stream_ids[r] = episode_seed(stream.episode_index), stream.ordinal
            if (own := stream.sampling) is not None:  # a served request's parameters
                temperature[r], top_p[r], top_k[r] = own.temperature, own.top_p, own.top_k
                seeds[r] = seeds[r] if own.seed is None else own.seed % (2**31 - 1)
        self._account_memory(batch)
        # The segment returns once this many rows have ended their turn (all: today's segment).
        rows_to_run = len(batch) if total_rows is None else total_rows
        stop_after = max(1, math.ceil(cfg.segment_return_share * rows_to_run))
        mesh = self.engine.mesh
        params = SamplingArrays(
            temperature=put_rows(temperature, mesh),
            top_p=put_rows(top_p, mesh),
            top_k=put_rows(top_k, mesh),
            seed=put_rows(seeds, mesh),
            stream=put_rows(stream_ids, mesh),
        )
        self._sync_pages()
        t0 = time.perf_counter()
        runner = self.engine.runner
        out = runner.decode(
            runner.state,
            self.cache,
            self.next_logits,
            put_rows(active, mesh),
            put_rows(budget, mesh),
            params,
            self.engine.stop_ids,
            key,
            jnp.int32(stop_after),
            max_steps=self._segment_steps(batch),
        )
        self.cache, self.next_logits = out.cache, out.next_logits
        outs = (out.ids, out.logprobs, out.count, out.finish, out.routes)
        segment = Segment(*(None if x is None else read_local(x) for x in outs))
        self._done(t0)
        self.stats.segments += 1
        self.stats.decode_steps += int(segment.count.max())
        self.stats.generated_tokens += int(segment.count.sum())
        return segment

    def _segment_steps(self, batch: Sequence[tuple[int, Stream, int]]) -> int:
        """The segment's step count: the engine's, or the shortest `StreamSampling.segment` of its
        rows (a served reply streamed to its client; single-process only: processes of one run
        would need to agree on it)."""
        asked = [s.sampling.segment for _, s, _ in batch if s.sampling is not None and s.sampling.segment]
        return min([decode_bucket(self.cfg.max_turn_tokens), *asked])


def _everyones(mine: list[tuple[int, ...]], width: int, counts: np.ndarray) -> list[tuple[int, ...]]:
    """Several processes: the copies (or page moves, `width` ints each) every process planned for
    this chunk (`counts`: each process' number, agreed), in process order. Each process plans only
    its own rows (a GRPO group and its shared prompt stay on one process), so no copy crosses
    processes and no destination of one is a source of another; the copy program then runs once
    with the same pairs everywhere."""
    most = int(counts.max())
    if not most:
        return []
    flat = np.zeros((most, width), np.int64)
    flat[: len(mine)] = np.asarray(mine, np.int64).reshape(len(mine), width)  # [] when this one has none
    everyone = agree(flat.ravel().tolist()).reshape(len(counts), most, width)
    return [tuple(int(x) for x in item) for p, n in enumerate(counts) for item in everyone[p, : int(n)]]
