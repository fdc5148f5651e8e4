"""FlightSearch (per date, cabin class preference) and TrainSearch (daily timetable).

Both take optional departure-window and price filters so an agent can avoid night travel and
stay within budget without paging through every result. Results are ordered by departure time.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from sandbox.benchmarks.b2t import vocab
from sandbox.benchmarks.b2t.tools.format import price, render
from sandbox.benchmarks.b2t.tools.places import resolve_city_arg
from sandbox.tools.args import (
    N_MAX,
    N_MIN,
    Param,
    ToolArgError,
    check_date,
    check_n,
    check_preferences,
    check_range,
    check_time,
)

if TYPE_CHECKING:  # the store is only a type here
    from sandbox.benchmarks.b2t.world.store import World

TRAIN_TYPES = ("High-speed Rail", "Regular Train")

_WINDOW_PARAMS = (
    Param("depart_after", "string", 'earliest departure time "HH:MM"'),
    Param("depart_before", "string", 'latest departure time "HH:MM"'),
    Param("max_price", "number", "maximum price per adult in CNY"),
)


def _route(world: World, args: dict[str, Any]) -> tuple[str, str]:
    cities = [resolve_city_arg(world, args, key, f"{key} city") for key in ("origin", "destination")]
    if cities[0] == cities[1]:
        raise ToolArgError(f"origin and destination are both {cities[0]}; use MapGuide inside a city")
    return cities[0], cities[1]


def _filters(
    args: dict[str, Any], prefs: dict[str, list[str]], pref_column: str
) -> tuple[list[str], list[Any]]:
    """SQL conditions (and their parameters) for the preference list and the departure window."""
    where: list[str] = []
    params: list[Any] = []
    if pref_column in prefs:
        where.append(f"{pref_column} IN ({', '.join('?' * len(prefs[pref_column]))})")
        params += prefs[pref_column]
    after, before = (
        check_time(args["depart_after"], "depart_after"),
        check_time(args["depart_before"], "depart_before"),
    )
    if after is not None:
        where.append("departure_time >= ?")
        params.append(after)
    if before is not None:
        where.append("departure_time <= ?")
        params.append(before)
    return where, params


FLIGHT_PARAMS = (
    Param("origin", "string", "departure city", required=True),
    Param("destination", "string", "arrival city", required=True),
    Param("departure_date", "string", 'date "YYYY-MM-DD"', required=True),
    Param("n", "integer", f"number of results ({N_MIN}-{N_MAX})", default=5),
    Param(
        "preferences",
        "object",
        "preference filters; values are lists of the listed strings",
        schema_extra={
            "properties": {
                "cabin_class": {
                    "type": "array",
                    "items": {"type": "string", "enum": list(vocab.FLIGHT_CABINS)},
                }
            },
            "additionalProperties": False,
        },
    ),
    *_WINDOW_PARAMS,
)


def flight_search(world: World, args: dict[str, Any]) -> str:
    """FlightSearch: one date's flights on a route, filtered, with a hint when nothing matches."""
    origin, destination = _route(world, args)
    date = check_date(args["departure_date"], "departure_date", world.date_start, world.date_end)
    n = check_n(args["n"])
    prefs = check_preferences("FlightSearch", args["preferences"], {"cabin_class": vocab.FLIGHT_CABINS})
    where = ["origin_city = ?", "destination_city = ?", "departure_date = ?"]
    params: list[Any] = [origin, destination, date]
    filters, filter_params = _filters(args, prefs, "cabin_class")
    where += filters
    params += filter_params
    high = check_range(args["max_price"], "max_price", 0, 1e6)
    if high is not None:
        where.append("total_price <= ?")
        params.append(high)
    sql_where = " AND ".join(where)
    total = world.query(f"SELECT COUNT(*) FROM flights WHERE {sql_where}", params)[0][0]
    rows = world.query(
        f"SELECT * FROM flights WHERE {sql_where} ORDER BY departure_time, total_price, id LIMIT ?",
        params + [n],
    )
    items = [
        {
            "flight_number": r["flight_number"],
            "airline": r["airline"],
            "from": f"{r['origin_airport']} ({r['origin_airport_code']}) {r['departure_terminal']}",
            "to": f"{r['destination_airport']} ({r['destination_airport_code']}) {r['arrival_terminal']}",
            "depart": f"{r['departure_date']} {r['departure_time']}",
            "arrive": f"{r['arrival_date']} {r['arrival_time']}",
            "duration_min": r["duration_min"],
            "cabin": r["cabin_class"],
            "price": price(r["total_price"]),
            "on_time_rate": r["on_time_rate"],
            "aircraft": r["aircraft"],
            "meal": bool(r["meal"]),
        }
        for r in rows
    ]
    header = (
        f"Flights {origin} -> {destination} on {date}: {len(items)} of {total} matching, by departure time."
    )
    if not items:
        any_route = world.query(
            "SELECT 1 FROM flights WHERE origin_city = ? AND destination_city = ? LIMIT 1",
            (origin, destination),
        )
        header += (
            " Nothing matches; relax the filters or try another date."
            if any_route
            else f" There is no air route between {origin} and {destination}; use TrainSearch."
        )
    return render(header, items)


TRAIN_PARAMS = (
    Param("origin", "string", "departure city", required=True),
    Param("destination", "string", "arrival city", required=True),
    Param("n", "integer", f"number of results ({N_MIN}-{N_MAX})", default=5),
    Param(
        "preferences",
        "object",
        "optional filter on the train type",
        schema_extra={
            "properties": {
                "train_type": {"type": "array", "items": {"type": "string", "enum": list(TRAIN_TYPES)}}
            },
            "additionalProperties": False,
        },
    ),
    *_WINDOW_PARAMS,
)


def train_search(world: World, args: dict[str, Any]) -> str:
    """TrainSearch: the route's daily trains, filtered; the price filter uses the cheapest seat."""
    origin, destination = _route(world, args)
    n = check_n(args["n"])
    prefs = check_preferences("TrainSearch", args["preferences"], {"train_type": TRAIN_TYPES})
    where = ["origin_city = ?", "destination_city = ?"]
    params: list[Any] = [origin, destination]
    filters, filter_params = _filters(args, prefs, "train_type")
    where += filters
    params += filter_params
    rows = world.query(
        f"SELECT * FROM trains WHERE {' AND '.join(where)} ORDER BY departure_time, train_number", params
    )
    high = check_range(args["max_price"], "max_price", 0, 1e6)
    items = []
    for r in rows:
        fares = json.loads(r["fares"])
        if high is not None and min(fares.values()) > high:
            continue
        arrive = r["arrival_time"] + (f" (+{r['arrival_day_offset']} day)" if r["arrival_day_offset"] else "")
        items.append(
            {
                "train_number": r["train_number"],
                "type": r["train_type"],
                "from": r["origin_station"],
                "to": r["destination_station"],
                "depart": r["departure_time"],
                "arrive": arrive,
                "duration": r["duration_text"],
                "duration_min": r["duration_min"],
                "fares": {k: price(v) for k, v in fares.items()},
            }
        )
    total = len(items)
    items = items[:n]
    header = f"Trains {origin} -> {destination} (daily): {len(items)} of {total} matching, by departure time."
    if not items:
        header += " Nothing matches; relax the filters."
    return render(header, items)
