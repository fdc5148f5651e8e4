"""RolloutEngine: batched multi-turn generation with a per-row KV cache and continuous batching.

One run loops over three phases until every episode has finished:
  1. admit: free rows take queued streams / the next episodes (continuous batching; with
     `refill=False` a new wave starts only when every row is free: static batching). When streams
     are queued and no row is free, a *waiting* stream (turn ended, neither continued nor stopped:
     e.g. a HiMAP coordinator waiting for its day executors) is parked: its row is freed, its record
     kept; when continued it is queued again and its whole record is re-prefilled
     (`EngineStats.reprefill_tokens`). Without parking, waiting coordinators can hold every row while
     their own executors are queued, and the run deadlocks;
  2. prefill: only tokens not yet in a row's cache are fed (prompt of a new stream, environment
     reply + forced tokens of a continuing one), in chunks of at most `prefill_chunk` per row;
     only rows with pending tokens are computed (a refill of one row costs one row);
  3. decode: one jitted `lax.while_loop` segment until every live row has stopped its turn;
  then the host hands finished turns to their episodes (tool calls run in a thread pool, episodes
  in parallel, one episode's streams one at a time in creation order), appends the replies with
  mask 0 and enforces the limits.

Limits (per stream: the config's, or tighter ones the episode gives in `Continue.limits`):
`max_turns`, `max_turn_tokens` (sampled tokens in one turn; `turn_cap="stop"` ends the episode,
`"close"` appends a forced <|im_end|> with mask 0 and lets the environment answer),
`max_seq_len` (record length, prompt included; `StreamLimits.max_total_tokens` for one stream).
Each limit sets its stop reason; such records are `truncated`. Episode callbacks that raise are
recorded as StopReason.ERROR, never re-raised.

Sampling keys derive from (run rng, episode index, stream ordinal, position), never from the batch
row, so continuous and static batching, and runs with or without parking, produce the same
episodes. `run` returns one EpisodeRecord per stream (one per episode for single-agent episodes),
in episode order then stream-creation order.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from rollout.config import RolloutConfig
from rollout.episodes import Continue, Episode, Stop, StreamLimits, TurnOutcome
from rollout.placement import new_rollout_arrays
from rollout.record import EpisodeRecord
from rollout.sampling import FINISH_BUDGET, FINISH_STOP, ModelRunner, SamplingArrays, decode_bucket
from sandbox.types import StopReason


@dataclasses.dataclass
class EngineStats:
    """Where the wall time of the last run went. host_s = wall_s - device_s."""

    wall_s: float = 0.0
    device_s: float = 0.0  # prefill + decode calls, until their results were on the host
    env_s: float = 0.0  # inside the thread-pool phase (tools, parsing, rendering)
    generated_tokens: int = 0
    prefill_tokens: int = 0  # every token fed by prefill, reprefill_tokens included
    reprefill_tokens: int = 0  # tokens fed again because their stream had been parked
    parks: int = 0  # times a waiting stream gave its row up
    decode_steps: int = 0  # while-loop iterations summed over segments
    segments: int = 0
    episodes: int = 0

    @property
    def host_s(self) -> float:
        return max(0.0, self.wall_s - self.device_s)

    @property
    def host_share(self) -> float:
        return self.host_s / self.wall_s if self.wall_s else 0.0


@dataclasses.dataclass(eq=False)
class _Stream:
    episode_index: int
    ordinal: int  # creation order inside the episode (sampling key; order of its turn-ends)
    record: EpisodeRecord
    limits: StreamLimits  # resolved: every field set
    row: int | None = None  # None: queued, parked, or stopped
    pending: list[int] = dataclasses.field(default_factory=list)
    reset: bool = False
    cached: int = 0  # tokens of the record already in the row's cache
    turn_start: int = 0
    turn_sampled: int = 0
    turns_done: int = 0
    live: bool = True
    sampling: bool = False  # between an assistant header and the end of that turn
    idle_since: int = 0  # decode segment count when its last turn ended (parking order)
    started: float = 0.0
    env_s: float = 0.0


def _bucket(n: int, floor: int = 16) -> int:
    """Smallest power of two >= max(n, floor): few compiled shapes."""
    size = 1
    while size < max(n, floor):
        size *= 2
    return size


def episode_seed(index: int) -> int:
    """The sampling seed of the episode at `index` in `run(episodes)` (int32). The factor 64 is
    historical (it once made room for the stream ordinal, now folded in separately); it is kept so
    single-agent runs, and the learning curves made with them, reproduce bit for bit."""
    return (index * 64) % (2**31 - 1)


class RolloutStopped(Exception):
    """`RolloutEngine.run` stopped between segments because its `should_stop` said so (a SIGTERM)."""


class RolloutEngine:
    """Runs episodes on a model; see the module docstring."""

    def __init__(
        self, model: nnx.Module, tokenizer: Any, config: RolloutConfig | None = None, mesh: Mesh | None = None
    ):
        self.config = config or RolloutConfig()
        auto = self.config.cache_dtype == "auto"
        self.cache_dtype = model.dtype if auto else self.config.cache_dtype  # "auto": compute dtype
        self.model_config = model.config
        self.tokenizer = tokenizer
        self.mesh = mesh  # rows of the KV cache over (data, fsdp), KV heads and weights over tensor
        # The model's padded embedding rows past the tokenizer's ids are never sampled.
        self.runner = ModelRunner(
            model, valid_vocab=min(tokenizer.vocab_size, model.config.vocab_size), mesh=mesh
        )
        self.stop_ids = jnp.asarray([tokenizer.im_end_id, tokenizer.eos_id], jnp.int32)
        self.stats = EngineStats()
        # Debug hook, called as trace(stream_key, event, fed_ids, position) for every chunk fed to
        # the model ("prefill") and every decoded segment ("decode"); tests use it to prove that
        # the model's input is the record so far.
        self.trace: Callable[[tuple[int, str], str, list[int], int], None] | None = None
        self.progress: Callable[[int, int], None] | None = None  # progress(done, total)

    def update_weights(self, model: nnx.Module) -> None:
        """Use new weights (same architecture) without recompiling."""
        self.runner.update_state(model)

    # ------------------------------------------------------------------------------------------
    def run(
        self,
        episodes: Sequence[Episode],
        rng: jax.Array | int = 0,
        should_stop: Callable[[], bool] | None = None,
    ) -> list[EpisodeRecord]:
        """Roll out every episode; returns one record per stream, in episode order then stream order.
        `should_stop` is polled after every decode segment; when true, RolloutStopped is raised."""
        key = jax.random.key(rng) if isinstance(rng, int) else rng
        run = _Run(self, list(episodes), key)
        run.should_stop = should_stop
        with concurrent.futures.ThreadPoolExecutor(self.config.tool_workers) as pool:
            run.loop(pool)
        self.stats = run.stats
        return [s.record for ep_streams in run.streams for s in ep_streams.values()]


class _Run:
    """State of one `RolloutEngine.run` call."""

    def __init__(self, engine: RolloutEngine, episodes: list[Episode], key: jax.Array):
        self.engine, self.cfg, self.tok = engine, engine.config, engine.tokenizer
        self.episodes, self.key = episodes, key
        self.streams: list[dict[str, _Stream]] = [dict() for _ in episodes]
        self.rows: list[_Stream | None] = [None] * self.cfg.batch_rows
        self.queue: collections.deque[_Stream] = collections.deque()
        self.ready: list[_Stream] = []  # turn finished, waiting for on_turn_end
        self.next_episode = 0
        self.finished = 0
        self.done_episodes: set[int] = set()
        self.stats = EngineStats(episodes=len(episodes))
        self.default_limits = StreamLimits().resolve(self.cfg)
        self.should_stop: Callable[[], bool] | None = None
        self.tokenizer_name = getattr(self.tok, "name", type(self.tok).__name__)
        mc = engine.model_config
        self.cache, self.next_logits = new_rollout_arrays(
            mc, self.cfg.batch_rows, self.cfg.cache_slots, engine.cache_dtype, engine.mesh
        )

    # -- main loop -----------------------------------------------------------------------------
    def loop(self, pool: concurrent.futures.Executor) -> None:
        t0 = time.perf_counter()
        while True:
            # Host work drains completely before the device runs again: ending turns frees rows
            # (stopped streams) and admitting fills them (parking waiting streams for queued ones),
            # and a finished turn's environment reply only becomes pending tokens here, so prefill
            # and decode see every row that can run. The finished turns go to the pool together
            # (episodes in parallel, one episode's streams in order) so slow tools overlap.
            self._admit()
            while self.ready:
                self._end_turns(pool)
                self._admit()
            if not any(self.rows) and not self.queue and self.next_episode >= len(self.episodes):
                break
            self._prefill()
            # A decode segment runs until every live row has ended its turn (or its budget), never
            # one token per host round trip; the host only steps in between segments. No row to
            # run after admission means every live stream waits on another: a real deadlock.
            if not self._decode():
                self._break_deadlock()
            if self.should_stop is not None and self.should_stop():
                raise RolloutStopped("the rollout was asked to stop; its partial records are dropped")
        self.stats.wall_s = time.perf_counter() - t0

    # -- admission -----------------------------------------------------------------------------
    def _free_rows(self) -> list[int]:
        return [r for r, s in enumerate(self.rows) if s is None]

    def _admit(self) -> None:
        """Seat queued streams, then new episodes, in free rows; park waiting streams for queued
        ones when no row is free (new episodes never displace a waiting stream: only streams
        already started can be what a waiting stream waits for)."""
        self._drop_rowless()
        free = self._free_rows()
        if not self.cfg.refill and len(free) < len(self.rows) and not self.queue:
            return  # static batching: wait for the whole wave
        # Queued streams (new streams of running episodes) go before new episodes: an episode
        # holds its environment and tools open until all its streams end, so finishing started
        # ones first bounds the episodes alive at once. Episodes start lazily, only when a row is
        # free, so `start()` (prompt building, world queries) is paid as rows open, not all up front.
        while True:
            self._drop_rowless()
            if not self.queue:
                if not free or self.next_episode >= len(self.episodes):
                    return
                self._start_episode(self.next_episode)
                self.next_episode += 1
                continue
            if not free:
                victim = self._park_candidate()
                if victim is None:
                    return  # every row is sampling; the queue waits for a turn to end
                free.append(self._park(victim))
            self._seat(self.queue.popleft(), free.pop(0))

    def _drop_rowless(self) -> None:
        """Unqueue streams at the head that need no row now: stopped ones, and ones not sampling
        (a fully forced turn awaiting on_turn_end, or waiting after it); a Continue queues them again."""
        while self.queue and not (self.queue[0].live and self.queue[0].sampling):
            self.queue.popleft()

    def _seat(self, stream: _Stream, row: int) -> None:
        """Give `stream` a row; its whole record is (re-)prefilled into it."""
        self.rows[row] = stream
        self.stats.reprefill_tokens += stream.cached  # > 0 only for a stream that was parked
        # A row is reused without clearing it: `reset` makes the next prefill start the row at
        # position 0 (its stale slots are masked by the row's fill length), and the stream's
        # whole record so far is pending, since nothing of it is in this row's cache.
        stream.row, stream.reset, stream.cached = row, True, 0
        stream.pending = list(stream.record.ids)

    def _park_candidate(self) -> _Stream | None:
        """The waiting stream (live, not sampling, turn already handed over) that waited longest;
        ties by episode and creation order, so runs are reproducible."""
        waiting = [
            s for s in self.rows if s is not None and s.live and not s.sampling and s not in self.ready
        ]
        return min(waiting, key=lambda s: (s.idle_since, s.episode_index, s.ordinal), default=None)

    def _park(self, stream: _Stream) -> int:
        """Free a waiting stream's row, keeping its record (and `cached`, for reprefill_tokens)."""
        row = stream.row
        self.rows[row] = None
        stream.row, stream.pending = None, []
        self.stats.parks += 1
        return row

    def _start_episode(self, index: int) -> None:
        episode = self.episodes[index]
        try:
            actions = episode.start()
        except Exception as exc:  # a broken episode must not take the run down
            self._fail_episode(index, f"start() raised {type(exc).__name__}: {exc}")
            return
        self._apply(index, actions)

    # -- record updates ------------------------------------------------------------------------
    def _new_stream(
        self, index: int, name: str, start: Continue | None = None, limits: StreamLimits | None = None
    ) -> _Stream:
        """A stream of episode `index`, tagged with what its starting Continue says."""
        episode = self.episodes[index]
        record = EpisodeRecord(
            instance_id=str(episode.instance_id),
            stream=name,
            tokenizer=self.tokenizer_name,
            episode=index,
            role=(start.role if start is not None and start.role is not None else "agent"),
            day=start.day if start is not None else None,
            round=start.round if start is not None else None,
        )
        stream = _Stream(
            episode_index=index,
            ordinal=len(self.streams[index]),
            record=record,
            limits=limits or self.default_limits,
            started=time.perf_counter(),
        )
        self.streams[index][name] = stream
        return stream

    def _apply(self, index: int, actions: list[Continue | Stop]) -> None:
        """Apply an episode's actions (at start, after a turn, or after a limit)."""
        for action in actions:
            stream = self.streams[index].get(action.stream)
            if isinstance(action, Stop):
                if stream is not None and stream.live:
                    self._stop(stream, action.reason, action.answer)
                continue
            if stream is None:
                try:
                    limits = (action.limits or StreamLimits()).resolve(self.cfg)
                except ValueError as exc:
                    self._fail_episode(index, f"stream {action.stream!r}: {exc}")
                    return
                stream = self._new_stream(index, action.stream, action, limits)
                stream.record.prompt_len = len(action.tokens)
                if len(action.tokens) + len(action.forced) >= limits.max_total_tokens:
                    stream.record.append(action.tokens, sampled=False)
                    self._stop(stream, StopReason.MAX_TOTAL_TOKENS, notify=True)
                    continue
                self._append_context(stream, action.tokens, action.forced)
                self.queue.append(stream)
                continue
            if not stream.live:
                continue
            if stream.sampling:
                self._fail_episode(index, f"Continue for stream {action.stream!r} while it is generating")
                return
            if stream.turns_done >= stream.limits.max_turns:
                self._stop(stream, StopReason.MAX_TURNS, notify=True)
            elif (
                len(stream.record.ids) + len(action.tokens) + len(action.forced)
                >= stream.limits.max_total_tokens
            ):
                self._stop(stream, StopReason.MAX_TOTAL_TOKENS, notify=True)
            else:
                self._append_context(stream, action.tokens, action.forced)
                if stream.row is None and stream not in self.queue:
                    self.queue.append(stream)  # parked: re-admitted with its whole record
        self._maybe_finish(index)

    def _append_context(self, stream: _Stream, tokens: list[int], forced: list[int]) -> None:
        """Append mask-0 context, then the forced start of the next assistant turn."""
        record = stream.record
        record.append(tokens, sampled=False)
        stream.turn_start, stream.turn_sampled, stream.sampling = len(record.ids), 0, True
        if forced:
            record.forced.append((len(record.ids), len(record.ids) + len(forced)))
            record.append(forced, sampled=False)
        if self.cfg.reprefill and stream.row is not None:
            stream.pending, stream.reset, stream.cached = list(record.ids), True, 0
        else:
            stream.pending.extend(tokens)
            stream.pending.extend(forced)
        if forced and forced[-1] in (self.tok.im_end_id, self.tok.eos_id):
            self._turn_complete(stream)  # fully scripted turn: nothing to sample

    def _turn_complete(self, stream: _Stream) -> None:
        stream.record.turns.append((stream.turn_start, len(stream.record.ids)))
        stream.turns_done += 1
        stream.sampling = False
        stream.idle_since = self.stats.segments
        self.ready.append(stream)

    def _stop(
        self,
        stream: _Stream,
        reason: str,
        answer: str | None = None,
        *,
        notify: bool = False,
        message: str | None = None,
    ) -> None:
        if not stream.live:
            return
        if stream.sampling and len(stream.record.ids) > stream.turn_start:
            stream.record.turns.append((stream.turn_start, len(stream.record.ids)))  # cut turn
        stream.live, stream.sampling, stream.pending = False, False, []
        stream.record.stop_reason, stream.record.answer = reason, answer
        stream.record.error_message = message
        stream.record.timings.update(
            wall_s=time.perf_counter() - stream.started, env_s=stream.env_s, turns=float(stream.turns_done)
        )
        if stream.row is not None:
            self.rows[stream.row] = None
            stream.row = None
        if notify:
            try:
                actions = self.episodes[stream.episode_index].on_limit(stream.record.stream, reason)
            except Exception as exc:
                self._fail_episode(stream.episode_index, f"on_limit() raised {type(exc).__name__}: {exc}")
                return
            self._apply(stream.episode_index, actions)

    def _fail_episode(self, index: int, message: str) -> None:
        streams = self.streams[index]
        if not streams:
            self._new_stream(index, "main")
        for stream in streams.values():
            if stream.live:
                self._stop(stream, StopReason.ERROR, message=message)
            elif stream.record.stop_reason != StopReason.ERROR:
                stream.record.error_message = message
        self._maybe_finish(index)

    def _maybe_finish(self, index: int) -> None:
        streams = self.streams[index].values()
        if streams and not any(s.live for s in streams) and index not in self.done_episodes:
            self.done_episodes.add(index)
            self.finished += 1
            if self.engine.progress is not None:
                self.engine.progress(self.finished, len(self.episodes))

    # -- host phase: finished turns -> episodes ------------------------------------------------
    def _end_turns(self, pool: concurrent.futures.Executor) -> None:
        """Hand finished turns to their episodes and apply the actions.

        Why grouped: the streams of one episode share its state (HiMAP's global budget and venue
        commits), so its turn-ends run one at a time in creation order and their actions are applied
        in that order: a seed reproduces the episode, whatever the thread timing. Different
        episodes share nothing and run in parallel in the pool."""
        by_episode: dict[int, list[_Stream]] = collections.defaultdict(list)
        for stream in sorted((s for s in self.ready if s.live), key=lambda s: (s.episode_index, s.ordinal)):
            by_episode[stream.episode_index].append(stream)
        self.ready = []
        t0 = time.perf_counter()
        results = list(pool.map(self._call_turn_ends, by_episode.values()))
        self.stats.env_s += time.perf_counter() - t0
        for index, outcomes in zip(by_episode, results):
            for stream, (outcome, elapsed) in zip(by_episode[index], outcomes):
                stream.env_s += elapsed
                if isinstance(outcome, Exception):
                    self._fail_episode(index, f"on_turn_end() raised {type(outcome).__name__}: {outcome}")
                    break  # the episode is over; its later streams' outcomes are dropped
                stream.record.errors.extend(outcome.errors)
                stream.record.calls.extend(outcome.call_names)
                self._apply(index, outcome.actions)

    def _call_turn_ends(self, streams: list[_Stream]) -> list[tuple[TurnOutcome | Exception, float]]:
        """One episode's turn-ends, in order, in one pool thread; stops at the first that raised."""
        results = []
        for stream in streams:
            results.append(self._call_turn_end(stream))
            if isinstance(results[-1][0], Exception):
                break
        return results

    def _call_turn_end(self, stream: _Stream) -> tuple[TurnOutcome | Exception, float]:
        t0 = time.perf_counter()
        try:
            start, end = stream.record.turns[-1]
            ids = stream.record.ids[start:end]
            eos = bool(ids) and ids[-1] == self.tok.eos_id
            closed = bool(ids) and ids[-1] in (self.tok.im_end_id, self.tok.eos_id)
            text = self.tok.decode(ids[:-1] if closed else ids)
            episode = self.episodes[stream.episode_index]
            outcome = episode.on_turn_end(stream.record.stream, text, eos)
            if not isinstance(outcome, TurnOutcome):
                raise TypeError(f"on_turn_end must return TurnOutcome, got {type(outcome).__name__}")
            return outcome, time.perf_counter() - t0
        except Exception as exc:
            return exc, time.perf_counter() - t0

    # -- device phase --------------------------------------------------------------------------
    def _prefill(self) -> None:
        """Feed pending tokens, computing only the rows that have some (row count bucketed)."""
        chunk_cap = self.cfg.prefill_chunk
        while True:
            pending = [r for r, s in enumerate(self.rows) if s is not None and s.pending]
            if not pending:
                return
            if self.engine.mesh is None:
                num_rows = min(_bucket(len(pending), 1), len(self.rows))
                rows = (
                    pending
                    + [r for r in range(len(self.rows)) if r not in pending][: num_rows - len(pending)]
                )
            else:  # rows are split over devices: every device extends its own rows, nothing moves
                rows = list(range(len(self.rows)))
            takes = [self.rows[r].pending[:chunk_cap] if r in pending else [] for r in rows]
            width = _bucket(max(len(t) for t in takes), self.cfg.prefill_min_bucket)
            tokens = np.zeros((len(rows), width), np.int32)
            num_new = np.zeros((len(rows),), np.int32)
            reset = np.zeros((len(rows),), bool)
            for i, (r, take) in enumerate(zip(rows, takes)):
                if not take:
                    continue
                stream = self.rows[r]
                tokens[i, : len(take)] = take
                num_new[i] = len(take)
                reset[i] = stream.reset
                if stream.reset:
                    stream.reset, stream.cached = False, 0
                if self.engine.trace is not None:
                    key = (stream.episode_index, stream.record.stream)
                    self.engine.trace(key, "prefill", list(take), stream.cached)
                stream.cached += len(take)
                stream.pending = stream.pending[len(take) :]
            t0 = time.perf_counter()
            rows_arg = None if self.engine.mesh is not None else jnp.asarray(rows, jnp.int32)
            self.next_logits, self.cache = self.engine.runner.prefill(
                self.engine.runner.state,
                rows_arg,
                jnp.asarray(tokens),
                jnp.asarray(num_new),
                self.cache,
                self.next_logits,
                jnp.asarray(reset),
            )
            self.next_logits.block_until_ready()
            self.stats.device_s += time.perf_counter() - t0
            self.stats.prefill_tokens += int(num_new.sum())

    def _decode(self) -> bool:
        """One decode segment over the rows that are sampling. False if no row could run."""
        cfg, n = self.cfg, len(self.rows)
        active = np.zeros(n, bool)
        budget = np.zeros(n, np.int32)
        seeds = np.zeros(n, np.int32)
        stream_ids = np.zeros(n, np.int32)
        stopped = False
        for r, s in enumerate(self.rows):
            if s is None or not s.live or not s.sampling or s in self.ready:
                continue
            room = min(
                s.limits.max_turn_tokens - s.turn_sampled, s.limits.max_total_tokens - len(s.record.ids)
            )
            if room <= 0:  # cannot happen by construction; never spin on it
                self._stop(s, StopReason.MAX_TOTAL_TOKENS, notify=True)
                stopped = True
                continue
            active[r], budget[r] = True, room
            seeds[r], stream_ids[r] = episode_seed(s.episode_index), s.ordinal
        if not active.any():
            return stopped or bool(self.ready) or bool(self.queue and self._free_rows())
        params = SamplingArrays(
            temperature=jnp.full((n,), cfg.temperature, jnp.float32),
            top_p=jnp.full((n,), cfg.top_p, jnp.float32),
            top_k=jnp.full((n,), cfg.top_k, jnp.int32),
            seed=jnp.asarray(seeds),
            stream=jnp.asarray(stream_ids),
        )
        t0 = time.perf_counter()
        out = self.engine.runner.decode(
            self.engine.runner.state,
            self.cache,
            self.next_logits,
            jnp.asarray(active),
            jnp.asarray(budget),
            params,
            self.engine.stop_ids,
            self.key,
            max_steps=decode_bucket(cfg.max_turn_tokens),
        )
        ids, logprobs, count, finish, self.cache, self.next_logits = out
        ids, logprobs, count, finish = (np.asarray(x) for x in (ids, logprobs, count, finish))
        self.stats.device_s += time.perf_counter() - t0
        self.stats.segments += 1
        self.stats.decode_steps += int(count.max())
        self.stats.generated_tokens += int(count.sum())
        for r in np.flatnonzero(active):
            stream = self.rows[r]
            k = int(count[r])
            new_ids = ids[r, :k].tolist()
            if self.engine.trace is not None:
                self.engine.trace(
                    (stream.episode_index, stream.record.stream), "decode", new_ids, stream.cached
                )
            stream.record.append(new_ids, sampled=True, logprobs=logprobs[r, :k].tolist())
            stream.cached += k
            stream.turn_sampled += k
            if finish[r] == FINISH_STOP:
                self._turn_complete(stream)
            elif finish[r] == FINISH_BUDGET:
                self._hit_budget(stream)
        return True

    def _hit_budget(self, stream: _Stream) -> None:
        if len(stream.record.ids) >= stream.limits.max_total_tokens:
            self._stop(stream, StopReason.MAX_TOTAL_TOKENS, notify=True)
        elif self.cfg.turn_cap == "stop":
            self._stop(stream, StopReason.MAX_TURN_TOKENS, notify=True)
        elif len(stream.record.ids) + 1 >= stream.limits.max_total_tokens:
            self._stop(stream, StopReason.MAX_TOTAL_TOKENS, notify=True)
        else:  # "close": forced <|im_end|>, mask 0
            end = self.tok.im_end_id
            stream.record.forced.append((len(stream.record.ids), len(stream.record.ids) + 1))
            stream.record.append([end], sampled=False)
            stream.pending.append(end)
            self._turn_complete(stream)

    def _break_deadlock(self) -> None:
        """No row can run, no turn is waiting for its episode, and no queued stream lacks a row
        (parking freed rows for them): every live stream waits for another stream of its episode,
        so no action can ever come. A genuine deadlock (an episode bug): stop them."""
        for index, streams in enumerate(self.streams):
            for stream in streams.values():
                if stream.live:
                    self._stop(
                        stream, StopReason.ERROR, message="stream was waiting with nothing left running"
                    )
            self._maybe_finish(index)
