"""Reference information (the official `*_ref_info.jsonl` shape) for a query, and its text form.

The official sole-planning setting gives the agent, for the cities of the trip in route order,
their attractions, restaurants and accommodations, and for each leg the flights of its date and
the self-driving and taxi lines. `reference_info` builds that dict from the database (the same
rows, in the same order, as the official blocks); `render_reference_info` is the prompt text,
tables in the two-stage tools' format so that both modes read alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sandbox.benchmarks.travelplanner.database import Database
from sandbox.benchmarks.travelplanner.tools import FLIGHT_COLUMNS, PLACE_COLUMNS, drive_text, table

_PLACE_KEYS = (
    ("Attractions", "attractions"),
    ("Restaurants", "restaurants"),
    ("Accommodations", "accommodations"),
)


def route_legs(query: dict[str, Any], cities: Sequence[str]) -> list[tuple[str, str, str]]:
    """(origin, destination, date) of each leg: org -> c1 on day 1, c_i -> c_{i+1} every second
    day, the last city -> org on the last day."""
    stops = [query["org"], *cities, query["org"]]
    dates = query["date"]
    return [(stops[k], stops[k + 1], dates[min(2 * k, len(dates) - 1)]) for k in range(len(stops) - 1)]


def reference_info(db: Database, query: dict[str, Any], cities: Sequence[str]) -> dict[str, Any]:
    """The official reference-information dict of a trip over `cities` (route order)."""
    info: dict[str, Any] = {}
    for city in cities:
        for label, kind in _PLACE_KEYS:
            info[f"{label} in {city}"] = list(db.rows(kind, city))
    for origin, dest, date in route_legs(query, cities):
        flights = db.flights(origin, dest, date)
        info[f"Flight from {origin} to {dest} on {date}"] = (
            list(flights) if flights else f"There is no flight from {origin} to {dest} on {date}."
        )
        for label, mode in (("Self-driving", "self-driving"), ("Taxi", "taxi")):
            info[f"{label} from {origin} to {dest}"] = (
                drive_text(db, origin, dest, mode) or "No valid information."
            )
    return info


def render_reference_info(info: dict[str, Any]) -> str:
    """The reference information as prompt text: one titled block per key, tables for rows."""
    blocks = []
    for key, value in info.items():
        if isinstance(value, list):
            kind = next((k for label, k in _PLACE_KEYS if key.startswith(label + " in ")), None)
            columns = PLACE_COLUMNS[kind] if kind else FLIGHT_COLUMNS
            blocks.append(table(f"{key}:", columns, value) if value else f"{key}: none")
        else:
            blocks.append(f"{key}: {value}")
    return "\n\n".join(blocks)
