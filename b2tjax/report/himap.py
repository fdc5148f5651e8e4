"""A HiMAP team episode as report data: the coordinator's task tuple and latest sub-goals, one lane
per day executor (its streams by round with their outcomes, and the Σ events of that day on the
axis of Σ's sequence numbers, which all lanes share), the rounds and the session's figures.

Streams are (name, role, day, round, turns) with turns from b2tjax.report.conversation, so the
scripted expert's traces and an engine run's records give the same view.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

from b2tjax.report.clip import LABEL_CHARS, clip
from b2tjax.report.conversation import from_messages, from_record
from sandbox.himap.kinds import Role
from sandbox.himap.protocol import HimapSession
from sandbox.himap.summary import SessionSummary, session_summary

Stream = tuple[str, str, int | None, int | None, list[dict[str, Any]]]


def streams_from_traces(traces: Sequence[dict[str, Any]]) -> list[Stream]:
    """The scripted expert's role-split traces ({"messages", "stream", "role", "day", "round"})."""
    return [(t["stream"], t["role"], t["day"], t["round"], from_messages(t["messages"])) for t in traces]


def streams_from_records(records: Sequence[Any], tokenizer: Any, shading: bool = False) -> list[Stream]:
    """An engine run's records of one episode, decoded from their ids."""
    return [(r.stream, r.role, r.day, r.round, from_record(r, tokenizer, shading=shading)) for r in records]


def himap_view(session: HimapSession | SessionSummary | None, streams: Sequence[Stream]) -> dict[str, Any]:
    """Report data of one finished HiMAP session, live or as the summary another process sent; with
    `session` None (records read back from a file) only the streams and their rounds."""
    summary = session_summary(session) if session is not None else None
    outcomes = {o.stream: o for o in summary.outcomes} if summary is not None else {}
    events = summary.events if summary is not None else []
    by_day: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
    for e in events:
        by_day[e.day].append(
            {
                "seq": e.seq,
                "op": e.op,
                "code": e.code.value,
                "cost": round(e.cost, 2),
                "spent": round(e.spent_after, 2),
            }
        )
    lanes: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
    coordinator: list[dict[str, Any]] = []
    for name, role, day, round_, turns in streams:
        if role == Role.COORDINATOR or day is None:
            coordinator += turns
            continue
        o = outcomes.get(name)
        reason = clip(o.reason, LABEL_CHARS) if o else None  # an executor's reject reason is its own text
        outcome = {"status": o.status, "code": o.code, "reason": reason, "cost": o.cost} if o else None
        lanes[day].append({"name": name, "round": round_, "turns": turns, "outcome": outcome})
    return {
        **_session_part(summary, streams),
        "lanes": [
            {"day": day, "streams": lanes.get(day, []), "events": by_day.get(day, [])}
            for day in sorted(set(lanes) | set(by_day))
        ],
        "last_seq": max((e.seq for e in events), default=0),
        "coordinator": coordinator,
    }


def _session_part(summary: SessionSummary | None, streams: Sequence[Stream]) -> dict[str, Any]:
    """Task tuple, sub-goals, rounds and figures: the session's, or what the streams tell."""
    if summary is None:
        rounds = sorted({r for _, role, _, r, _ in streams if role != Role.COORDINATOR and r is not None})
        days = {d for _, role, d, _, _ in streams if role != Role.COORDINATOR and d is not None}
        figures = {"rounds": len(rounds), "accepted_days": None, "days": len(days)}
        return {"task": {}, "goals": [], "rounds": [], "figures": figures}
    rounds: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
    for o in summary.outcomes:
        rounds[o.round].append({"day": o.day, "status": o.status, "code": o.code})
    figures = summary.figures.to_dict()
    keep = ("rounds", "accepted_days", "days", "rejections", "sigma_rejections", "spent")
    return {
        "task": summary.task,
        "goals": summary.goals,
        "rounds": [
            {"round": r, "outcomes": sorted(rows, key=lambda x: x["day"])}
            for r, rows in sorted(rounds.items())
        ],
        "figures": {k: figures[k] for k in keep},
    }
