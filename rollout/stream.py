"""A stream's state in the engine: one `Phase` (the truth about where the stream is) and the
row table (which batch row each stream occupies: the row -> owner mapping).

Phases and their transitions (all made in rollout/run.py, except the pool hand-over and its
return, made in rollout/host_jobs.py):

    QUEUED ──seat──> SAMPLING ──turn ends──> TURN_ENDED ──handed to the pool──> HANDED
      ^                 ^                       (a fully forced turn ends at once)   │
      │                 └───── Continue (holds a row) ────┐                        applied
      └──────────────────────── Continue (no row) ──── WAITING <──────────────────────┘
    any live phase ──limit / Stop / error──> STOPPED, or NOTIFY first when its on_limit notice
    still has to reach the episode through the pool (rollout/schedule.py `Overlapped`);
    NOTIFY ──handed──> STOPPED.

A new stream is WAITING until its first Continue (its prompt) is applied. A WAITING stream may
hold its row (the engine parks it, freeing the row, when queued streams need one) or not (parked,
or never seated: a fully forced first turn). `row` says which; the phase never depends on it,
and no phase is re-derived from collections.
"""

from __future__ import annotations

import dataclasses
import enum

from rollout.context import Reply
from rollout.episodes import StreamLimits
from rollout.record import EpisodeRecord
from rollout.sampling import StreamSampling


class Phase(enum.Enum):
    QUEUED = "queued"  # has a turn to sample, waits for a row
    SAMPLING = "sampling"  # seated, sampling its turn (after any pending tokens are prefilled)
    TURN_ENDED = "turn_ended"  # turn complete, on_turn_end not yet handed to the pool
    HANDED = "handed"  # on_turn_end is in a pool job whose actions are not yet applied
    WAITING = "waiting"  # turn handled, neither continued nor stopped (may be parked)
    NOTIFY = "notify"  # stopped by a limit; its on_limit notice is not yet handed to the pool
    STOPPED = "stopped"  # record final

    @property
    def live(self) -> bool:
        return self not in (Phase.NOTIFY, Phase.STOPPED)

    @property
    def sampling(self) -> bool:
        """Between an assistant header and the end of that turn (seated or not)."""
        return self in (Phase.QUEUED, Phase.SAMPLING)


@dataclasses.dataclass(eq=False)
class Stream:
    episode_index: int
    ordinal: int  # creation order inside the episode (sampling key; order of its turn-ends)
    record: EpisodeRecord
    limits: StreamLimits  # resolved: every field set
    sampling: StreamSampling | None = None  # its own sampling parameters; None: the engine config's
    phase: Phase = Phase.WAITING  # until its first Continue gives it a turn to sample
    row: int | None = None  # its batch row; None: queued, parked, never seated, or stopped
    pending: list[int] = dataclasses.field(default_factory=list)  # record tokens not yet in the row's cache
    reset: bool = False  # the next prefill restarts the row at position 0
    cached: int = 0  # tokens of the record already in the row's cache
    refeed: int = 0  # tokens it had in a cache before it was parked (EngineStats.reprefill_tokens)
    turn_start: int = 0
    turn_sampled: int = 0
    turns_done: int = 0
    idle_since: int = 0  # decode segment count when its last turn ended (parking order)
    started: float = 0.0
    env_s: float = 0.0
    stop_notice: str | None = None  # NOTIFY: the StopReason its on_limit notice carries
    replies: list[Reply] = dataclasses.field(default_factory=list)  # the environment's, in `record`
    earlier: list[EpisodeRecord] = dataclasses.field(default_factory=list)  # its segments before this one

    @property
    def records(self) -> list[EpisodeRecord]:
        """Its segments' records in order (one unless its context was folded: rollout/context.py)."""
        return [*self.earlier, self.record]

    @property
    def live(self) -> bool:
        return self.phase.live

    @property
    def key(self) -> tuple[int, str]:
        return self.episode_index, self.record.stream


class RowTable:
    """Which stream occupies each batch row of the KV cache: the one row -> stream mapping.

    Several processes: each owns the rows on its addressable devices (`local`, from
    rollout.hosts.owned_rows) and seats only its own episodes' streams there; the other rows stay
    empty in its table (their streams live in another process)."""

    def __init__(self, num_rows: int, local: list[int] | None = None):
        self.slots: list[Stream | None] = [None] * num_rows
        self.local: list[int] = list(range(num_rows)) if local is None else local

    def __len__(self) -> int:
        return len(self.slots)

    def free(self) -> list[int]:
        return [r for r in self.local if self.slots[r] is None]

    def occupied(self) -> bool:
        return any(self.slots)

    def seat(self, stream: Stream, row: int) -> None:
        self.slots[row], stream.row = stream, row

    def release(self, stream: Stream) -> int | None:
        """Free the stream's row (if any); returns it."""
        row = stream.row
        if row is not None:
            self.slots[row], stream.row = None, None
        return row

    def in_phase(self, phase: Phase) -> list[Stream]:
        return [s for s in self.slots if s is not None and s.phase is phase]
