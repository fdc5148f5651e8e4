"""A HiMAP team episode as report data: the coordinator's task tuple and latest sub-goals, one lane
per day executor (its streams by round with their outcomes, and the Σ events of that day on the
axis of Σ's sequence numbers, which all lanes share), the rounds and the session's figures.

Streams are HiMAP's one view model (rollout/agents/himap_view.py `StreamView`: name, typed tag,
turns) with turns parsed by b2tjax.report.conversation, so the scripted expert's traces and an
engine run's records give the same view.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

from b2tjax.report.clip import LABEL_CHARS, clip
from b2tjax.report.conversation import from_messages, from_record
from rollout.agents import himap_view as view
from rollout.record import EpisodeRecord
from sandbox.himap.kinds import Role
from sandbox.himap.protocol import HimapSession
from sandbox.himap.summary import SessionSummary, session_summary

Stream = view.StreamView[dict[str, Any]]


def streams_from_traces(traces: Sequence[dict[str, Any]]) -> list[Stream]:
    """The scripted expert's role-split traces, turns parsed for the report."""
    return view.streams_from_traces(traces, from_messages)


def streams_from_records(
    records: Sequence[EpisodeRecord], tokenizer: Any, shading: bool = False
) -> list[Stream]:
    """An engine run's records of one episode, turns decoded from their ids and parsed."""
    return view.streams_from_records(records, lambda r: from_record(r, tokenizer, shading=shading))


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
    for stream in streams:
        if not stream.executor:
            coordinator += stream.turns
            continue
        o = outcomes.get(stream.name)
        reason = clip(o.reason, LABEL_CHARS) if o else None  # an executor's reject reason is its own text
        outcome = {"status": o.status, "code": o.code, "reason": reason, "cost": o.cost} if o else None
        turns, tag = stream.turns, stream.tag
        lanes[tag.day].append({"name": stream.name, "round": tag.round, "turns": turns, "outcome": outcome})
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
        members = [s.tag for s in streams if s.tag.role != Role.COORDINATOR]
        rounds = sorted({t.round for t in members if t.round is not None})
        days = {t.day for t in members if t.day is not None}
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
