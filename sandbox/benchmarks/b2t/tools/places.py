"""Resolving what an agent calls a place (a POI name, a station, an airport, the city itself, or
"lat,lon") to coordinates, for MapGuide and the `near` filter of the searches."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sandbox.benchmarks.b2t.geo import haversine_km
from sandbox.tools.args import ToolArgError

if TYPE_CHECKING:  # the store is only a type here
    from sandbox.benchmarks.b2t.world.store import World

_COORD_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*$")
MAX_PLACE_KM_FROM_CENTRE = 60.0  # coordinates farther out are not "in" the city


@dataclass(frozen=True)
class Place:
    name: str
    kind: str  # "restaurant", "hotel", "attraction", "entertainment", "station", "airport", "city", "point"
    latitude: float
    longitude: float


def transport_hubs(city: dict) -> list[Place]:
    """The city's railway stations and airports as places.

    The store has no coordinates for them; like the evaluator
    (sandbox/benchmarks/b2t/evaluator/context.py), they
    stand at the city centre, so MapGuide tells the agent exactly what the plan is checked against.
    """
    here = (city["latitude"], city["longitude"])
    return [Place(s, "station", *here) for s in city["stations"]] + [
        Place(a["name"], "airport", *here) for a in city["airports"]
    ]


def resolve_city_arg(world: World, args: dict[str, Any], key: str, label: str | None = None) -> str:
    """The store's name of the city in `args[key]`; an unknown one is an argument error that lists
    the cities, so the agent can retry with a valid name."""
    city = world.resolve_city(args[key])
    if city is None:
        raise ToolArgError(f"unknown {label or key} {args[key]!r}; available cities: {world.city_names()}")
    return city


def resolve_place(world: World, city_name: str, text: str) -> Place:
    """A place in `city_name` (canonical) named by `text`; raises ToolArgError when unknown."""
    city = world.city(city_name)
    match = _COORD_RE.match(text)
    if match:
        lat, lon = float(match.group(1)), float(match.group(2))
        if not (-90 <= lat <= 90 and -180 <= lon <= 180):
            raise ToolArgError(f'coordinates {text!r} are not a valid "lat,lon" pair')
        if haversine_km(lat, lon, city["latitude"], city["longitude"]) > MAX_PLACE_KM_FROM_CENTRE:
            raise ToolArgError(f"coordinates {text!r} are not in {city_name}")
        return Place(text.strip(), "point", lat, lon)
    if world.resolve_city(text) == city_name:
        return Place(city_name, "city", city["latitude"], city["longitude"])
    found = world.find_any_poi(city_name, text)
    if found is not None:
        kind, poi = found
        return Place(poi["name"], kind, poi["latitude"], poi["longitude"])
    folded = text.strip().casefold()
    for hub in transport_hubs(city):
        if hub.name.casefold() == folded or hub.name.casefold().replace(" railway station", "") == folded:
            return hub
    raise ToolArgError(
        f"unknown place {text!r} in {city_name}: use the exact name of a POI from a search "
        f'result, a station or airport of the city, the city name, or "lat,lon"'
    )
