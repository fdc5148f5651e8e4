"""One report episode: the benchmark's plain-data view of a judged answer (request, day timelines,
checks linked to items) plus what the agent did (its turns, or a HiMAP team's lanes).

This is the JSON the page embeds, one object per episode; the page renders its body only when the
episode's section is opened.
"""

from __future__ import annotations

from typing import Any

from b2tjax.report.clip import LABEL_CHARS, clip_view
from sandbox.benchmarks import Benchmark, Verdict

ANSWER_CHARS = 4000  # an answer the view cannot draw as days is shown as text, this long at most


def undelivered_reason(answer: Any, detail: dict[str, Any], stop_reason: str = "") -> str:
    """Why a plan was not delivered, in the user's terms: an episode that gave no `<answer>` says
    so and why it stopped (the evaluator's message for a missing answer is about parsing text that
    was never written); otherwise the evaluator's own reason."""
    if answer is None:
        return f"no answer (stopped by {stop_reason})" if stop_reason else "no answer"
    return str(detail.get("reason") or detail.get("error") or "no plan")


def build_episode(
    bench: Benchmark,
    visible: dict[str, Any],
    answer: Any,
    verdict: Verdict,
    *,
    agent: str = "",
    turns: list[dict[str, Any]] | None = None,
    stop_reason: str = "",
    himap: dict[str, Any] | None = None,
    reward: float | None = None,
) -> dict[str, Any]:
    """The report data of one episode; `turns` from b2tjax.report.conversation, `himap` from
    b2tjax.report.himap.himap_view."""
    clipped: list[dict[str, Any]] = []
    view = clip_view(bench.episode_view(visible, answer, verdict), clipped)
    detail = verdict.to_dict()
    why = "" if verdict.delivered else undelivered_reason(answer, detail, stop_reason)
    why = clip_view({"why": why}, clipped)["why"]
    text = answer if isinstance(answer, str) or answer is None else repr(answer)
    return {
        "id": str(visible.get("id", ""))[:LABEL_CHARS],
        "agent": agent,
        "difficulty": str(visible.get("difficulty") or visible.get("level") or ""),
        "delivered": bool(verdict.delivered),
        "passed": bool(verdict.all_passed),
        "why": ""
        if verdict.delivered
        else clip_view({"why": undelivered_reason(answer, detail, stop_reason)}, clipped)["why"],
        "failed": [c["name"] for c in view["checks"] if not c["passed"]],
        **view,
        "answer": None if view["days"] or text is None else text[:ANSWER_CHARS],
        "turns": turns,
        "stop_reason": stop_reason,
        "tokens": sum(t["tokens"] or 0 for t in turns) if turns else None,
        "himap": _clip_team(himap, clipped),
        "clipped": clipped,  # full texts of the view's long strings, shown on a click
        "reward": reward,  # the episode's reward where the caller scored it (training, eval.py --records)
    }


def _clip_team(himap: dict[str, Any] | None, clipped: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A HiMAP view with its task tuple and sub-goals clipped (its turns are clipped already)."""
    if himap is None:
        return None
    return {**himap, **clip_view({"task": himap.get("task", {}), "goals": himap.get("goals", [])}, clipped)}
