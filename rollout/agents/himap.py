"""HiMAP-Travel as a multi-stream rollout episode over sandbox.himap's protocol session.

Streams: "coordinator" and one "day{d}.r{r}" per (day, round), each started with its role's prompt
and its `HimapTag` (role, day, round) as the Continue's StreamTag, so every record says which role
it trained; `HimapTag.of(record.tag)` reads it back, typed. The
episode only translates: a finished turn goes to `HimapSession.turn`, and the session's `Advance`
becomes actions -- new streams, environment replies, Stops. The coordinator gets no action while
its round runs (it waits; the engine may park it). The answer is `Stop("coordinator",
StopReason.ANSWER, merged plan)`; without a coordinator (flat ablation) it goes on the Stop of the
executor that ended last. An executor ending with <|endoftext|> is cut (its day is rejected).

`himap_episode` builds one from a visible instance, like `rollout.agent_episode`; passing
`forced` (stream -> assistant texts, e.g. the scripted expert's `HimapExpertResult.texts`)
teacher-forces every turn, which replays a scripted episode through the engine.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from rollout.episodes import Continue, Episode, Stop, TurnOutcome
from rollout.prompt import prompt_ids
from rollout.record import StreamTag
from rollout.render import render_env_reply
from sandbox.benchmarks import as_benchmark
from sandbox.himap.kinds import COORDINATOR, ROLES, Role
from sandbox.himap.options import HimapOptions
from sandbox.himap.protocol import Advance, HimapSession
from sandbox.types import StopReason


@dataclasses.dataclass(frozen=True)
class HimapTag:
    """A HiMAP stream's role and, for a day executor, its day and round: what its records carry as
    their StreamTag (the engine's opaque label), encoded and decoded here only."""

    role: Role
    day: int | None = None
    round: int | None = None

    def stream_tag(self) -> StreamTag:
        details = tuple((k, v) for k, v in (("day", self.day), ("round", self.round)) if v is not None)
        return StreamTag(self.role.value, details)

    @classmethod
    def of(cls, tag: StreamTag) -> HimapTag:
        """The typed tag of a record (also one read back from JSON); ValueError for another agent's."""
        return cls(Role(tag.role), tag.detail("day"), tag.detail("round"))


class HimapEpisode(Episode):
    """One HiMAP episode; see the module docstring."""

    def __init__(
        self,
        instance_id: str,
        session: HimapSession,
        tokenizer: Any,
        *,
        forced: dict[str, list[str]] | None = None,
    ):
        self.instance_id = instance_id
        self.session = session
        self.tokenizer = tokenizer
        self.forced = {name: list(texts) for name, texts in (forced or {}).items()}
        self.answer: str | None = None
        self.limits = {role: session.options.limits(role) for role in ROLES}

    def _forced(self, stream: str) -> list[int]:
        texts = self.forced.get(stream)
        if not texts:
            return []
        return self.tokenizer.encode(texts.pop(0)) + [self.tokenizer.im_end_id]

    def _actions(self, adv: Advance, last: str | None = None) -> list[Continue | Stop]:
        tok = self.tokenizer
        actions: list[Continue | Stop] = []
        for s in adv.start:
            ids = prompt_ids(s.prompt, tok)
            lim = self.limits[s.role]
            tag = HimapTag(s.role, s.day, s.round).stream_tag()
            actions.append(Continue(s.name, ids, forced=self._forced(s.name), tag=tag, limits=lim))
        for name, step in adv.reply:
            reply = render_env_reply(tok, step.rendered)
            actions.append(Continue(name, reply, forced=self._forced(name), responses=step.responses))
        ended = [name for name, _ in adv.end]
        for name, step in adv.end:
            cut = step is not None and step.stop_reason == StopReason.MAX_TURNS
            actions.append(Stop(name, StopReason.MAX_TURNS if cut else StopReason.DONE))
        if adv.finished:
            self.answer = adv.answer
            # The coordinator (flat: the stream that ended the episode) carries the answer, even
            # when its own turns ran out in the same step; no answer keeps that stop's reason.
            holder = COORDINATOR if self.session.coordinator is not None else (ended[-1] if ended else last)
            own = [a for a in actions if isinstance(a, Stop) and a.stream == holder]
            actions = [a for a in actions if a not in own]
            fallback = own[0].reason if own else StopReason.DONE
            reason = StopReason.ANSWER if adv.answer is not None else fallback
            actions.append(Stop(holder, reason, adv.answer))
        return actions

    def start(self) -> list[Continue]:
        return self._actions(self.session.start())  # type: ignore[return-value]

    def on_turn_end(self, stream: str, text: str, eos: bool) -> TurnOutcome:
        if eos:
            adv = self.session.cut(stream, StopReason.EOS)
            return TurnOutcome([Stop(stream, StopReason.EOS)] + self._actions(adv, stream))
        adv = self.session.turn(stream, text)
        return TurnOutcome(self._actions(adv, stream), adv.errors, adv.calls)

    def on_limit(self, stream: str, reason: str) -> list[Continue | Stop]:
        return self._actions(self.session.cut(stream, reason), stream)


def himap_episode(
    instance: dict[str, Any],
    benchmark: Any,
    tokenizer: Any,
    options: HimapOptions | None = None,
    *,
    forced: dict[str, list[str]] | None = None,
) -> HimapEpisode:
    """A HiMAP episode for one visible instance of `benchmark` (a sandbox Benchmark): a fresh
    protocol session (its own Σ) on the benchmark's HiMAP domain."""

    bench = as_benchmark(benchmark)
    session = HimapSession(bench.himap_domain(instance), options)
    return HimapEpisode(str(instance["id"]), session, tokenizer, forced=forced)


def role_metrics(records: list[Any]) -> dict[str, dict[str, float]]:
    """Per role, over HiMAP records: streams, turns, sampled tokens, context tokens (prompt and
    environment replies), and sampled tokens per stream (the paper's tokens-per-role figures)."""
    out: dict[str, dict[str, float]] = {}
    for record in records:
        m = out.setdefault(str(record.role), {"streams": 0, "turns": 0, "sampled": 0, "context": 0})
        m["streams"] += 1
        m["turns"] += len(record.turns)
        m["sampled"] += record.num_sampled
        m["context"] += len(record.ids) - record.num_sampled
    for m in out.values():
        m["sampled_per_stream"] = m["sampled"] / m["streams"]
    return out
