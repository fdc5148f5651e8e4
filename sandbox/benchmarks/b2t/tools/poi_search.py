"""The four POI searches: AccommodationSearch, AttractionSearch, EntertainmentSearch, RestaurantSearch.

Preference keys map onto columns (paper Table 7): values within one key are alternatives (any
of), different keys must all hold; `amenities` requires every listed facility. Optional filters:
`near` (a named place or "lat,lon") within `radius_km`, `min_price`/`max_price`, `min_rating`,
`open_at` "HH:MM". Results are ordered by rating (best first, then price, then name), or by
distance when `near` is given.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sandbox.benchmarks.b2t import vocab
from sandbox.benchmarks.b2t.geo import haversine_km
from sandbox.benchmarks.b2t.tools.format import coords, price, render
from sandbox.benchmarks.b2t.tools.places import resolve_city_arg, resolve_place
from sandbox.tools.args import (
    N_MAX,
    N_MIN,
    Param,
    ToolArgError,
    check_n,
    check_preferences,
    check_range,
    check_time,
)

if TYPE_CHECKING:  # the World is only a type here: it imports the tool registry
    from sandbox.benchmarks.b2t.world.store import World

DEFAULT_RADIUS_KM = 3.0
MAX_RADIUS_KM = 50.0

# preference key -> (vocabulary, SQL builder: values -> (where clause, params))
Clause = Callable[[list[str]], tuple[str, list[Any]]]


def column_in(column: str) -> Clause:
    return lambda values: (f"{column} IN ({', '.join('?' * len(values))})", list(values))


def json_has_any(column: str) -> Clause:
    return lambda values: (
        "(" + " OR ".join(f"{column} LIKE ?" for _ in values) + ")",
        [f'%"{v}"%' for v in values],
    )


def json_has_all(column: str) -> Clause:
    return lambda values: (
        "(" + " AND ".join(f"{column} LIKE ?" for _ in values) + ")",
        [f'%"{v}"%' for v in values],
    )


def walking_within(values: list[str]) -> tuple[str, list[Any]]:
    """Attractions whose walking fits the most tolerant of the given levels."""
    limit = max(vocab.WALKING_LIMIT_KM[v] for v in values)
    return ("1", []) if math.isinf(limit) else ("walking_km <= ?", [limit])


@dataclass(frozen=True)
class PoiSearch:
    tool: str
    table: str
    noun: str  # plural, for the header
    description: str
    preferences: dict[str, tuple[tuple[str, ...], Clause]]
    has_hours: bool
    item: Callable[[dict[str, Any]], dict[str, Any]]

    def params(self) -> tuple[Param, ...]:
        pref_props = {
            k: {"type": "array", "items": {"type": "string", "enum": list(options)}}
            for k, (options, _) in self.preferences.items()
        }
        filters = [
            Param(
                "near", "string", 'only results near this place: a POI name, station, airport or "lat,lon"'
            ),
            Param("radius_km", "number", "radius for `near` in km", default=DEFAULT_RADIUS_KM),
            Param("min_price", "number", "minimum average price in CNY"),
            Param("max_price", "number", "maximum average price in CNY"),
            Param("min_rating", "number", "minimum average rating (1-5)"),
        ]
        if self.has_hours:
            filters.append(Param("open_at", "string", 'only places open at this time, "HH:MM"'))
        return (
            Param("city", "string", 'city name, e.g. "Chengdu"', required=True),
            Param("n", "integer", f"number of results ({N_MIN}-{N_MAX})", default=5),
            Param(
                "preferences",
                "object",
                "preference filters; values are lists of the listed strings",
                schema_extra={"properties": pref_props, "additionalProperties": False},
            ),
            *filters,
        )

    def run(self, world: World, args: dict[str, Any]) -> str:
        city = resolve_city_arg(world, args, "city")
        n = check_n(args["n"])
        sql_where, params = self._where(city, args)
        if args["near"] is None:
            header, items = self._best_rated(world, city, sql_where, params, n)
        else:
            header, items = self._nearest(world, city, args, sql_where, params, n)
        if not items:
            header += " Nothing matches; relax the preferences or filters."
        return render(header, items)

    def _where(self, city: str, args: dict[str, Any]) -> tuple[str, list[Any]]:
        """The checked preferences and filters as one SQL condition and its parameters."""
        prefs = check_preferences(
            self.tool, args["preferences"], {k: v[0] for k, v in self.preferences.items()}
        )
        where, params = ["city = ?"], [city]
        for key, values in prefs.items():
            clause, clause_params = self.preferences[key][1](values)
            where.append(clause)
            params += clause_params
        low = check_range(args["min_price"], "min_price", 0, 1e6)
        high = check_range(args["max_price"], "max_price", 0, 1e6)
        if low is not None and high is not None and low > high:
            raise ToolArgError(f"min_price {low:g} is above max_price {high:g}")
        if low is not None:
            where.append("avg_price >= ?")
            params.append(low)
        if high is not None:
            where.append("avg_price <= ?")
            params.append(high)
        rating = check_range(args["min_rating"], "min_rating", 0, 5)
        if rating is not None:
            where.append("avg_rating >= ?")
            params.append(rating)
        open_at = check_time(args.get("open_at"), "open_at")
        if open_at is not None:
            where += ["open_time <= ?", "close_time > ?"]
            params += [open_at, open_at]
        return " AND ".join(where), params

    def _best_rated(
        self, world: World, city: str, sql_where: str, params: list[Any], n: int
    ) -> tuple[str, list[dict[str, Any]]]:
        """No `near`: the n best rated of the whole city, and how many match."""
        total = world.query(f"SELECT COUNT(*) FROM {self.table} WHERE {sql_where}", params)[0][0]
        rows = world.query(
            f"SELECT * FROM {self.table} WHERE {sql_where} ORDER BY avg_rating DESC, avg_price, name LIMIT ?",
            params + [n],
        )
        items = [self.item(dict(r)) for r in rows]
        return f"{self.noun} in {city}: {len(items)} of {total} matching, best rated first.", items

    def _nearest(
        self, world: World, city: str, args: dict[str, Any], sql_where: str, params: list[Any], n: int
    ) -> tuple[str, list[dict[str, Any]]]:
        """`near` a place: the n nearest within radius_km (a bounding box in SQL, then the exact
        great-circle distance), the place itself left out."""
        radius = check_range(args["radius_km"], "radius_km", 0.1, MAX_RADIUS_KM)
        place = resolve_place(world, city, args["near"])
        dlat = radius / 111.0
        dlon = radius / (111.0 * math.cos(math.radians(place.latitude)))
        box = " AND latitude BETWEEN ? AND ? AND longitude BETWEEN ? AND ?"
        rows = world.query(
            f"SELECT * FROM {self.table} WHERE {sql_where}{box}",
            params
            + [
                place.latitude - dlat,
                place.latitude + dlat,
                place.longitude - dlon,
                place.longitude + dlon,
            ],
        )
        scored = []
        for r in rows:
            km = haversine_km(place.latitude, place.longitude, r["latitude"], r["longitude"])
            if km <= radius and r["name"] != place.name:
                scored.append((round(km, 2), -r["avg_rating"], r["name"], r))
        scored.sort(key=lambda s: s[:3])
        items = [{**self.item(dict(r)), "distance_km": km} for km, _, _, r in scored[:n]]
        header = (
            f"{self.noun} in {city} within {radius:g} km of {place.name}: "
            f"{len(items)} of {len(scored)} matching, nearest first."
        )
        return header, items


def hotel_item(r: dict[str, Any]) -> dict[str, Any]:
    """A hotel as AccommodationSearch lists it, from its row (raw, or decoded by World.find_poi)."""
    rooms = [
        f"{x['room_type']} {price(x['price'])} (sleeps {x['capacity']})" for x in _listed(r["room_info"])
    ]
    return {
        "name": r["name"],
        "star": r["secondary_category"],
        "type": r["tertiary_category"],
        "price_per_night": price(r["avg_price"]),
        "rating": r["avg_rating"],
        "facilities": _listed(r["facilities"]),
        "rooms": rooms,
        "district": r["district"],
        "address": r["address"],
        "coords": coords(r["latitude"], r["longitude"]),
        "id": r["id"],
    }


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else json.loads(value)


def _attraction_item(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": r["name"],
        "type": r["attraction_type"],
        "ticket": price(r["avg_price"]),
        "rating": r["avg_rating"],
        "hours": r["opening_hours"],
        "duration_min": r["recommended_duration_min"],
        "walking_km": r["walking_km"],
        "best_season": r["best_season"],
        "address": r["address"],
        "coords": coords(r["latitude"], r["longitude"]),
        "id": r["id"],
    }


def _entertainment_item(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": r["name"],
        "type": r["categories"],
        "price_per_person": price(r["avg_price"]),
        "rating": r["avg_rating"],
        "hours": r["business_hours"],
        "address": r["address"],
        "coords": coords(r["latitude"], r["longitude"]),
        "id": r["id"],
    }


def _restaurant_item(r: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": r["name"],
        "cuisine": r["secondary_category"],
        "style": r["tertiary_category"],
        "price_per_person": price(r["avg_price"]),
        "price_level": r["price_level"],
        "environment": json.loads(r["environment"]),
        "rating": r["avg_rating"],
        "hours": r["business_hours"],
        "address": r["address"],
        "coords": coords(r["latitude"], r["longitude"]),
        "id": r["id"],
    }


SEARCHES = (
    PoiSearch(
        "AccommodationSearch",
        "hotels",
        "Hotels",
        "Search hotels in a city, optionally by star level and required amenities (all must be present).",
        {
            "star_rating": (vocab.STAR_LEVELS, column_in("secondary_category")),
            "amenities": (vocab.HOTEL_FACILITIES, json_has_all("facilities")),
        },
        has_hours=False,
        item=hotel_item,
    ),
    PoiSearch(
        "AttractionSearch",
        "attractions",
        "Attractions",
        "Search attractions in a city, optionally by type and walking tolerance (walking a visit involves).",
        {
            "attraction_type": (vocab.ATTRACTION_TYPES, column_in("attraction_type")),
            "walk_tolerance": (vocab.WALKING_TOLERANCE, walking_within),
        },
        has_hours=True,
        item=_attraction_item,
    ),
    PoiSearch(
        "EntertainmentSearch",
        "entertainment",
        "Entertainment venues",
        "Search entertainment venues in a city, optionally by type.",
        {"type": (vocab.ENTERTAINMENT_TYPES, column_in("categories"))},
        has_hours=True,
        item=_entertainment_item,
    ),
    PoiSearch(
        "RestaurantSearch",
        "restaurants",
        "Restaurants",
        "Search restaurants in a city, optionally by cuisine, price level and dining environment.",
        {
            "cuisine": (vocab.CUISINES, column_in("secondary_category")),
            "price_level": (vocab.PRICE_LEVELS, column_in("price_level")),
            "environment": (vocab.DINING_ENVIRONMENTS, json_has_any("environment")),
        },
        has_hours=True,
        item=_restaurant_item,
    ),
)
