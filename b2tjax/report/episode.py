"""One report episode: the benchmark's plain-data view of a judged answer (request, day timelines,
checks linked to items) plus what the agent did (its turns, or a HiMAP team's lanes).

This is the JSON the page embeds, one object per episode; the page renders its body only when the
episode's section is opened.
"""

from __future__ import annotations

from typing import Any

from sandbox.benchmarks import Benchmark, Verdict

ANSWER_CHARS = 4000  # an answer the view cannot draw as days is shown as text, this long at most


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
) -> dict[str, Any]:
    """The report data of one episode; `turns` from b2tjax.report.conversation, `himap` from
    b2tjax.report.himap.himap_view."""
    view = bench.episode_view(visible, answer, verdict)
    detail = verdict.to_dict()
    text = answer if isinstance(answer, str) or answer is None else repr(answer)
    return {
        "id": str(visible.get("id", "")),
        "agent": agent,
        "difficulty": str(visible.get("difficulty") or visible.get("level") or ""),
        "delivered": bool(verdict.delivered),
        "passed": bool(verdict.all_passed),
        "why": "" if verdict.delivered else str(detail.get("reason") or detail.get("error") or "no plan"),
        "failed": [c["name"] for c in view["checks"] if not c["passed"]],
        **view,
        "answer": None if view["days"] or text is None else text[:ANSWER_CHARS],
        "turns": turns,
        "stop_reason": stop_reason,
        "tokens": sum(t["tokens"] or 0 for t in turns) if turns else None,
        "himap": himap,
    }
