"""MapGuide: how to get from one place to another.

Inside one city: every local mode of `sandbox.benchmarks.b2t.geo` (walking, subway and bus transit, taxi and
ride-sharing driving) with distance and duration, the same numbers the evaluator checks plans
against. Between cities: a summary of the trains and flights on the route and the drive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sandbox.benchmarks.b2t import geo
from sandbox.benchmarks.b2t.tools.format import compact_json, price
from sandbox.benchmarks.b2t.tools.places import resolve_city_arg, resolve_place
from sandbox.tools.args import Param

if TYPE_CHECKING:  # the store is only a type here
    from sandbox.benchmarks.b2t.world.store import World

MAP_PARAMS = (
    Param("origin_cityName", "string", "city of the origin", required=True),
    Param(
        "origin", "string", 'origin: a POI name, station, airport, the city name, or "lat,lon"', required=True
    ),
    Param("destination_cityName", "string", "city of the destination", required=True),
    Param("destination", "string", "destination, same forms as origin", required=True),
)


def map_guide(world: World, args: dict[str, Any]) -> str:
    """MapGuide: local routes between two places of one city, or the intercity options."""
    origin_city = resolve_city_arg(world, args, "origin_cityName")
    dest_city = resolve_city_arg(world, args, "destination_cityName")
    origin = resolve_place(world, origin_city, args["origin"])
    dest = resolve_place(world, dest_city, args["destination"])
    if origin_city == dest_city:
        routes = geo.local_routes(origin.latitude, origin.longitude, dest.latitude, dest.longitude)
        straight_km = geo.haversine_km(origin.latitude, origin.longitude, dest.latitude, dest.longitude)
        lines = [
            f"Routes in {origin_city} from {origin.name} to {dest.name} (straight line {straight_km:.1f} km):"
        ]
        for mode, route in routes.items():
            lines.append(
                compact_json(
                    {"mode": mode, "distance_km": route.distance_km, "duration_min": route.duration_min}
                )
            )
        return "\n".join(lines)
    return _intercity(world, origin_city, dest_city, origin.name, dest.name)


def _intercity(world: World, origin_city: str, dest_city: str, origin_name: str, dest_name: str) -> str:
    a, b = world.city(origin_city), world.city(dest_city)
    drive = geo.intercity_drive(a["latitude"], a["longitude"], b["latitude"], b["longitude"])
    lines = [f"Intercity options {origin_city} ({origin_name}) -> {dest_city} ({dest_name}):"]
    trains = world.query(
        "SELECT train_type, COUNT(*) AS k, MIN(duration_min) AS fastest, MIN(departure_time) AS "
        "first, MAX(departure_time) AS last FROM trains WHERE origin_city = ? AND "
        "destination_city = ? GROUP BY train_type ORDER BY train_type",
        (origin_city, dest_city),
    )
    for t in trains:
        lines.append(
            compact_json(
                {
                    "mode": t["train_type"],
                    "daily_trains": t["k"],
                    "fastest_min": t["fastest"],
                    "departures": f"{t['first']}-{t['last']}",
                    "details": "TrainSearch",
                }
            )
        )
    flights = world.query(
        "SELECT COUNT(DISTINCT flight_number) AS k, MIN(duration_min) AS fastest, "
        "MIN(total_price) AS cheapest FROM flights WHERE origin_city = ? AND destination_city = ? "
        "AND departure_date = ? AND cabin_class = 'Economy Class'",
        (origin_city, dest_city, world.date_start),
    )[0]
    if flights["k"]:
        lines.append(
            compact_json(
                {
                    "mode": "Airplane",
                    "daily_flights": flights["k"],
                    "fastest_min": flights["fastest"],
                    "economy_from": price(flights["cheapest"]),
                    "details": "FlightSearch (by date)",
                }
            )
        )
    else:
        lines.append(compact_json({"mode": "Airplane", "daily_flights": 0}))
    lines.append(
        compact_json(
            {"mode": "Driving", "distance_km": drive.distance_km, "duration_min": drive.duration_min}
        )
    )
    return "\n".join(lines)
