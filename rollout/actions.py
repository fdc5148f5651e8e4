"""What an episode's actions do to its streams, the half of `Run` (rollout/run.py) that the loop
calls back into: a callback's outcome applied, a stream opened by its first Continue, continued
with a reply, its turn ended, stopped at a limit or by Stop, an episode failed, an episode finished.
The phase changes these steps make are drawn in rollout/stream.py. A mixin, not a separate object,
because these steps and the loop share the run's whole state (rows, queue, host jobs, stats);
`Run` sets every attribute named below."""

from __future__ import annotations

import collections
import time
from typing import Any

import jax

from rollout.context import ContextBudget, CountTokens, Folded, RenderReply, Reply
from rollout.episodes import Continue, Episode, Stop, StreamLimits, TurnOutcome
from rollout.host_jobs import HostJobs
from rollout.record import EpisodeRecord, StreamTag
from rollout.schedule import HostSchedule
from rollout.stats import EngineStats
from rollout.stream import Phase, RowTable, Stream
from sandbox.types import StopReason


class StreamActions:
    """Episode actions and the stream lifecycle; mixed into `Run`, which owns the state."""

    engine: Any  # the RolloutEngine (config, tokenizer, progress hook)
    cfg: Any  # its RolloutConfig
    tok: Any  # its tokenizer
    episodes: list[Episode]
    streams: list[dict[str, Stream]]
    rows: RowTable
    queue: collections.deque[Stream]
    stats: EngineStats
    host: HostJobs
    failed: set[int]
    done_episodes: set[int]
    default_limits: StreamLimits
    tokenizer_name: str
    schedule: HostSchedule
    device: Any  # rollout.device.DeviceCalls: its prefix index learns what a stopped row keeps
    context: ContextBudget
    measure: tuple[RenderReply, CountTokens]  # the run's tokenizer, as a fold needs it

    def apply_outcome(
        self, stream: Stream, reason: str | None, outcome: TurnOutcome | Exception, elapsed: float
    ) -> None:
        """One callback's result: its actions applied, or its episode failed if it raised."""
        index = stream.episode_index
        stream.env_s += elapsed
        if isinstance(outcome, Exception):
            name = "on_turn_end" if reason is None else "on_limit"
            self._fail_episode(index, f"{name}() raised {type(outcome).__name__}: {outcome}")
            return
        stream.record.errors.extend(outcome.errors)
        stream.record.calls.extend(outcome.call_names)
        self._apply(index, outcome.actions)

    def _new_stream(self, index: int, name: str, start: Continue | None, limits: StreamLimits) -> Stream:
        """A stream of episode `index`, tagged with what its starting Continue says."""
        record = EpisodeRecord(
            instance_id=str(self.episodes[index].instance_id),
            stream=name,
            tokenizer=self.tokenizer_name,
            episode=index,
            process=jax.process_index(),
            tag=start.tag if start is not None else StreamTag(),
        )
        sampling = start.sampling if start is not None else None
        stream = Stream(index, self._ordinal(index), record, limits, sampling, started=time.perf_counter())
        self.streams[index][name] = stream
        return stream

    def _ordinal(self, index: int) -> int:
        """The next creation ordinal of episode `index` (a sampling key): one per stream and per
        segment, so no two contexts of an episode draw the same keys."""
        streams = self.streams[index].values()
        return len(streams) + sum(len(s.earlier) for s in streams)

    def _apply(self, index: int, actions: list[Continue | Stop]) -> None:
        """Apply an episode's actions (at start, after a turn, or after a limit)."""
        for action in actions:
            if index in self.failed:
                break  # e.g. an on_limit of an earlier action raised
            stream = self.streams[index].get(action.stream)
            if isinstance(action, Stop):
                if stream is not None and stream.live:
                    self._stop(stream, action.reason, action.answer)
            elif stream is None:
                if not self._open_stream(index, action):
                    return
            elif stream.live and not self._continue(stream, action):
                return
        self._maybe_finish(index)

    def _open_stream(self, index: int, action: Continue) -> bool:
        """A Continue naming a new stream: its prompt, then it queues. False if the episode failed."""
        try:
            limits = (action.limits or StreamLimits()).resolve(self.cfg)
        except ValueError as exc:
            self._fail_episode(index, f"stream {action.stream!r}: {exc}")
            return False
        stream = self._new_stream(index, action.stream, action, limits)
        stream.record.prompt_len = len(action.tokens)
        if len(action.tokens) + len(action.forced) >= limits.max_total_tokens:
            stream.record.append(action.tokens, sampled=False)
            self._stop(stream, StopReason.MAX_TOTAL_TOKENS, notify=True)
            return True
        self._append_context(stream, action.tokens, action.forced)
        self.queue.append(stream)
        return True

    def _continue(self, stream: Stream, action: Continue) -> bool:
        """A Continue for a live stream: the reply and the next turn, or a limit. False if the
        episode failed (a Continue while the stream is still sampling its turn)."""
        index = stream.episode_index
        if stream.phase.sampling:
            self._fail_episode(index, f"Continue for stream {action.stream!r} while it is generating")
            return False
        added = len(action.tokens) + len(action.forced)
        if stream.turns_done >= stream.limits.max_turns:
            self._stop(stream, StopReason.MAX_TURNS, notify=True)
            return True
        answered = stream.record  # the record holding the turn this reply answers
        room = stream.limits.max_turn_tokens
        folded = self.context.make_room(
            stream.record.ids, stream.replies, added, stream.turns_done, room, self.measure
        )
        if folded is not None and not folded.fits:
            self._stop(stream, StopReason.CONTEXT_BUDGET, notify=True)
            return True
        if folded is not None:
            stream = self._next_segment(stream, folded, len(action.tokens))
        if len(stream.record.ids) + added >= stream.limits.max_total_tokens:
            self._stop(stream, StopReason.MAX_TOTAL_TOKENS, notify=True)
            return True
        answered.add_responses(action.responses)  # the blocks `tokens` render, as given
        if action.responses:
            start = len(stream.record.ids)
            reply = Reply(stream.turns_done - 1, start, start + len(action.tokens), tuple(action.responses))
            stream.replies.append(reply)
        self._append_context(stream, action.tokens, action.forced)
        if stream.row is None and stream not in self.queue:
            self.queue.append(stream)  # parked or a new segment: admitted with its whole record
        return True

    def _next_segment(self, stream: Stream, folded: Folded, reply: int) -> Stream:
        """End `stream`'s segment (StopReason.FOLDED) and put a new stream object in its place whose
        record starts with the folded context (mask 0). A new object, because the prefix index
        reads a row's content from the stream that wrote it: the old segment's row still holds the
        old ids (the folded context's head is copied from it)."""
        index, old = stream.episode_index, stream.record
        record = EpisodeRecord(
            instance_id=old.instance_id,
            stream=old.stream,
            tokenizer=old.tokenizer,
            episode=old.episode,
            process=old.process,
            tag=old.tag,
            prompt_len=len(folded.ids) + reply,  # the context its first turn starts from
            segment=old.segment + 1,
        )
        record.append(folded.ids, sampled=False)
        ordinal, now = self._ordinal(index), time.perf_counter()
        new = Stream(index, ordinal, record, stream.limits, stream.sampling, started=now)
        new.turns_done, new.replies, new.earlier = stream.turns_done, folded.replies, [*stream.earlier, old]
        stream.earlier = []
        self._stop(stream, StopReason.FOLDED)
        self.streams[index][old.stream] = new
        self.stats.folds += 1
        self.stats.folded_tokens += folded.tokens
        return new

    def _append_context(self, stream: Stream, tokens: list[int], forced: list[int]) -> None:
        """Append mask-0 context, then the forced start of the next assistant turn."""
        record = stream.record
        record.append(tokens, sampled=False)
        stream.turn_start, stream.turn_sampled = len(record.ids), 0
        stream.phase = Phase.QUEUED if stream.row is None else Phase.SAMPLING
        if forced:
            record.forced.append((len(record.ids), len(record.ids) + len(forced)))
            record.append(forced, sampled=False)
        stream.pending.extend(tokens)
        stream.pending.extend(forced)
        if forced and forced[-1] in (self.tok.im_end_id, self.tok.eos_id):
            self._turn_complete(stream)  # fully scripted turn: nothing to sample

    def _turn_complete(self, stream: Stream) -> None:
        stream.record.turns.append((stream.turn_start, len(stream.record.ids)))
        stream.turns_done += 1
        stream.phase = Phase.TURN_ENDED
        stream.idle_since = self.stats.segments

    def _stop(
        self,
        stream: Stream,
        reason: str,
        answer: str | None = None,
        *,
        notify: bool = False,
        message: str | None = None,
    ) -> None:
        """End a live stream's record; `notify`: tell its episode through on_limit, when the run's
        host schedule says (rollout/schedule.py)."""
        if not stream.live:
            return
        if stream.phase.sampling and len(stream.record.ids) > stream.turn_start:
            stream.record.turns.append((stream.turn_start, len(stream.record.ids)))  # cut turn
        stream.phase, stream.pending = Phase.STOPPED, []
        stream.record.stop_reason, stream.record.answer = StopReason(reason), answer
        stream.record.error_message = message
        stream.record.timings.update(
            wall_s=time.perf_counter() - stream.started, env_s=stream.env_s, turns=float(stream.turns_done)
        )
        row = self.rows.release(stream)
        if row is not None and self.device.prefix is not None:
            self.device.prefix.left(row, stream)
        if notify:
            self.schedule.notify(self, stream, reason)

    def _fail_episode(self, index: int, message: str) -> None:
        self.failed.add(index)
        streams = self.streams[index]
        for stream in streams.values():
            if stream.phase is Phase.NOTIFY:
                stream.phase = Phase.STOPPED  # its notice is dropped: the episode is over
        if not streams:
            self._new_stream(index, "main", None, self.default_limits)
        for stream in streams.values():
            if stream.live:
                self._stop(stream, StopReason.ERROR, message=message)
            elif stream.record.stop_reason != StopReason.ERROR:
                stream.record.error_message = message
        self._maybe_finish(index)

    def _maybe_finish(self, index: int) -> None:
        streams = self.streams[index].values()
        waiting = index in self.host or any(s.phase is Phase.NOTIFY for s in streams)
        if streams and not any(s.live for s in streams) and not waiting and index not in self.done_episodes:
            self.done_episodes.add(index)
            if self.engine.progress is not None:
                self.engine.progress(len(self.done_episodes), len(self.episodes))
