"""The report's view of one TravelPlanner episode (sandbox.benchmarks.view): the query, the plan as
one timeline per day (the plan has no clock times, so items are slots in the day's order) with the
attractions' coordinates from the database, and each failing check linked to the items it judges.

The official checks return only pass/fail, so the link is by what a check reads: restaurants,
attractions, the accommodation, the transportation, the day's city. Where the view can say more
cheaply it does: a failing restaurant check marks only repeated restaurants, the sandbox check only
items the database lacks.
"""

from __future__ import annotations

import collections
from typing import Any

from sandbox.benchmarks.travelplanner.database import ACCOMMODATIONS, ATTRACTIONS, RESTAURANTS
from sandbox.benchmarks.travelplanner.plan_reader import read_plan
from sandbox.benchmarks.travelplanner.text import (
    attraction_items,
    from_to,
    is_filled,
    name_and_city,
    transport_mode,
)
from sandbox.benchmarks.view import check, item, items_of_kind, request

# The item kinds each check reads (the day keys when empty: a check about whole days).
READS = {
    "is_valid_information_in_current_city": ("city",),
    "is_valid_information_in_sandbox": ("meal", "attraction", "hotel", "intercity"),
    "is_reasonable_visiting_city": ("city",),
    "is_valid_restaurants": ("meal",),
    "is_valid_transportation": ("intercity",),
    "is_valid_attractions": ("attraction",),
    "is_valid_accommodation": ("hotel",),
    "is_not_absent": (),
    "valid_cost": (),
    "valid_room_rule": ("hotel",),
    "valid_cuisine": ("meal",),
    "valid_room_type": ("hotel",),
    "valid_transportation": ("intercity",),
}


def travelplanner_view(
    visible: dict[str, Any], answer: Any, checks: list[tuple[str, bool, str]], db: Any
) -> dict[str, Any]:
    """The EpisodeView of one judged answer; `checks` are the benchmark's (name, passed, group)."""
    plan = answer if answer is None or isinstance(answer, list) else read_plan(str(answer))
    days = [_day(k, entry, db) for k, entry in enumerate(plan or []) if isinstance(entry, dict) and entry]
    rows = []
    for name, passed, group in checks:
        linked = [] if passed else _linked(name, days)
        rows.append(check(name, group.split(";")[0], passed, "" if passed else group, linked))
    facts = [("level", visible.get("level") or visible.get("difficulty") or "?")]
    return {
        "request": request(str(visible.get("id", "")), str(visible.get("query", "")), facts),
        "days": days,
        "checks": rows,
    }


def _linked(name: str, days: list[dict[str, Any]]) -> list[str]:
    if name == "is_valid_restaurants":
        seen = collections.Counter(
            it["label"].split(": ", 1)[-1] for d in days for it in d["items"] if it["kind"] == "meal"
        )
        repeated = [
            it["key"]
            for d in days
            for it in d["items"]
            if it["kind"] == "meal" and seen[it["label"].split(": ", 1)[-1]] > 1
        ]
        if repeated:
            return repeated
    if name == "is_valid_information_in_sandbox":
        missing = [it["key"] for d in days for it in d["items"] if it.get("missing")]
        if missing:
            return missing
    kinds = READS.get(name, ())
    return items_of_kind(days, kinds) if kinds else [d["key"] for d in days]


def _day(position: int, entry: dict[str, Any], db: Any) -> dict[str, Any]:
    number = entry.get("days") if isinstance(entry.get("days"), int) else position + 1
    city = str(entry.get("current_city", "-"))
    items = []

    def add(kind: str, label: str, table: str | None = None, text: str = "") -> None:
        key = f"d{number}.{len(items)}"
        row = _lookup(db, table, text) if table else None
        lat, lon = (row.get("Latitude"), row.get("Longitude")) if row else (None, None)
        detail = text if not table else "" if row else "not in the database"
        new = item(key, kind, label, lat=lat, lon=lon, detail=detail)
        new["missing"] = bool(table) and row is None
        items.append(new)

    add("city", city)
    transport = entry.get("transportation")
    if is_filled(transport):
        start, end = from_to(str(transport))
        leg = f"{transport_mode(str(transport)) or 'transport'} {start} → {end}" if start else str(transport)
        add("intercity", leg, text=str(transport))  # the whole text (times, cost) is the detail
    for meal in ("breakfast", "lunch", "dinner"):
        if is_filled(entry.get(meal)):
            add("meal", f"{meal}: {name_and_city(entry[meal])[0]}", RESTAURANTS, str(entry[meal]))
    if is_filled(entry.get("attraction")):
        for part in attraction_items(str(entry["attraction"]), strict=True):
            add("attraction", name_and_city(part)[0], ATTRACTIONS, part)
    if is_filled(entry.get("accommodation")):
        add("hotel", name_and_city(entry["accommodation"])[0], ACCOMMODATIONS, str(entry["accommodation"]))
    origin, destination = from_to(city)
    title = f"Day {number} · " + (f"{origin} → {destination}" if origin else city)
    return {"day": number, "title": title, "key": f"d{number}", "items": items}


def _lookup(db: Any, table: str, text: str) -> dict[str, Any] | None:
    """The first database row the official lookup of "Name, City" finds, or None."""
    name, city = name_and_city(text)
    if name == "-":
        return None
    rows = db.find_places(table, name, city)
    return rows[0] if rows else None
