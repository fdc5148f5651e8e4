"""Concurrent requests -> one streaming engine session (rollout/session.py), on its own thread.

Each request is an episode of one stream and one turn. The worker thread keeps one session's run
alive: between decode segments (the run's `should_stop` poll, on this thread) it tells streamed
requests their new tokens, hands finished episodes' records to their requests and submits the
requests that arrived meanwhile, so a new request joins the running batch at the next segment
(continuous batching) and its prompt finds the KV of earlier turns in the rows (prefix reuse). The
engine is never touched from another thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from rollout.episodes import Continue, Episode, Stop, TurnOutcome
from rollout.record import EpisodeRecord
from rollout.sampling import StreamSampling
from sandbox.limits import StreamLimits
from sandbox.types import StopReason

log = logging.getLogger("serve")


class ServedEpisode(Episode):
    """One completion: the prompt, then one sampled turn. `on_tokens` (a streamed reply) hears the
    record's ids after every decode segment that sampled some, on the engine's thread."""

    def __init__(
        self,
        instance_id: str,
        ids: list[int],
        max_tokens: int,
        sampling: StreamSampling,
        on_tokens: Callable[[list[int]], None] | None = None,
    ):
        self.instance_id, self.ids, self.max_tokens, self.sampling = instance_id, ids, max_tokens, sampling
        self.on_tokens, self.reported = on_tokens, len(ids)

    def report(self, ids: list[int]) -> None:
        """Hand `ids` (the record so far) to `on_tokens` when it grew since the last report."""
        if self.on_tokens is not None and len(ids) > self.reported:
            self.reported = len(ids)
            self.on_tokens(list(ids))

    def start(self) -> list[Continue]:
        limits = StreamLimits(max_turn_tokens=self.max_tokens)
        return [Continue("main", self.ids, limits=limits, sampling=self.sampling)]

    def on_turn_end(self, stream: str, text: str, eos: bool) -> TurnOutcome:
        return TurnOutcome([Stop(stream, StopReason.EOS if eos else StopReason.DONE)])


class EngineWorker:
    """Runs `engine` (a RolloutEngine) for every request; `submit` may be called from any thread."""

    def __init__(self, engine: Any, rng: int = 0):
        self.engine, self.rng = engine, rng
        self.session = engine.session(rng)
        self.inbox: queue.Queue[tuple[list[Episode], list[concurrent.futures.Future]] | None] = queue.Queue()
        self.waiting: dict[int, concurrent.futures.Future] = {}  # session episode index -> its request
        self.closed = False
        self.thread = threading.Thread(target=self._serve, name="engine", daemon=True)
        self.thread.start()

    def submit(self, episodes: list[Episode]) -> list[concurrent.futures.Future]:
        """Futures of each episode's record (or of the engine's exception)."""
        futures = [concurrent.futures.Future() for _ in episodes]
        self.inbox.put((episodes, futures))
        return futures

    @property
    def stats(self) -> Any:
        """The session's running counts (rollout.stats.EngineStats): prefix reuse, tokens."""
        return self.session.run.stats

    def close(self) -> None:
        self.closed = True
        self.inbox.put(None)
        self.thread.join(timeout=60)
        self.session.close()

    def _serve(self) -> None:
        while not self.closed:
            if not self.waiting and not self._take(block=True):
                break
            try:
                for record in self.session.advance(list(self.waiting), should_stop=self._between_segments):
                    self._resolve(record.episode, record)
                self._deliver()
            except Exception as exc:  # a failed run fails its requests, never the server
                log.exception("the engine failed; its requests get an error")
                for future in self.waiting.values():
                    if future.set_running_or_notify_cancel():
                        future.set_exception(exc)
                self.waiting.clear()
                self.session.close()
                self.session = self.engine.session(self.rng)

    def _between_segments(self) -> bool:
        if not self.closed:  # (at shutdown the event loop the reports go to may be gone)
            self._report()
        self._deliver()
        self._take(block=False)
        return self.closed

    def _take(self, block: bool) -> bool:
        """Submit the requests waiting in the inbox; False once the worker is closed."""
        while True:
            try:
                item = self.inbox.get(block=block)
            except queue.Empty:
                return True
            if item is None:
                return False
            episodes, futures = item
            for index, future in zip(self.session.submit(episodes), futures):
                self.waiting[index] = future
            block = False

    def _report(self) -> None:
        """Tell the streamed requests still decoding what their rows sampled this segment."""
        run = self.session.run
        for index, future in self.waiting.items():
            episode, streams = run.episodes[index], run.streams[index]
            if isinstance(episode, ServedEpisode) and "main" in streams and not future.cancelled():
                episode.report(streams["main"].record.ids)

    def _deliver(self) -> None:
        """Hand every finished episode's record to its request; nothing of it stays resident."""
        run = self.session.run
        for index in [i for i in self.waiting if i in run.done_episodes]:
            records = list(run.streams[index].values())
            run.streams[index], run.episodes[index] = {}, None
            records[0].record.pad_versions()
            self._resolve(index, records[0].record)

    def _resolve(self, index: int, record: EpisodeRecord) -> None:
        future = self.waiting.pop(index, None)
        if future is not None and future.set_running_or_notify_cancel():  # False: its client left
            future.set_result(record)
