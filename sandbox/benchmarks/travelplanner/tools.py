"""The TravelPlanner tools of the two-stage mode, over a `Database`, behind B2T's tool contract.

The official two-stage agent has FlightSearch, DistanceMatrix (self-driving / taxi),
AccommodationSearch, RestaurantSearch, AttractionSearch, CitySearch and NotebookWrite; here the
notebook is the agent's `<memory>` (sandbox.memory), so NotebookWrite is not a tool.
`TravelPlannerWorld.call_tool(name, arguments) -> ToolResult` never raises: a bad call is an
error result that tells the agent what to fix, exactly as `sandbox.benchmarks.b2t.tools.registry`
does for B2T.

Replies are tables: a header line, a column line, then one row per record with the columns
separated by tabs (compact enough that the largest city, 65 restaurants, fits one reply; names
hold "|" and "," but never a tab). Names are the database's names verbatim, because the evaluator
looks a plan's names up by substring.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from sandbox.benchmarks.travelplanner.database import Database
from sandbox.tools.args import Param, ToolArgError
from sandbox.tools.dispatch import Tool, dispatch
from sandbox.types import ToolResult

COLUMN_SEP = "\t"
DRIVE_MODES = ("self-driving", "taxi")
# Per kind: (reply column, database column); names first, the city is in the header.
PLACE_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "accommodations": (
        ("name", "NAME"),
        ("price", "price"),
        ("room type", "room type"),
        ("house rules", "house_rules"),
        ("minimum nights", "minimum nights"),
        ("maximum occupancy", "maximum occupancy"),
        ("rating", "review rate number"),
    ),
    "restaurants": (
        ("name", "Name"),
        ("average cost", "Average Cost"),
        ("cuisines", "Cuisines"),
        ("rating", "Aggregate Rating"),
    ),
    "attractions": (("name", "Name"), ("address", "Address")),
}
FLIGHT_COLUMNS = (
    ("flight number", "Flight Number"),
    ("price", "Price"),
    ("departure", "DepTime"),
    ("arrival", "ArrTime"),
    ("duration", "ActualElapsedTime"),
    ("date", "FlightDate"),
    ("distance (miles)", "Distance"),
)


def cell(value: Any) -> str:
    """A table cell: whole floats without ".0" (prices 120.0 -> 120); the few names with a tab or
    newline show it escaped ("\\n"), so a cell never changes a name silently."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value).replace("\t", "\\t").replace("\n", "\\n")


def table(header: str, columns: tuple[tuple[str, str], ...], rows: list[dict[str, Any]]) -> str:
    lines = [header, COLUMN_SEP.join(c for c, _ in columns)]
    lines += [COLUMN_SEP.join(cell(row[src]) for _, src in columns) for row in rows]
    return "\n".join(lines)


def _city(db: Database, args: dict[str, Any], key: str) -> str:
    """The city argument as the city list spells it (letter case and spaces forgiven)."""
    raw = args[key].strip()
    if raw in db.city_states:
        return raw
    folded = {c.casefold(): c for c in db.city_states}
    if raw.casefold() in folded:
        return folded[raw.casefold()]
    raise ToolArgError(f"{key} {raw!r} is not a city of the database; CitySearch lists the cities of a state")


def _date(args: dict[str, Any]) -> str:
    value = args["date"].strip()
    try:
        return dt.date.fromisoformat(value).isoformat()
    except ValueError:
        raise ToolArgError(f'date must be a calendar date "YYYY-MM-DD", got {value!r}') from None


def flight_search(db: Database, args: dict[str, Any]) -> str:
    origin, destination, date = _city(db, args, "origin"), _city(db, args, "destination"), _date(args)
    rows = db.flights(origin, destination, date)
    if not rows:
        return f"There is no flight from {origin} to {destination} on {date}."
    return table(
        f"Flights from {origin} to {destination} on {date} (price per person, USD):", FLIGHT_COLUMNS, rows
    )


