"""The one view model of a HiMAP episode's streams: each stream's name, its typed `HimapTag` and its
turns, from the scripted expert's traces or from an engine run's records. How a turn is shown is
the caller's: the notebook's text (`text_turns_*`, `render_episode` here) or the report's parsed
turns (b2tjax/report/himap.py passes b2tjax.report.conversation's). The session (its Σ and the
rounds' outcomes) is the episode's own.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from rollout.agents.himap import HimapTag
from rollout.record import EpisodeRecord
from sandbox.himap.kinds import Role

Turn = TypeVar("Turn")


@dataclasses.dataclass
class StreamView(Generic[Turn]):
    name: str
    tag: HimapTag
    turns: list[Turn]

    @property
    def executor(self) -> bool:
        """A day executor's stream (the coordinator's, and a flat team's days without a day, are not)."""
        return self.tag.role != Role.COORDINATOR and self.tag.day is not None


def text_turns_of_messages(messages: list[dict[str, str]]) -> list[tuple[str, str]]:
    """(assistant text, the environment reply that followed; "" after the last) per turn."""
    out = []
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            out.append((message["content"], messages[i + 1]["content"] if i + 1 < len(messages) else ""))
    return out


def streams_from_traces(
    traces: Sequence[dict[str, Any]],
    turns: Callable[[list[dict[str, str]]], list[Any]] = text_turns_of_messages,
) -> list[StreamView[Any]]:
    """The scripted expert's role-split traces ({"messages", "stream", "role", "day", "round"});
    `turns` shows a trace's chat messages."""
    return [
        StreamView(t["stream"], HimapTag(Role(t["role"]), t["day"], t["round"]), turns(t["messages"]))
        for t in traces
    ]


def streams_from_records(
    records: Sequence[EpisodeRecord], turns: Callable[[EpisodeRecord], list[Turn]]
) -> list[StreamView[Turn]]:
    """An engine run's records of one episode (as run, or read back from JSON); `turns` shows one.
    A folded stream's segments (rollout/context.py) show as one stream, their turns in order."""
    views: dict[str, StreamView[Turn]] = {}
    for r in records:
        if r.stream in views:
            views[r.stream].turns.extend(turns(r))
        else:
            views[r.stream] = StreamView(r.stream, HimapTag.of(r.tag), list(turns(r)))
    return list(views.values())


def text_turns_of_record(tokenizer: Any) -> Callable[[EpisodeRecord], list[tuple[str, str]]]:
    """A record's turns decoded from its ids: each assistant turn, then the tokens up to the next."""

    def turns(record: EpisodeRecord) -> list[tuple[str, str]]:
        out = []
        for k, (start, end) in enumerate(record.turns):
            until = record.turns[k + 1][0] if k + 1 < len(record.turns) else len(record.ids)
            out.append((tokenizer.decode(record.ids[start:end]), tokenizer.decode(record.ids[end:until])))
        return out

    return turns


def render_episode(
    streams: Sequence[StreamView[tuple[str, str]]], session: Any, show_chars: int = 300
) -> str:
    """Text of one episode: every stream's turns (clipped), Σ's events, each round's outcomes and
    the session's metrics."""

    def clip(text: str) -> str:
        text = text.strip()
        return (
            text
            if len(text) <= show_chars
            else text[:show_chars] + f" ...[{len(text) - show_chars} more chars]"
        )

    figures = session.figures()
    lines = [
        f"HiMAP episode: {figures.days} days, {figures.rounds} round(s), {len(streams)} streams, "
        f"{figures.accepted_days} day(s) accepted",
    ]
    for stream in streams:
        tag = stream.tag
        where = "" if tag.role == Role.COORDINATOR else f" (day {tag.day}, round {tag.round})"
        lines.append(f"=== {stream.name}: {tag.role}{where}, {len(stream.turns)} turns ===")
        for k, (text, reply) in enumerate(stream.turns, start=1):
            lines.append(f"  turn {k}: {clip(text)}")
            if reply.strip():
                lines.append(f"    <- {clip(reply)}")
    lines.append("--- Σ events (op day code cost spent_after) ---")
    events = session.sigma.events if session.sigma is not None else []
    checks = collections.Counter(e.code.value for e in events if e.op == "check")
    lines.append(f"  checks: {dict(sorted(checks.items()))}" if checks else "  no checks")
    for e in events:
        if e.op != "check":
            lines.append(
                f"  {e.seq:>4} {e.op:<7} day {e.day} {e.code.value:<15} {e.cost:>9.2f} {e.spent_after:>10.2f}"
            )
    lines.append("--- rounds ---")
    by_round: dict[int, list[Any]] = collections.defaultdict(list)
    for outcome in session.outcomes:
        by_round[outcome.round].append(outcome)
    for round_, outcomes in sorted(by_round.items()):
        shown = ", ".join(
            f"day {o.day} {o.status}" + (f" ({o.code})" if o.code else "")
            for o in sorted(outcomes, key=lambda o: o.day)
        )
        lines.append(f"  round {round_}: {shown}")
    lines.append(f"figures: {figures.to_dict()}")
    return "\n".join(lines)
