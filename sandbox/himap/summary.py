"""What outlives a HiMAP session: its figures, outcomes, Σ events, task tuple and sub-goals as plain
picklable data.

A team driven by another process reaches the trainer as this summary (the live session, with its
environments and tools, stays where it ran), and the HTML report reads only this, so a report looks
the same whichever process ran the team.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from sandbox.himap.figures import SessionFigures
from sandbox.himap.protocol import DayOutcome, HimapSession
from sandbox.himap.state import SigmaEvent

# a task field longer than this (a behaviour log, say) stays in the request, out of the summary
_SHORT_FIELD = 300


@dataclasses.dataclass(frozen=True)
class SessionSummary:
    figures: SessionFigures  # HimapSession.figures() when the episode ended
    outcomes: list[DayOutcome]  # every executor's end, in order
    events: list[SigmaEvent]  # Σ's calls in sequence order (empty without Σ)
    task: dict[str, Any]  # the task tuple's short fields
    goals: list[dict[str, Any]]  # the latest sub-goal of every day, by day


def session_summary(session: HimapSession | SessionSummary) -> SessionSummary:
    """The summary of a finished session (a summary is returned as it is)."""
    if isinstance(session, SessionSummary):
        return session
    return SessionSummary(
        figures=session.figures(),
        outcomes=list(session.outcomes),
        events=session.sigma.events if session.sigma is not None else [],
        task={k: v for k, v in session.domain.task().items() if len(str(v)) < _SHORT_FIELD},
        goals=[session.goals[d].to_dict() for d in sorted(session.goals)],
    )


def figures_of(session: HimapSession | SessionSummary) -> SessionFigures:
    """The figures of a live session (now) or of a summary (when its session ended)."""
    return session.figures if isinstance(session, SessionSummary) else session.figures()