def drive_text(db: Database, origin: str, destination: str, mode: str) -> str | None:
    """The official DistanceMatrix line ("self-driving, from A to B, duration: ..., distance: ...,
    cost: N"), or None when the table has no drivable route."""
    route = db.route(origin, destination)
    if route is None or not route.drivable:
        return None
    return (
        f"{mode}, from {origin} to {destination}, duration: {route.duration}, "
        f"distance: {route.distance}, cost: {route.cost(mode)}"
    )


def distance_matrix(db: Database, args: dict[str, Any]) -> str:
    origin, destination = _city(db, args, "origin"), _city(db, args, "destination")
    mode = args["mode"].strip().lower()
    if mode not in DRIVE_MODES:
        raise ToolArgError(f"mode must be one of {list(DRIVE_MODES)}, got {args['mode']!r}")
    text = drive_text(db, origin, destination, mode)
    if text is None:
        return f"{mode}, from {origin} to {destination}: no valid route (cost per vehicle when there is one)."
    return text + " (cost per vehicle, USD)"


def _place_search(kind: str, label: str, unit: str) -> Callable[[Database, dict[str, Any]], str]:
    def search(db: Database, args: dict[str, Any]) -> str:
        city = _city(db, args, "city")
        rows = db.rows(kind, city)
        if not rows:
            return f"There are no {label} in {city}."
        return table(f"{label.capitalize()} in {city} ({len(rows)}{unit}):", PLACE_COLUMNS[kind], rows)

    return search


def city_search(db: Database, args: dict[str, Any]) -> str:
    raw = args["state"].strip()
    states = {s.casefold(): s for s in db.states}
    state = states.get(raw.casefold())
    if state is None:
        raise ToolArgError(f'state {raw!r} is not in the database; give a US state name such as "Texas"')
    return f"Cities in {state}: " + ", ".join(db.cities_in_state(state))


_CITY = Param("city", "string", "city name as the city list spells it", required=True)
_ROUTE = (
    Param("origin", "string", "departure city", required=True),
    Param("destination", "string", "arrival city", required=True),
)
TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool(
            "FlightSearch",
            "Flights between two cities on a date, with price per person and times.",
            (*_ROUTE, Param("date", "string", 'date "YYYY-MM-DD"', required=True)),
            flight_search,
        ),
        Tool(
            "DistanceMatrix",
            "Driving duration, distance and cost per vehicle between two cities, "
            "by self-driving (one car per 5 people) or taxi (one per 4 people).",
            (
                *_ROUTE,
                Param(
                    "mode",
                    "string",
                    '"self-driving" or "taxi"',
                    required=True,
                    schema_extra={"enum": list(DRIVE_MODES)},
                ),
            ),
            distance_matrix,
        ),
        Tool(
            "AccommodationSearch",
            "Accommodations of a city: price per night, room type, house rules, "
            "minimum nights, maximum occupancy.",
            (_CITY,),
            _place_search("accommodations", "accommodations", " listings"),
        ),
        Tool(
            "RestaurantSearch",
            "Restaurants of a city: average cost per person, cuisines, rating.",
            (_CITY,),
            _place_search("restaurants", "restaurants", " restaurants"),
        ),
        Tool(
            "AttractionSearch",
            "Attractions of a city with their addresses.",
            (_CITY,),
            _place_search("attractions", "attractions", " attractions"),
        ),
        Tool(
            "CitySearch",
            "The cities of a US state that the database covers.",
            (Param("state", "string", "US state name", required=True),),
            city_search,
        ),
    )
}


class TravelPlannerWorld:
    """The two-stage tools over one database (shared by every instance: tools take no query)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in TOOLS.values()]

    def call_tool(self, name: Any, arguments: Any) -> ToolResult:
        return dispatch(TOOLS, self.db, name, arguments)


class NoToolWorld:
    """The sole-planning world: everything is in the prompt, so every tool call is an error."""

    def tool_schemas(self) -> list[dict[str, Any]]:
        return []

    def call_tool(self, name: Any, arguments: Any) -> ToolResult:
        return ToolResult.error(
            "no tools in the sole-planning setting; use the reference information in the prompt and answer"
        )
