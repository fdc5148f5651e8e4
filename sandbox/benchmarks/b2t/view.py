"""The report's view of one Behaviour2Trip episode (sandbox.benchmarks.view): the behaviour log
summarised, the plan as timed day timelines with the world's coordinates, and each failing
constraint linked to the activities its reason names.

The evaluator's reasons name an activity as "day N <Activity.label>" (sandbox/evaluator), so a
failing check is linked to exactly the activities it names; a reason naming only a day is linked
to that day.
"""

from __future__ import annotations

import collections
from typing import Any

from sandbox.benchmarks.b2t.evaluator.context import POI_KIND
from sandbox.benchmarks.b2t.evaluator.lookup import index_for
from sandbox.benchmarks.b2t.plan import Activity, read_plan
from sandbox.benchmarks.view import check, days_mentioned, item, request


def b2t_view(visible: dict[str, Any], answer: Any, verdict: Any, store: Any) -> dict[str, Any]:
    """The EpisodeView of one judged B2T answer; `store` is the world (or its path)."""
    plan = read_plan(answer).plan if answer is not None else None
    days = [] if plan is None else _days(plan, index_for(store))
    labels = {
        f"day {day.number} {act.label}": f"d{day.number}.{act.index}"
        for day in (plan.days if plan else [])
        for act in day.activities
    }
    checks = []
    for result in verdict.results:
        named = [key for label, key in labels.items() if label in result.reason]
        linked = [] if result.passed else named or days_mentioned(result.reason, days)
        checks.append(
            check(result.name, f"{result.group} · {result.category}", result.passed, result.reason, linked)
        )
    return {"request": _request(visible), "days": days, "checks": checks}


def _request(visible: dict[str, Any]) -> dict[str, Any]:
    """The instruction and the behaviour log as counts of actions by POI kind."""
    trajectory = visible.get("trajectory", [])
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for event in trajectory:
        counts[str(event.get("action", "?"))][str(event.get("poi_type", "?"))] += 1
    facts = [("difficulty", visible.get("difficulty", "?"))]
    facts.append(
        ("behaviour log", f"{len(trajectory)} events, {len({e.get('session') for e in trajectory})} sessions")
    )
    for action, kinds in sorted(counts.items()):
        facts.append((action, ", ".join(f"{kind} {n}" for kind, n in kinds.most_common())))
    return request(str(visible.get("id", "")), str(visible.get("instruction", "")), facts)


def _days(plan: Any, index: Any) -> list[dict[str, Any]]:
    out = []
    for day in plan.days:
        title = " · ".join(str(x) for x in (f"Day {day.number}", day.date, day.city) if x)
        items = [_item(day.number, day.city, act, index) for act in day.activities]
        out.append({"day": day.number, "title": title, "key": f"d{day.number}", "items": items})
    return out


def _item(day: int, city: str | None, act: Activity, index: Any) -> dict[str, Any]:
    key = f"d{day}.{act.index}"
    price = f"{act.price:,.0f} CNY" if act.price is not None else ""
    if act.type == "intercity_transport":
        label = f"{act.mode or 'transport'} {act.number or ''} {act.from_city or '?'} → {act.to_city or '?'}"
        detail = " · ".join(x for x in (act.seat_class, price) if x)
        return item(key, "intercity", label, start=act.start, end=act.end, detail=detail)
    poi = (
        index.poi(POI_KIND[act.type], city, act.name) if act.type in POI_KIND and city and act.name else None
    )
    leg = None
    if act.transport is not None and act.transport.duration_min is not None:
        leg = {"mode": act.transport.mode or "?", "minutes": act.transport.duration_min}
    kind = act.type if act.type in POI_KIND else "note"
    unknown = "not in the world" if kind != "note" else ""
    label = f"{act.meal}: {act.name}" if act.meal else (act.name or act.type)
    return item(
        key,
        kind,
        label,
        start=act.start,
        end=act.end,
        detail=" · ".join(x for x in (price, poi.category if poi else unknown) if x),
        lat=poi.latitude if poi else None,
        lon=poi.longitude if poi else None,
        leg=leg,
    )
