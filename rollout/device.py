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
from rollout.placement import new_rollout_arrays
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
    fp32 [B, N], count int32 [B] (valid prefix of ids), finish int32 [B] (sampling.FINISH_*)."""

    ids: np.ndarray
    logprobs: np.ndarray
    count: np.ndarray
    finish: np.ndarray


class DeviceCalls:
    """One run's device state and the calls on it. `engine` is the RolloutEngine (runner, config,
    mesh, stop ids, trace hook); device time and token counts go to `stats`."""

    def __init__(self, engine: Any, stats: EngineStats):
        self.engine, self.cfg, self.stats = engine, engine.config, stats
        self.spans: list[Span] = []  # (start, end) of every device call, results on the host
        self.cache, self.next_logits = new_rollout_arrays(
            engine.model_config, self.cfg.batch_rows, self.cfg.cache_slots, engine.cache_dtype, engine.mesh
        )

    def _done(self, t0: float) -> None:
        """Account a device call that started at t0 and whose results are now on the host."""
        t1 = time.perf_counter()
        self.stats.device_s += t1 - t0
        self.spans.append((t0, t1))

    # -- prefill -------------------------------------------------------------------------------
    def prefill(self, rows: RowTable) -> None:
        """Feed pending tokens of the rows about to sample (phase SAMPLING), computing only those
        (row count bucketed), in chunks of at most `prefill_chunk` per row. A stream whose turn is
        complete keeps its tokens pending: it may stop or be parked before it samples again.

        This is the one step that puts a stream's context into its row; prefix reuse (copying
        another row's KV slots instead of feeding them) belongs here."""
        while True:
            pending = [
                r
                for r, s in enumerate(rows.slots)
                if s is not None and s.pending and s.phase is Phase.SAMPLING
            ]
            if not pending:
                return
            self._prefill_chunk(rows, pending)

    def _chunk_rows(self, rows: RowTable, pending: list[int]) -> list[int]:
        if self.engine.mesh is not None:  # rows are split over devices: each extends its own rows
            return list(range(len(rows)))
        num_rows = min(pow2_bucket(len(pending), 1), len(rows))
        return pending + [r for r in range(len(rows)) if r not in pending][: num_rows - len(pending)]

    def _prefill_chunk(self, rows: RowTable, pending: list[int]) -> None:
        chosen = self._chunk_rows(rows, pending)
        takes = [rows.slots[r].pending[: self.cfg.prefill_chunk] if r in pending else [] for r in chosen]
        width = pow2_bucket(max(len(t) for t in takes), self.cfg.prefill_min_bucket)
        tokens = np.zeros((len(chosen), width), np.int32)
        num_new = np.zeros((len(chosen),), np.int32)
        reset = np.zeros((len(chosen),), bool)
        trace = self.engine.trace
        for i, (r, take) in enumerate(zip(chosen, takes)):
            if not take:
                continue
            stream = rows.slots[r]
            tokens[i, : len(take)], num_new[i], reset[i] = take, len(take), stream.reset
            if stream.reset:
                stream.reset, stream.cached = False, 0
            if trace is not None:
                trace(stream.key, "prefill", list(take), stream.cached)
            stream.cached += len(take)
            stream.pending = stream.pending[len(take) :]
        t0 = time.perf_counter()
        runner = self.engine.runner
        rows_arg = None if self.engine.mesh is not None else jnp.asarray(chosen, jnp.int32)
        self.next_logits, self.cache = runner.prefill(
            runner.state,
            rows_arg,
            jnp.asarray(tokens),
            jnp.asarray(num_new),
            self.cache,
            self.next_logits,
            jnp.asarray(reset),
        )
        self.next_logits.block_until_ready()
        self._done(t0)
        self.stats.prefill_tokens += int(num_new.sum())

    # -- decode --------------------------------------------------------------------------------
    def decode(self, batch: Sequence[tuple[int, Stream, int]], key: jax.Array) -> Segment:
        """One decode segment over `batch` = (row, stream, token budget) of every row to sample."""
        cfg, n = self.cfg, self.cfg.batch_rows
        active, budget = np.zeros(n, bool), np.zeros(n, np.int32)
        seeds, stream_ids = np.zeros(n, np.int32), np.zeros(n, np.int32)
        for r, stream, room in batch:
            active[r], budget[r] = True, room
            seeds[r], stream_ids[r] = episode_seed(stream.episode_index), stream.ordinal
        # The segment returns once this many rows have ended their turn (all: today's segment).
        stop_after = max(1, math.ceil(cfg.segment_return_share * len(batch)))
        params = SamplingArrays(
            temperature=jnp.full((n,), cfg.temperature, jnp.float32),
            top_p=jnp.full((n,), cfg.top_p, jnp.float32),
            top_k=jnp.full((n,), cfg.top_k, jnp.int32),
            seed=jnp.asarray(seeds),
            stream=jnp.asarray(stream_ids),
        )
        t0 = time.perf_counter()
        runner = self.engine.runner
        out = runner.decode(
            runner.state,
            self.cache,
            self.next_logits,
            jnp.asarray(active),
            jnp.asarray(budget),
            params,
            self.engine.stop_ids,
            key,
            jnp.int32(stop_after),
            max_steps=decode_bucket(cfg.max_turn_tokens),
        )
        self.cache, self.next_logits = out.cache, out.next_logits
        segment = Segment(*(np.asarray(x) for x in (out.ids, out.logprobs, out.count, out.finish)))
        self._done(t0)
        self.stats.segments += 1
        self.stats.decode_steps += int(segment.count.max())
        self.stats.generated_tokens += int(segment.count.sum())
        return segment
