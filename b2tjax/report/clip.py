"""Bounded text in the report: whatever a model, a tool or an input file wrote is shown clipped,
with the full text (up to a cap) one click away, so one 900k-character place name cannot make a
75 MB page that takes half a minute to open.

Two shapes. Conversation text (thoughts, tool arguments, responses) is a clip object
{"text": the part shown, "cut": characters after it, "full": the text kept for the click (None when
nothing was cut), "lost": characters beyond even that}. The benchmark's view (labels, check reasons,
request fields, HiMAP task fields) is plain strings the page draws in many places, so a long one is
shortened in place with a marker naming its entry in the episode's "clipped" list, which the page
shows as a panel of full texts.
"""

from __future__ import annotations

from typing import Any

KEPT_CHARS = 6000  # of a clipped text, kept in the page for the click (a tool reply's default cap)
VIEW_CHARS = {"request": 4000}  # top-level view keys with room for longer text
LABEL_CHARS = 300  # any other string of the view: labels, names, check reasons, task fields
VIEW_KEPT_CHARS = 2000  # of a clipped view string, kept for the click (a name repeats in many places)


def clip(text: str, max_chars: int, kept: int = KEPT_CHARS) -> dict[str, Any]:
    """`text` as a clip object: its first `max_chars` characters shown, up to `kept` one click away."""
    cut = max(0, len(text) - max_chars)
    return {
        "text": text[:max_chars],
        "cut": cut,
        "full": text[:kept] if cut else None,
        "lost": max(0, len(text) - kept) if cut else 0,
    }


def clip_view(view: dict[str, Any], clipped: list[dict[str, Any]]) -> dict[str, Any]:
    """A copy of a benchmark view (or any plain JSON data) with every long string shortened in
    place; each one's full text (up to VIEW_KEPT_CHARS) is appended to `clipped` with where it was."""
    return {key: _walk(value, key, VIEW_CHARS.get(key, LABEL_CHARS), clipped) for key, value in view.items()}


def _walk(value: Any, where: str, limit: int, clipped: list[dict[str, Any]]) -> Any:
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        clipped.append({"where": where, **clip(value, limit, VIEW_KEPT_CHARS)})
        return f"{value[:limit]} … [{len(value) - limit} more characters: clipped text {len(clipped)}]"
    if isinstance(value, dict):
        return {k: _walk(v, f"{where}.{k}", limit, clipped) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_walk(v, f"{where}[{i}]", limit, clipped) for i, v in enumerate(value)]
    return value
