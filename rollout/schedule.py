"""How a run interleaves host work (episode callbacks in the pool) with the device, chosen once per
run from `segment_return_share` (`host_schedule`).

`Drained` (share 1.0, the default): host work runs between decode segments and drains completely
before the device runs again; limit notices (`on_limit`) are applied at once. A segment that returns
only when every row has ended its turn leaves nothing to decode while tools run, so overlapping
would gain nothing there (benchmarks/bench_rollout.py measured wall = device + host either way),
and draining fixes the order in which turns return: records, and a streaming session's step
boundaries and token versions, are reproducible bit for bit.

`Overlapped` (share < 1): a segment returns once that share of its rows ended a turn; their
callbacks go to the pool and the next segment decodes the rows still sampling meanwhile (decoding
releases the GIL). Jobs that finished are applied between segments in episode order; limit notices
join their episode's chain in the pool. Which jobs are done at a given moment depends on timing,
but no record does: sampling keys ignore rows and segments, and each episode sees its own
callbacks in its own order.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Protocol

from rollout.host_jobs import call_limit
from rollout.stream import Phase, Stream

if TYPE_CHECKING:
    from rollout.run import Run


class HostSchedule(Protocol):
    def host_phase(self, run: Run) -> None:
        """Apply finished host work, admit streams into free rows, hand new turn-ends over."""

    def too_few_ready(self, run: Run) -> bool:
        """Wait for more host work before decoding."""

    def notify(self, run: Run, stream: Stream, reason: str) -> None:
        """Tell the episode that the engine cut `stream` (its on_limit)."""


class Drained:
    """Host and device take turns; see the module docstring."""

    def host_phase(self, run: Run) -> None:
        # Ending turns frees rows, admitting fills them, replies become pending tokens: prefill and
        # decode then see every row that can run.
        run.admit()
        while run.submit():
            while run.host:
                run.collect(wait=True)
            run.admit()

    def too_few_ready(self, run: Run) -> bool:
        return False  # nothing is in flight after the host phase

    def notify(self, run: Run, stream: Stream, reason: str) -> None:
        outcome, elapsed = call_limit(run.episodes[stream.episode_index], stream, reason)
        run.apply_outcome(stream, reason, outcome, elapsed)


class Overlapped:
    """Host work hidden behind decoding; see the module docstring."""

    def __init__(self, share: float):
        self.share = share

    def host_phase(self, run: Run) -> None:
        run.collect(wait=False)
        run.admit()
        run.submit()

    def too_few_ready(self, run: Run) -> bool:
        """Fewer than `share` of the rows that will sample next are ready. Why wait: a decode step
        costs the whole batch however few rows are active, so a segment started with 1 row ready
        and 7 tool calls about to return would spend 7/8 of every step on nothing."""
        if not run.host:
            return False
        ready = len(run.rows.in_phase(Phase.SAMPLING))
        coming = sum(1 for s in run.live_streams() if s.phase is Phase.HANDED)
        # floor: a segment that returned after ceil(share * n) of n rows stopped may go on with the rest
        return ready < math.floor(self.share * (ready + coming))

    def notify(self, run: Run, stream: Stream, reason: str) -> None:
        # The episode may be inside a callback in the pool: the notice joins its chain.
        stream.phase, stream.stop_notice = Phase.NOTIFY, reason


def host_schedule(segment_return_share: float) -> HostSchedule:
    """The schedule a run with this `segment_return_share` uses (module docstring)."""
    return Drained() if segment_return_share >= 1.0 else Overlapped(segment_return_share)
