"""The orchestrating loop of one `RolloutEngine.run` (see rollout/engine.py for the design):
admission and parking, decode results and limits. How host work interleaves with the device is the
run's `HostSchedule` (rollout/schedule.py), whether tokens carry policy versions its clock
(rollout/clock.py), both chosen once when the run is made. What episode actions do to streams is
rollout/actions.py (`StreamActions`, mixed in), device work rollout/device.py, callbacks
rollout/host_jobs.py; a stream's state is its `Phase` (rollout/stream.py)."""

from __future__ import annotations

import collections
import concurrent.futures
import time
from collections.abc import Callable
from typing import Any

import jax

from rollout.actions import StreamActions
from rollout.clock import Clock, Unversioned
from rollout.context import ContextBudget, measures
from rollout.device import DeviceCalls, Segment
from rollout.episodes import Episode, StreamLimits
from rollout.host_jobs import HostJobs, pending_events
from rollout.hosts import owned_rows
from rollout.programs import Finish
from rollout.schedule import host_schedule
from rollout.stats import EngineStats, overlap_length, union_length
from rollout.stream import Phase, RowTable, Stream
from sandbox.types import StopReason


class RolloutStopped(Exception):
    """`RolloutEngine.run` (or a session's `advance`) stopped between segments because its
    `should_stop` said so (a SIGTERM)."""


