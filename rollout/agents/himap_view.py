"""A readable view of one HiMAP episode (the notebook's): the coordinator's turns, each day executor
per round, Σ's events and the rounds' outcomes. Streams come from the scripted expert's traces or
from an engine run's records; the session (its Σ and outcomes) is the episode's own.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence
from typing import Any

from sandbox.himap.kinds import Role


@dataclasses.dataclass
class StreamView:
    name: str
    role: str
    day: int | None
    round: int | None
    turns: list[tuple[str, str]]  # (assistant text, environment reply that followed; "" after the last)


def streams_from_traces(traces: Sequence[dict[str, Any]]) -> list[StreamView]:
    """The scripted expert's role-split traces (sandbox.himap.expert: {"messages", "role", ...})."""
    out = []
    for trace in traces:
        messages = trace["messages"]
        turns = []
        for i, message in enumerate(messages):
            if message["role"] == "assistant":
                reply = messages[i + 1]["content"] if i + 1 < len(messages) else ""
                turns.append((message["content"], reply))
        out.append(StreamView(trace["stream"], trace["role"], trace["day"], trace["round"], turns))
    return out


def streams_from_records(records: Sequence[Any], tokenizer: Any) -> list[StreamView]:
    """An engine run's records (rollout.record.EpisodeRecord) of one episode, decoded from their ids:
    each assistant turn, then the tokens up to the next turn (the environment's reply)."""
    out = []
    for record in records:
        turns = []
        for k, (start, end) in enumerate(record.turns):
            until = record.turns[k + 1][0] if k + 1 < len(record.turns) else len(record.ids)
            turns.append((tokenizer.decode(record.ids[start:end]), tokenizer.decode(record.ids[end:until])))
        out.append(StreamView(record.stream, record.role, record.day, record.round, turns))
    return out


def render_episode(streams: Sequence[StreamView], session: Any, show_chars: int = 300) -> str:
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
        where = "" if stream.role == Role.COORDINATOR else f" (day {stream.day}, round {stream.round})"
        lines.append(f"=== {stream.name}: {stream.role}{where}, {len(stream.turns)} turns ===")
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
