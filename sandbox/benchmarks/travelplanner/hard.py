"""The five hard-constraint checks of TravelPlanner: budget, room rule, cuisine, room type, transport.

Run only when the plan passes `is_valid_information_in_sandbox` and `is_not_absent` (the official
gate). A check returns None when its constraint is absent from the query ("not applicable").
"""

import math
from typing import Any

from sandbox.benchmarks.travelplanner.commonsense import MEALS, Days
from sandbox.benchmarks.travelplanner.database import ACCOMMODATIONS, RESTAURANTS
from sandbox.benchmarks.travelplanner.lookup import Lookup
from sandbox.benchmarks.travelplanner.text import flight_number, from_to, is_filled, name_and_city

HOUSE_RULES = ("smoking", "parties", "children under 10", "visitors", "pets")
# Room-type constraint -> (room type of the database, whether the stay must have it or avoid it).
ROOM_TYPES = {
    "not shared room": ("Shared room", False),
    "shared room": ("Shared room", True),
    "private room": ("Private room", True),
    "entire room": ("Entire home/apt", True),
}


def transport_cost(day: dict, people: int, lookup: Lookup) -> float:
    """Cost of a day's "transportation" (its route from the text, else from "current_city"): a flight's
    price x people, self-driving per 5 people, taxi per 4; an unknown flight or other text costs 0."""
    value = day["transportation"]
    origin, destination = from_to(value)
    if origin is None or destination is None:
        origin, destination = from_to(day["current_city"])
    if origin is None or destination is None:
        return 0
    lowered = value.lower()
    if "flight number" in lowered:
        price = lookup.flight_price(flight_number(value), origin, destination)
        return 0 if price is None else price * people
    if "self-driving" in lowered:
        # The gate guarantees the route exists; a missing one raises, as officially.
        return lookup.drive_cost(origin, destination, "self-driving") * math.ceil(people / 5)
    if "taxi" in lowered:
        return lookup.drive_cost(origin, destination, "taxi") * math.ceil(people / 4)
    return 0


def meal_cost(value: str, people: int, lookup: Lookup) -> float | None:
    """A meal "Name, City": the first matching restaurant's average cost x people (None: no match)."""
    rows = lookup.places(RESTAURANTS, value)
    return rows[0]["Average Cost"] * people if rows else None


def stay_cost(value: str, people: int, lookup: Lookup) -> float | None:
    """A night at "Name, City": the first matching row's price x ceil(people / maximum occupancy)."""
    rows = lookup.places(ACCOMMODATIONS, value)
    return rows[0]["price"] * math.ceil(people / rows[0]["maximum occupancy"]) if rows else None


def charges_stay(query: dict, day_index: int, lookup: Lookup) -> bool:
    """Officially the last day's accommodation is charged too; strict charges nights only."""
    return not (lookup.strict and day_index == query["days"] - 1)


def total_cost(query: dict, days: Days, lookup: Lookup) -> float:
    """Flights x people, self-driving per 5 people, taxi per 4, meals x people, each night's room x
    ceil(people / maximum occupancy); an item the database lacks costs 0. HiMAP's Σ prices committed
    items with these same helpers (sandbox/benchmarks/travelplanner/himap/pricing.py)."""
    people = query["people_number"]
    total: float = 0
    for index, day in enumerate(days):
        if is_filled(day["transportation"]):
            total += transport_cost(day, people, lookup)
        for meal in MEALS:
            if is_filled(day[meal]):
                total += meal_cost(day[meal], people, lookup) or 0
        if is_filled(day["accommodation"]) and charges_stay(query, index, lookup):
            total += stay_cost(day["accommodation"], people, lookup) or 0
    return total


def valid_cost(query: dict, days: Days, lookup: Lookup) -> bool:
    return bool(total_cost(query, days, lookup) <= query["budget"])


def _stays(days: Days, lookup: Lookup) -> list[dict[str, Any]]:
    """The first matching database row of every given accommodation, day by day."""
    rows = []
    for day in days:
        if is_filled(day["accommodation"]):
            matches = lookup.places(ACCOMMODATIONS, day["accommodation"])
            if matches:
                rows.append(matches[0])
    return rows


def valid_room_rule(query: dict, days: Days, lookup: Lookup) -> bool | None:
    rule = query["local_constraint"]["house rule"]
    if rule is None:
        return None
    if rule not in HOUSE_RULES:  # an unknown rule forbids nothing
        return True
    return not any(f"No {rule}" in str(row["house_rules"]) for row in _stays(days, lookup))


def valid_room_type(query: dict, days: Days, lookup: Lookup) -> bool | None:
    wanted = query["local_constraint"]["room type"]
    if wanted is None:
        return None
    if wanted not in ROOM_TYPES:
        return True
    room_type, must_match = ROOM_TYPES[wanted]
    return all((row["room type"] == room_type) == must_match for row in _stays(days, lookup))


def valid_cuisine(query: dict, days: Days, lookup: Lookup) -> bool | None:
    """Every wanted cuisine is served by a meal outside `org`. Officially a meal in `org` ends the
    look at that day (later meals of the day are skipped); strict skips only that meal."""
    wanted = query["local_constraint"]["cuisine"]
    if not wanted:
        return None
    found: set[str] = set()
    for day in days:
        for meal in MEALS:
            if not is_filled(day[meal]):
                continue
            if name_and_city(day[meal])[1] == query["org"]:
                if lookup.strict:
                    continue
                break
            rows = lookup.places(RESTAURANTS, day[meal])
            if rows:
                found.update(c for c in wanted if c in rows[0]["Cuisines"])
    if len(found) == len(wanted):
        return True
    # A cuisine listed twice can leave every cuisine found yet the counts unequal: officially then
    # neither pass nor fail, i.e. not applicable.
    return False if any(c not in found for c in wanted) else None


def valid_transportation(query: dict, days: Days, lookup: Lookup) -> bool | None:
    """no flight / no self-driving: officially case-sensitive "Flight" / "Self-driving" in the text."""
    forbidden = query["local_constraint"]["transportation"]
    if forbidden is None:
        return None
    needle = {"no flight": "Flight", "no self-driving": "Self-driving"}.get(forbidden)
    if needle is None:
        return True
    for day in days:
        value = day["transportation"]
        if is_filled(value):
            text = value.lower() if lookup.strict else value
            if (needle.lower() if lookup.strict else needle) in text:
                return False
    return True


CHECKS = {
    "valid_cost": valid_cost,
    "valid_room_rule": valid_room_rule,
    "valid_cuisine": valid_cuisine,
    "valid_room_type": valid_room_type,
    "valid_transportation": valid_transportation,
}