class Run(StreamActions):
    """State of one `RolloutEngine.run` call: the streams, the row table, the admission queue,
    and the device and host parts it schedules."""

    def __init__(
        self,
        engine: Any,  # the RolloutEngine (runner, config, tokenizer, hooks)
        episodes: list[Episode],
        key: jax.Array,
        pool: concurrent.futures.Executor,
        local: list[bool] | None = None,
        clock: Clock | None = None,
    ):
        self.engine, self.cfg, self.tok = engine, engine.config, engine.tokenizer
        self.episodes, self.key = episodes, key
        # Several processes: this one starts only its own episodes, in its own rows.
        self.local = [True] * len(episodes) if local is None else local
        self.streams: list[dict[str, Stream]] = [dict() for _ in episodes]
        self.rows = RowTable(self.cfg.batch_rows, owned_rows(engine.mesh, self.cfg.batch_rows))
        self.queue: collections.deque[Stream] = collections.deque()  # admission order (FIFO)
        self.stats = EngineStats(episodes=len(episodes), rows=len(self.rows.local))
        self.device = DeviceCalls(engine, self.stats)
        self.host = HostJobs(pool, episodes, self.tok)
        self.failed: set[int] = set()  # episodes ended by an error: later actions are dropped
        self.done_episodes: set[int] = set()
        self.next_episode = 0
        self.default_limits = StreamLimits().resolve(self.cfg)
        self.context = ContextBudget.of(self.cfg)
        self.measure = measures(self.tok)
        self.tokenizer_name = getattr(self.tok, "name", type(self.tok).__name__)
        self.schedule = host_schedule(self.cfg.segment_return_share)
        # A plain run rolls every episode to its end, its tokens unversioned; a streaming session
        # (rollout/session.py) keeps one Run across training steps with a PolicyClock.
        self.clock: Clock = clock or Unversioned()

    def add_episodes(self, episodes: list[Episode], local: list[bool] | None = None) -> None:
        """Append episodes to a running session; they start after those queued before them."""
        self.episodes.extend(episodes)  # the same list HostJobs reads
        self.local.extend([True] * len(episodes) if local is None else local)
        self.streams.extend(dict() for _ in episodes)

    # -- main loop -----------------------------------------------------------------------------
    def loop(self, should_stop: Callable[[], bool] | None) -> bool:
        """Run every episode to its end: True; False when `should_stop` said so after a segment."""
        t0 = time.perf_counter()
        while True:
            self.schedule.host_phase(self)
            if self.finished():
                break
            if self.schedule.too_few_ready(self):
                self.collect(wait=True)
                continue
            self.device.prefill(self.rows)
            # A decode segment runs until every live row has ended its turn (or, with
            # segment_return_share < 1, that share of them), never one token per host round trip;
            # then the turns handed over just before keep running in the pool meanwhile (decoding
            # releases the GIL). No row to run and no host work in flight means every live stream
            # waits on another: a real deadlock.
            if not self._decode() and not self._wait_for_host():
                self._break_deadlock()
            if should_stop is not None and should_stop():
                return False
        self.stats.wall_s = time.perf_counter() - t0
        self.stats.env_s = union_length(self.host.spans)
        self.stats.hidden_s = overlap_length(self.host.spans, self.device.spans)
        return True

    def live_streams(self) -> list[Stream]:
        return [s for index in range(self.next_episode) for s in self.streams[index].values() if s.live]

    def finished(self) -> bool:
        """The loop ends: every episode done, or a streaming session's step has what it needs."""
        return self.clock.step_over(self.done_episodes) or self._all_done()

    def _all_done(self) -> bool:
        if self.rows.occupied() or self.next_episode < len(self.episodes) or self.host:
            return False
        waiting_on_host = (Phase.QUEUED, Phase.TURN_ENDED, Phase.NOTIFY)
        return not any(s.phase in waiting_on_host for ep in self.streams for s in ep.values())

    def _wait_for_host(self) -> bool:
        """Nothing was decoded: wait for the first episode job in flight and apply it. False when
        nothing at all can make progress (no job, no event to hand over, no queued stream that a
        free row can take)."""
        if self.host:
            self.collect(wait=True)
            return True
        streams = [s for ep in self.streams for s in ep.values()]
        if any(s.phase in (Phase.TURN_ENDED, Phase.NOTIFY) for s in streams):
            return True
        return bool(self.rows.free()) and any(s.phase is Phase.QUEUED for s in streams)

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

    # -- admission -----------------------------------------------------------------------------
    def admit(self) -> None:
        """Seat queued streams, then new episodes, in free rows; park waiting streams for queued
        ones when no row is free (new episodes never displace a waiting stream: only streams
        already started can be what a waiting stream waits for)."""
        self._drop_rowless()
        for stream in self.device.over_capacity(self.rows):  # a paged cache short of pages
            self._make_room(stream)
        free = self.rows.free()
        # Queued streams (new streams of running episodes) go before new episodes: an episode
        # holds its environment and tools open until all its streams end, so finishing started
        # ones first bounds the episodes alive at once. Episodes start lazily, only when a row is
        # free, so `start()` (prompt building, world queries) is paid as rows open, not all up front.
        while True:
            self._drop_rowless()
            if not self.queue:
                if not free or self.next_episode >= len(self.episodes):
                    return
                if self.local[self.next_episode]:
                    self._start_episode(self.next_episode)
                self.next_episode += 1
                continue
            self._order_rows(free, self.queue[0])
            if not free or not self.device.can_seat(self.queue[0], free[0], self.rows):
                victim = self._park_candidate()
                if victim is None:
                    return  # every row is sampling (or the pages are); the queue waits for a turn to end
                free.append(self._park(victim))
                continue
            self._seat(self.queue.popleft(), free.pop(0))

    def _order_rows(self, free: list[int], stream: Stream) -> None:
        """Free rows holding less of `stream`'s record first: a stream seated in the row that holds
        its prefix would overwrite it (an agent's next turn, sent after its last one ended), while
        from another row that prefix is copied. Stable: other rows keep their order."""
        prefix = self.device.prefix
        if prefix is not None and len(free) > 1:
            free.sort(key=lambda r: prefix.shared(r, stream))

    def _drop_rowless(self) -> None:
        """Unqueue streams at the head that need no row now (no longer QUEUED: stopped, or a fully
        forced turn awaiting on_turn_end or waiting after it); a Continue queues them again."""
        while self.queue and self.queue[0].phase is not Phase.QUEUED:
            self.queue.popleft()

    def _seat(self, stream: Stream, row: int) -> None:
        """Give `stream` a row; its whole record is (re-)prefilled into it."""
        self.rows.seat(stream, row)
        stream.phase = Phase.SAMPLING
        # > 0 only for a stream that was parked: prefilling those tokens again counts as
        # reprefill_tokens (rollout/device.py), copying them from a row still holding them does not.
        stream.refeed = max(stream.refeed, stream.cached)
        # A row is reused without clearing it: `reset` makes the next prefill start the row at
        # position 0 (its stale slots are masked by the row's fill length), and the stream's
        # whole record so far is pending, since nothing of it is in this row's cache (prefix
        # reuse may copy part of it from another row first).
        stream.reset, stream.cached = True, 0
        stream.pending = list(stream.record.ids)

    def _make_room(self, stream: Stream) -> None:
        """A seated stream gives its row (and KV pages) up for the sampling ones to fit: a waiting one
        is parked; a sampling one goes back to the head of the queue, its whole record to be
        prefilled again when seated (counted as a park; sampling keys ignore rows, so its record
        is the one it would have had)."""
        sampling = stream.phase is Phase.SAMPLING
        self._park(stream)
        if sampling:
            stream.phase = Phase.QUEUED
            self.queue.appendleft(stream)

    def _park_candidate(self) -> Stream | None:
        """The waiting stream holding a row that waited longest; ties by episode and creation
        order, so runs are reproducible."""
        waiting = self.rows.in_phase(Phase.WAITING)
        return min(waiting, key=lambda s: (s.idle_since, s.episode_index, s.ordinal), default=None)

    def _park(self, stream: Stream) -> int:
        """Free a waiting stream's row, keeping its record (and `cached`, for reprefill_tokens)."""
        row = self.rows.release(stream)
        stream.pending = []
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

    # -- decode results ------------------------------------------------------------------------
    def _decode(self) -> bool:
        """One decode segment over the rows that are sampling. False if no row could run."""
        batch, stopped = self._decode_batch()
        if not batch:
            return stopped
        self._apply_segment(batch, self.device.decode(batch, self.key))
        return True

    def _decode_batch(self) -> tuple[list[tuple[int, Stream, int]], bool]:
        """(row, stream, token room) of every sampling row; True if a row had to be stopped instead."""
        batch: list[tuple[int, Stream, int]] = []
        stopped = False
        for r, s in enumerate(self.rows.slots):
            if s is None or s.phase is not Phase.SAMPLING:
                continue
            room = min(
                s.limits.max_turn_tokens - s.turn_sampled, s.limits.max_total_tokens - len(s.record.ids)
            )
            if room <= 0:  # cannot happen by construction; never spin on it
                self._stop(s, StopReason.MAX_TOTAL_TOKENS, notify=True)
                stopped = True
                continue
            batch.append((r, s, room))
        return batch, stopped

    def _apply_segment(self, batch: list[tuple[int, Stream, int]], segment: Segment) -> None:
        """Append each row's sampled tokens to its stream and end the turns that finished."""
        # `batch` fixed which stream each row decoded for: applying one row's result can stop (and
        # unseat) a sibling through on_limit before this loop reaches the sibling's row.
        for r, stream, _ in batch:
            if not stream.live:  # stopped by a sibling's on_limit while this loop ran: its row is gone
                continue
            k = int(segment.count[r])
            new_ids = segment.ids[r, :k].tolist()
            if self.engine.trace is not None:
                self.engine.trace(stream.key, "decode", new_ids, stream.cached)
            logprobs, versions = segment.logprobs[r, :k].tolist(), self.clock.stamps(stream, k)
            stream.record.append(new_ids, sampled=True, logprobs=logprobs, versions=versions)
            if segment.routes is not None:  # router replay: the experts that computed them
                stream.record.put_routes(stream.cached, segment.routes[r, :k])
            stream.cached += k
            stream.turn_sampled += k
            if segment.finish[r] == Finish.STOP:
                self._turn_complete(stream)
            elif segment.finish[r] == Finish.BUDGET:
                self._hit_budget(stream)

    def _hit_budget(self, stream: Stream) -> None:
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

    # -- host jobs -----------------------------------------------------------------------------
    def submit(self) -> bool:
        """Hand each started episode's new events (turn-ends, limit notices) to the pool as
        one job, unless a job of it is still out or it failed. True if any job was submitted."""
        submitted = False
        for index in range(self.next_episode):
            if index in self.host or index in self.failed:
                continue
            events = pending_events(list(self.streams[index].values()))
            if events:
                self.host.submit(index, events)
                submitted = True
        return submitted

    def collect(self, wait: bool) -> None:
        """Apply the finished episode jobs (wait: at least one), in episode order."""
        for index, events, results in self.host.finished(wait):
            for (stream, reason), (outcome, elapsed) in zip(events, results):
                if index in self.failed:
                    continue  # the episode is over; its later outcomes are dropped
                self.apply_outcome(stream, reason, outcome, elapsed)
            self._maybe_finish(index)
