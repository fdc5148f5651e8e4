"""Can a valid plan exist for this profile and query, and what does the cheapest one cost?

The generator keeps only instances with a valid plan and sets the budget above the cheapest
plan's cost, so the budget constraint binds without making the task impossible. The estimate
counts what every plan must pay for: outbound and return intercity transport in the preferred
mode and class, a matching hotel for every night, a distinct matching restaurant for every meal,
and a distinct matching attraction per day, none of them among the places already visited.
"""

import math
from dataclasses import dataclass
from typing import Any

from sandbox.benchmarks.b2t.instances.catalog import Catalog, TransportOption
from sandbox.benchmarks.b2t.instances.matching import matching_pois, record_matches

# Intercity legs a plan can build full days around (minutes after midnight).
# No intercity travel overlaps 23:00-06:00; the first night's hotel check-in follows the arrival.
OUTBOUND_EARLIEST_DEPARTURE = 6 * 60
OUTBOUND_LATEST_ARRIVAL = 21 * 60
RETURN_EARLIEST_DEPARTURE = 8 * 60
RETURN_LATEST_ARRIVAL = 23 * 60


@dataclass(frozen=True)
class Feasibility:
    ok: bool
    reason: str = ""
    cheapest_cost: float = 0.0


def rooms_for(people: int) -> int:
    return math.ceil(people / 2)


def outbound_ok(option: TransportOption) -> bool:
    dep, arr = option.departure_min, option.arrival_min
    return (
        option.day_offset == 0
        and dep >= OUTBOUND_EARLIEST_DEPARTURE
        and arr <= OUTBOUND_LATEST_ARRIVAL
        and arr > dep
    )


def return_ok(option: TransportOption) -> bool:
    dep, arr = option.departure_min, option.arrival_min
    return (
        option.day_offset == 0
        and dep >= RETURN_EARLIEST_DEPARTURE
        and arr <= RETURN_LATEST_ARRIVAL
        and arr > dep
    )


def usable_legs(
    catalog: Catalog, profile: dict[str, Any], origin: str, destination: str, date: str, outbound: bool
) -> list[TransportOption]:
    """Preference-matched legs on `date` that travel by day (taking a train again is no fault)."""
    fits = outbound_ok if outbound else return_ok
    mode = (profile.get("transportation") or {}).get("intercity_transport")
    options = catalog.transport(origin, destination, date, (mode,) if mode else None)
    return [o for o in options if fits(o) and record_matches(profile, "transport", o)]


def meals_needed(days: int) -> int:
    """Meals a trip of `days` days can owe at most (three a day)."""
    return 3 * days


def choice_margin(days: int) -> int:
    """Spare matching places a trip needs beyond the minimum: with none, one far-off restaurant
    or an early-closing sight makes a day impossible to time (local transport <= 2 h a day)."""
    return 2 + days // 3


def check(catalog: Catalog, profile: dict[str, Any], query: dict[str, Any], return_date: str) -> Feasibility:
    """Whether the store supports a valid plan for this instance, and its cheapest cost."""
    origin, city, days, people = query["origin"], query["destination"], query["days"], query["people"]
    history = profile.get("history", {})
    out = usable_legs(catalog, profile, origin, city, query["start_date"], outbound=True)
    back = usable_legs(catalog, profile, city, origin, return_date, outbound=False)
    if not out or not back:
        return Feasibility(
            False, "no intercity transport in the preferred mode and class that fits the first or last day"
        )
    cost = (min(o.price for o in out) + min(o.price for o in back)) * people

    visited_hotels = set(history.get("accommodations", []))
    hotels = [
        h["avg_price"]
        for h in matching_pois(catalog, profile, "hotel", city)
        if h["name"] not in visited_hotels
    ]
    if not hotels:
        return Feasibility(False, "no matching hotel")
    cost += min(hotels) * (days - 1) * rooms_for(people)

    visited_restaurants = set(history.get("restaurants", []))
    meals = sorted(
        r["avg_price"]
        for r in matching_pois(catalog, profile, "restaurant", city)
        if r["name"] not in visited_restaurants
    )
    if len(meals) < meals_needed(days) + choice_margin(days):
        return Feasibility(False, f"only {len(meals)} matching restaurants for {meals_needed(days)} meals")
    cost += sum(meals[: meals_needed(days)]) * people

    visited_attractions = set(history.get("attractions", []))
    sights = sorted(
        a["avg_price"]
        for a in matching_pois(catalog, profile, "attraction", city)
        if a["name"] not in visited_attractions
    )
    if len(sights) < days + choice_margin(days):
        return Feasibility(False, f"only {len(sights)} matching attractions for {days} days")
    cost += sum(sights[:days]) * people
    return Feasibility(True, cheapest_cost=cost)
