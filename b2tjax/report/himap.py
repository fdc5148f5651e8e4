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

from b2tjax.report.conversation import from_messages, from_record

Stream = tuple[str, str, int | None, int | None, list[dict[str, Any]]]


def streams_from_traces(traces: Sequence[dict[str, Any]]) -> list[Stream]:
    """The scripted expert's role-split traces ({"messages", "stream", "role", "day", "round"})."""
    return [(t["stream"], t["role"], t["day"], t["round"], from_messages(t["messages"])) for t in traces]


def streams_from_records(records: Sequence[Any], tokenizer: Any, shading: bool = False) -> list[Stream]:
    """An engine run's records of one episode, decoded from their ids."""
    return [(r.stream, r.role, r.day, r.round, from_record(r, tokenizer, shading=shading)) for r in records]


def himap_view(session: Any, streams: Sequence[Stream]) -> dict[str, Any]:
    """Report data of one finished HiMAP session (sandbox.himap.protocol.HimapSession); with
    `session` None (records read back from a file) only the streams and their rounds."""
    outcomes = {o.stream: o for o in session.outcomes} if session is not None else {}
    events = session.sigma.events if session is not None and session.sigma is not None else []
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
        if role == "coordinator" or day is None:
            coordinator += turns
            continue
        o = outcomes.get(name)
        outcome = {"status": o.status, "code": o.code, "reason": o.reason, "cost": o.cost} if o else None
        lanes[day].append({"name": name, "round": round_, "turns": turns, "outcome": outcome})
    return {
        **_session_part(session, streams),
        "lanes": [
            {"day": day, "streams": lanes.get(day, []), "events": by_day.get(day, [])}
            for day in sorted(set(lanes) | set(by_day))
        ],
        "last_seq": max((e.seq for e in events), default=0),
        "coordinator": coordinator,
    }


def _session_part(session: Any, streams: Sequence[Stream]) -> dict[str, Any]:
    """Task tuple, sub-goals, rounds and figures: the session's, or what the streams tell."""
    if session is None:
        rounds = sorted({r for _, role, _, r, _ in streams if role != "coordinator" and r is not None})
        days = {d for _, role, d, _, _ in streams if role != "coordinator" and d is not None}
        figures = {"rounds": len(rounds), "accepted_days": None, "days": len(days)}
        return {"task": {}, "goals": [], "rounds": [], "figures": figures}
    rounds: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
    for o in session.outcomes:
        rounds[o.round].append({"day": o.day, "status": o.status, "code": o.code})
    metrics = session.metrics()
    keep = ("rounds", "accepted_days", "days", "rejections", "sigma_rejections", "spent")
    return {
        # the task tuple's short fields (long lists, such as a behaviour log, stay in the request)
        "task": {k: v for k, v in session.domain.task().items() if len(str(v)) < 300},
        "goals": [session.goals[d].to_dict() for d in sorted(session.goals)],
        "rounds": [
            {"round": r, "outcomes": sorted(rows, key=lambda x: x["day"])}
            for r, rows in sorted(rounds.items())
        ],
        "figures": {k: metrics[k] for k in keep},
    }
