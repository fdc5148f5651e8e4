"""Episodes: the "who speaks next" abstraction between the engine and an environment.

An episode owns one or more token *streams* (a stream = one EpisodeRecord, decoded in one batch row
while it runs). A single-agent episode has one stream, "main". A hierarchical episode (HiMAP-Travel)
can own a coordinator stream and one executor stream per day that share the episode's environment
state: after any stream's turn, the episode may resume that stream, start new streams, wake waiting
streams, or stop streams. A stream neither resumed nor stopped *waits*. A waiting stream keeps its KV
cache row until rows run out: then the engine parks it (row freed, record kept) and re-prefills its
whole record when it is continued, so waiting coordinators can never hold every row while their own
executors are queued. Parking never changes a record (sampling keys ignore rows).

The engine calls `start()` once, then `on_turn_end` after each finished assistant turn, and
`on_limit` when it cut a stream. `on_turn_end` runs in a thread pool, but one episode's calls never
overlap: the streams of an episode that finished a turn together are handed over one at a time in
stream-creation order, and their actions are applied in that order, so shared episode state (e.g.
HiMAP's commits) follows a fixed order, not thread timing. Different episodes run in parallel.
With `segment_return_share` < 1 the calls run while the device decodes other rows; `on_limit` then
also runs in the pool, chained after the episode's earlier callbacks (rollout/schedule.py). An
episode whose replies do not depend on which of its streams finished a turn first gets the same
records either way.

`Continue(stream, tokens, forced=[], tag=StreamTag(), limits=None)`: `tag` and `limits` are read
only when the Continue starts a new stream; the tag (the agent's label of the stream, opaque to the
engine) lands on its record; every record also carries `episode` (its index in `run(episodes)`: the trainer
groups a varying number of streams by it). `StreamLimits(max_turns=, max_turn_tokens=,
max_total_tokens=)` (None = the config's) can only tighten the engine config; a larger value fails
the episode (StopReason.ERROR, the message names the limit). A Continue to a stopped stream is
ignored, to a sampling stream fails the episode: re-planning uses new stream names ("day3.r2").
"stream was waiting with nothing left running" means a real deadlock (an episode bug).
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

from rollout.record import StreamTag
from rollout.sampling import StreamSampling
from sandbox.limits import StreamLimits
from sandbox.types import StopReason


@dataclasses.dataclass
class Continue:
    """Append `tokens` (mask 0: a prompt or an environment reply) to `stream`, then
    `forced` assistant tokens (mask 0, teacher-forced; see ForcedTokens), then let it sample.

    A stream name the episode has not used yet starts a new stream with `tokens` as its prompt;
    only then are `tag` (copied onto its EpisodeRecord for the trainer and the metrics) and
    `limits` (None: the engine config's) read. Later Continues ignore them.
    `responses`: the environment's response blocks that `tokens` render (sandbox.env.Response), kept
    on the record as the environment gave them (EpisodeRecord.responses), so readers never split the
    rendered text, which the model's own output can imitate."""

    stream: str
    tokens: list[int]
    _: dataclasses.KW_ONLY  # the rest by name: a tag never lands in `forced`
    forced: list[int] = dataclasses.field(default_factory=list)
    tag: StreamTag = StreamTag()
    limits: StreamLimits | None = None
    sampling: StreamSampling | None = None  # None: the engine config's (read when the stream starts)
    responses: list[Any] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Stop:
    """End `stream` with a stop reason (sandbox.types.StopReason) and its final answer, if any."""

    stream: str
    reason: StopReason
    answer: str | None = None


@dataclasses.dataclass
class TurnOutcome:
    """The episode's answer to one finished turn: actions, and per-call error flags of that turn."""

    actions: list[Continue | Stop]
    errors: list[bool] = dataclasses.field(default_factory=list)
    call_names: list[str] = dataclasses.field(default_factory=list)


class Episode(abc.ABC):
    """Base class: an instance id and the callbacks. Sampling keys derive from the run's rng, the
    episode's position in `engine.run(episodes)`, the stream's creation ordinal and the token
    position, never from the batch row.

    Actions on streams that are not waiting: a Continue to a stopped stream is ignored (a stopped
    record is final); a Continue to a stream that is still sampling its turn fails the episode
    (StopReason.ERROR on all its streams), since the reply would have no turn to answer. A stream is
    never reopened: re-planning starts a new stream under a new name (e.g. "day3.r2" for day 3 in
    round 2), which also keeps each round's record a separate training sequence.
    """

    instance_id: str

    @abc.abstractmethod
    def start(self) -> list[Continue]:
        """The first stream(s) and their prompt tokens."""

    @abc.abstractmethod
    def on_turn_end(self, stream: str, text: str, eos: bool) -> TurnOutcome:
        """`stream` finished an assistant turn whose decoded text (without the closing stop token)
        is `text`; `eos` is True when it ended with <|endoftext|> instead of <|im_end|>."""

    def on_limit(self, stream: str, reason: StopReason) -> list[Continue | Stop]:
        """The engine stopped `stream` at a limit (reason: a truncating StopReason). Multi-stream episodes
        can react (e.g. a coordinator re-plans a failed day); the default does nothing."""
        return []
