"""RolloutSession: one engine run that outlives a training step (streaming rollouts).

`RolloutEngine.run` rolls every episode to its end, so a GRPO step ends with a tail in which the
last long episodes decode with most rows empty. A session keeps one `rollout.run.Run` alive across
steps instead: the trainer `submit`s the episodes of the next steps ahead, `advance(indices)`
decodes until the episodes it needs now have finished (returning their records), and episodes still
running stay resident -- their rows, KV, tool state and host jobs -- while the trainer updates the
weights; `update_weights` then switches the policy and the loop continues where it stopped.

Versions: the session counts weight updates (`version`, 0 at the start). Every sampled token records
the version of the weights that computed its logits (`EpisodeRecord.versions`); a row that was
mid-turn at an update samples its next token from logits of the old weights, and is tagged so.

After an update a running episode's cache either stays (`resume_kv="keep"`: the KV of its earlier
tokens was computed by older weights, as in slime) or is recomputed (`"recompute"`, as in AReaL):
every seated stream is re-seated at position 0 with its whole record pending, exactly as a parked
stream is (`Run._seat`), so the next prefill rebuilds its KV under the new weights; rows that no
stream holds forget their prefix, so no copy brings stale KV back.

Sampling keys are those of a plain run: (session rng, the episode's index in the session, stream
ordinal, position), so without a weight update a session's records equal `engine.run`'s of the same
episodes in the same order. Where a step boundary falls relative to other episodes' turns is fixed
under the default host schedule (`segment_return_share` 1.0, rollout/schedule.py); with a share
below 1 it depends on when tool calls return.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import jax

from models.causal_lm import CausalLM
from rollout.clock import PolicyClock
from rollout.episodes import Episode
from rollout.lockstep import loop_across_hosts
from rollout.record import EpisodeRecord
from rollout.run import RolloutStopped, Run
from rollout.stats import EngineStats
from rollout.stream import Phase

if TYPE_CHECKING:  # the engine builds its sessions (RolloutEngine.session)
    from rollout.engine import RolloutEngine

_PER_LOOP = ("wall_s", "env_s", "hidden_s")  # EngineStats fields set per loop, not counted up


class RolloutSession:
    """A streaming run on `engine` (a RolloutEngine); see the module docstring. Close it (or use it
    as a context manager) to end its tool pool."""

    def __init__(self, engine: RolloutEngine, rng: int = 0):
        self.engine = engine
        self.resume = RESUME_KV[engine.config.resume_kv]
        self.pool = concurrent.futures.ThreadPoolExecutor(engine.config.tool_workers)
        self.clock = PolicyClock()
        self.run = Run(engine, [], jax.random.key(rng), self.pool, [], self.clock)
        self.stats = EngineStats(rows=engine.config.batch_rows)  # of the last `advance`

    def __enter__(self) -> RolloutSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    @property
    def version(self) -> int:
        return self.clock.version

    def submit(self, episodes: Sequence[Episode], local: Sequence[bool] | None = None) -> list[int]:
        """Queue episodes behind those submitted before; returns their indices in the session.
        `local[i]`: this process drives episode i (several processes; default all)."""
        start = len(self.run.episodes)
        self.run.add_episodes(list(episodes), None if local is None else list(local))
        return list(range(start, len(self.run.episodes)))

    def advance(
        self, indices: Sequence[int], should_stop: Callable[[], bool] | None = None
    ) -> list[EpisodeRecord]:
        """Decode until every local episode of `indices` has finished; returns their records (in
        the order of `indices`, then stream order), which leave the session. Other episodes keep
        running up to that moment and stay resident. RolloutStopped when `should_stop` said so."""
        run = self.run
        mine = [i for i in indices if run.local[i]]
        self.clock.wanted = frozenset(mine)
        before = dataclasses.replace(run.stats)
        run.host.spans.clear()
        run.device.spans.clear()
        loop = run.loop if jax.process_count() == 1 else functools.partial(loop_across_hosts, run)
        try:
            if not loop(should_stop):
                raise RolloutStopped("the rollout was asked to stop; the session's episodes are dropped")
        finally:
            self.clock.wanted = None
        self.stats = _step_stats(before, run.stats, len(mine))
        records = []
        for i in mine:
            for stream in run.streams[i].values():
                for record in stream.records:
                    record.pad_versions()
                    records.append(record)
            run.streams[i], run.episodes[i] = {}, None  # finished: nothing of it stays resident
        return records

    def update_weights(self, model: CausalLM) -> None:
        """Switch to new weights; running episodes continue under them (module docstring)."""
        self.engine.update_weights(model)
        old, self.clock.version = self.clock.version, self.clock.version + 1
        self.resume(self.run, self.clock, old)


def _keep_kv(run: Run, clock: PolicyClock, old: int) -> None:
    """`resume_kv="keep"`: rows keep their KV; a row mid-turn samples its next token from logits of
    the old weights, so that token carries the old version."""
    for stream in run.rows.slots:
        if stream is not None and stream.phase is Phase.SAMPLING and not stream.pending:
            clock.first_version.setdefault(stream, old)


def _recompute_kv(run: Run, clock: PolicyClock, old: int) -> None:
    """`resume_kv="recompute"`: parking's re-seat (Run._seat) without the phase change: every seated
    stream's whole record is prefilled again from position 0 before it samples next, and rows nobody
    holds forget their prefix (their content is KV of the old weights)."""
    for stream in run.rows.slots:
        if stream is not None:
            stream.refeed = max(stream.refeed, stream.cached)
            stream.reset, stream.cached, stream.pending = True, 0, list(stream.record.ids)
    prefix = run.device.prefix
    if prefix is not None:
        for r in run.rows.local:
            if run.rows.slots[r] is None:
                prefix.holder[r], prefix.held[r] = None, 0


# What a weight update does to the running episodes' KV, chosen once per session (`resume_kv`).
RESUME_KV: dict[str, Callable[[Run, PolicyClock, int], None]] = {"keep": _keep_kv, "recompute": _recompute_kv}


def _step_stats(before: EngineStats, after: EngineStats, episodes: int) -> EngineStats:
    """What one `advance` added to the session's running counts."""
    out = {}
    for field in dataclasses.fields(EngineStats):
        a, b = getattr(after, field.name), getattr(before, field.name)
        out[field.name] = a if field.name in _PER_LOOP + ("rows",) else a - b
    out["episodes"] = episodes
    return EngineStats(**out)
