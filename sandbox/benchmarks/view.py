"""Plain-data views of one judged episode, which the HTML report (b2tjax/report) draws.

A benchmark's `episode_view` returns an `EpisodeView` dict built from these helpers:

    {"request": {"title": str, "text": str, "facts": [[label, value], ...]},
     "days": [{"day": int, "title": str, "key": "d1", "items": [item, ...]}],
     "checks": [{"name", "group", "passed", "reason", "items": [item or day keys]}]}

An item is one thing on the day's timeline: {"key", "kind", "label", "start", "end" (minutes after
midnight, or None when the plan has no times), "detail", "lat", "lon", "leg"} where `kind` is one of
intercity | meal | attraction | entertainment | hotel | transport | city | note and `leg` is the
local transport that led to it ({"mode", "minutes"} or None). Pure Python, JSON-ready.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

KINDS = ("intercity", "meal", "attraction", "entertainment", "hotel", "transport", "city", "note")
_DAY_MENTION = re.compile(r"\bday (\d+)\b", re.IGNORECASE)


def item(
    key: str,
    kind: str,
    label: str,
    *,
    start: int | None = None,
    end: int | None = None,
    detail: str = "",
    lat: float | None = None,
    lon: float | None = None,
    leg: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One timeline item; `kind` must be one of KINDS (the page colours by it)."""
    if kind not in KINDS:
        raise ValueError(f"unknown timeline item kind {kind!r}")
    return {
        "key": key,
        "kind": kind,
        "label": label,
        "start": start,
        "end": end,
        "detail": detail,
        "lat": lat,
        "lon": lon,
        "leg": leg,
    }


def check(name: str, group: str, passed: bool, reason: str, items: Iterable[str] = ()) -> dict[str, Any]:
    """One verdict row; `items` are the keys of the timeline items (or days) it concerns."""
    return {"name": name, "group": group, "passed": bool(passed), "reason": reason, "items": list(items)}


def request(title: str, text: str, facts: Iterable[tuple[str, Any]] = ()) -> dict[str, Any]:
    """What the user asked: a title line, the request text and (label, value) facts."""
    return {"title": title, "text": text, "facts": [[label, str(value)] for label, value in facts]}


def days_mentioned(reason: str, days: list[dict[str, Any]]) -> list[str]:
    """The keys of the days a reason names ("day 3: ..."), for checks no item name pins down."""
    known = {d["day"]: d["key"] for d in days}
    return list(dict.fromkeys(known[n] for n in map(int, _DAY_MENTION.findall(reason)) if n in known))


def items_of_kind(days: list[dict[str, Any]], kinds: Iterable[str]) -> list[str]:
    """Keys of every item of these kinds (a check about, say, all hotels)."""
    wanted = set(kinds)
    return [it["key"] for d in days for it in d["items"] if it["kind"] in wanted]


def default_view(
    visible: dict[str, Any], checks: list[tuple[str, bool, str]], group: str = ""
) -> dict[str, Any]:
    """The view of a benchmark that draws no timeline: its request text and its checks."""
    text = visible.get("instruction") or visible.get("query") or ""
    return {
        "request": request(str(visible.get("id", "")), str(text)),
        "days": [],
        "checks": [check(name, group, passed, reason) for name, passed, reason in checks],
    }
