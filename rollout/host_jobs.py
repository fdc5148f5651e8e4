"""Host jobs: the episode callbacks a run hands to its thread pool, one job per episode.

Why grouped: the streams of one episode share its state (HiMAP's global budget and venue commits),
so its callbacks run one at a time in creation order and their actions are applied in that order.
An episode with a job still out keeps its new events until that job is applied (an episode's work
is chained, never concurrent). Different episodes share nothing and run in parallel in the pool.
Which jobs have finished at a given moment depends on timing, but finished jobs are applied in
episode order and each episode's outcomes in its own fixed order, so no record depends on timing.

The callback wrappers (`call_turn_end`, `call_limit`) are the one code path of both host schedules
(rollout/schedule.py): turn-ends always run in the pool, limit notices there or inline.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator, Sequence
from typing import Any

from rollout.episodes import Episode, TurnOutcome
from rollout.stats import Span
from rollout.stream import Phase, Stream

Event = tuple[Stream, str | None]  # (stream, None): a finished turn; (stream, reason): a limit notice
Result = tuple[TurnOutcome | Exception, float]  # the callback's outcome (or what it raised), seconds


def call_limit(episode: Episode, stream: Stream, reason: str) -> Result:
    """`episode.on_limit` for a stream the engine cut, as a TurnOutcome."""
    t0 = time.perf_counter()
    try:
        actions = episode.on_limit(stream.record.stream, reason)
        return TurnOutcome(list(actions)), time.perf_counter() - t0
    except Exception as exc:
        return exc, time.perf_counter() - t0


def call_turn_end(episode: Episode, stream: Stream, tokenizer: Any) -> Result:
    """`episode.on_turn_end` with the decoded text of the stream's last turn (stop token dropped)."""
    t0 = time.perf_counter()
    try:
        start, end = stream.record.turns[-1]
        ids = stream.record.ids[start:end]
        eos = bool(ids) and ids[-1] == tokenizer.eos_id
        text = tokenizer.turn_text(ids)  # the report reads turns through it too
        outcome = episode.on_turn_end(stream.record.stream, text, eos)
        if not isinstance(outcome, TurnOutcome):
            raise TypeError(f"on_turn_end must return TurnOutcome, got {type(outcome).__name__}")
        return outcome, time.perf_counter() - t0
    except Exception as exc:
        return exc, time.perf_counter() - t0


def pending_events(streams: Sequence[Stream]) -> list[Event]:
    """An episode's events not yet handed over (its streams in creation order)."""
    events: list[Event] = []
    for stream in streams:
        if stream.phase is Phase.TURN_ENDED:
            events.append((stream, None))
        elif stream.phase is Phase.NOTIFY:
            events.append((stream, stream.stop_notice))
    return events


class HostJobs:
    """The episode jobs in flight: episode index -> future of (events, results, span)."""

    def __init__(self, pool: concurrent.futures.Executor, episodes: Sequence[Episode], tokenizer: Any):
        self.pool, self.episodes, self.tokenizer = pool, episodes, tokenizer
        self.jobs: dict[int, concurrent.futures.Future] = {}
        self.spans: list[Span] = []  # (start, end) of every job

    def __bool__(self) -> bool:
        return bool(self.jobs)

    def __contains__(self, index: int) -> bool:
        return index in self.jobs

    def submit(self, index: int, events: list[Event]) -> None:
        """Hand one episode's events over: its turn-ends become HANDED, its notices STOPPED."""
        for stream, reason in events:
            stream.phase = Phase.HANDED if reason is None else Phase.STOPPED
        self.jobs[index] = self.pool.submit(self._run, index, events)

    def _run(self, index: int, events: list[Event]) -> tuple[list[Event], list[Result], Span]:
        """One episode's callbacks, in order, in one pool thread; stops at the first that raised."""
        t0 = time.perf_counter()
        episode = self.episodes[index]
        results: list[Result] = []
        for stream, reason in events:
            call = (
                call_turn_end(episode, stream, self.tokenizer)
                if reason is None
                else call_limit(episode, stream, reason)
            )
            results.append(call)
            if isinstance(call[0], Exception):
                break
        return events, results, (t0, time.perf_counter())

    def finished(self, wait: bool) -> Iterator[tuple[int, list[Event], list[Result]]]:
        """The finished jobs (wait: at least one), in episode order; their HANDED streams become
        WAITING before the caller applies the outcomes (an action may then continue them)."""
        if wait:
            concurrent.futures.wait(self.jobs.values(), return_when=concurrent.futures.FIRST_COMPLETED)
        for index in sorted(i for i, job in self.jobs.items() if job.done()):
            events, results, span = self.jobs.pop(index).result()
            self.spans.append(span)
            for stream, _ in events:
                if stream.phase is Phase.HANDED:
                    stream.phase = Phase.WAITING
            yield index, events, results
