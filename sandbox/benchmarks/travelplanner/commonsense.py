"""The eight commonsense checks of TravelPlanner.

Each check takes the canonical query, the whole plan, the judged days (the first `days` entries) and a
Lookup, and returns a bool. In official mode they read the plan exactly as the official harness does
(see the "exactly as the harness does" list of the spec) and raise where it raises, with the same
Python error; `evaluator.evaluate` turns an error into a failed check plus `official_raises`. Each
`lookup.strict` branch is one documented fix (sandbox/benchmarks/travelplanner/README.md).
"""

from typing import Any

from sandbox.benchmarks.travelplanner.database import ACCOMMODATIONS, ATTRACTIONS, RESTAURANTS
from sandbox.benchmarks.travelplanner.lookup import Lookup
from sandbox.benchmarks.travelplanner.text import (
    attraction_items,
    before_parenthesis,
    flight_number,
    from_to,
    is_filled,
    same_place_key,
    transport_mode,
)

MEALS = ("breakfast", "lunch", "dinner")
DAY_KEYS = ("transportation", "breakfast", "lunch", "dinner", "attraction", "accommodation")
PLACEHOLDER_CITY = "You don't need to fill in the information for this or later days."
Days = list[Any]


def _city(text: str, strict: bool) -> str:
    """A city without its "(State)"; official keeps the space before "(", strict trims it."""
    city = before_parenthesis(text)
    return city.strip() if strict else city


def route_cities(query: dict, days: Days, strict: bool) -> list[str] | None:
    """The city sequence (both cities of a travel day, the city of a stay day); None when day 1 is a
    travel day that does not leave from `org`."""
    cities: list[str] = []
    for index, day in enumerate(days):
        value = day["current_city"]
        if "from" in value:
            origin, destination = from_to(value)
            origin, destination = _city(origin, strict), _city(destination, strict)
            if index == 0 and origin != query["org"]:
                return None
            cities += [origin, destination]
        else:
            cities.append(_city(value, strict))
    return cities


def _valid_sequence(cities: list[str]) -> bool:
    """At least 3 entries; a city's run that starts in the middle must be new and, when it also ends
    in the middle, at least 2 long."""
    if len(cities) < 3:
        return False
    last = len(cities) - 1
    seen: set[str] = set()
    start = 0
    while start <= last:
        end = start
        while end + 1 <= last and cities[end + 1] == cities[start]:
            end += 1
        if cities[start] in seen and start not in (0, last):
            return False
        if end == start and 0 < end < last:
            return False
        seen.add(cities[start])
        start = end + 1
    return True


def is_reasonable_visiting_city(query: dict, plan: list, days: Days, lookup: Lookup) -> bool:
    cities = route_cities(query, days, lookup.strict)
    if cities is None or cities[0] != cities[-1] or not _valid_sequence(cities):
        return False
    states = lookup.db.city_states
    for index, city in enumerate(cities):
        if city not in states:
            return False
        if index in (0, len(cities) - 1):
            continue
        if query["days"] > 3 and states[city] != query["dest"]:
            return False
        # Strict: a 3-day trip must visit the destination city (officially never checked).
        if lookup.strict and query["days"] <= 3 and city != query["dest"]:
            return False
    return True


def _place(item: Any, strict: bool) -> Any:
    """An item as the diversity checks compare it: officially the raw text; strictly its name and
    city normalised, so an extra space or another case does not make a second restaurant."""
    return same_place_key(item) if strict and isinstance(item, str) else item


def is_valid_restaurants(query: dict, plan: list, days: Days, lookup: Lookup) -> bool:
    seen: list[Any] = []
    for day in days:
        for meal in MEALS:
            if meal in day and is_filled(day[meal]):
                place = _place(day[meal], lookup.strict)
                if place in seen:
                    return False
                seen.append(place)
    return True


def is_valid_attractions(query: dict, plan: list, days: Days, lookup: Lookup) -> bool:
    seen: list[Any] = []
    for day in days:
        if "attraction" in day and is_filled(day["attraction"]):
            for item in attraction_items(day["attraction"], lookup.strict):
                place = _place(item, lookup.strict)
                if place in seen:
                    return False
                seen.append(place)
    return True


def is_valid_transportation(query: dict, plan: list, days: Days, lookup: Lookup) -> bool:
    """Day 1 travels, and self-driving is never combined with a flight or a taxi."""
    if not is_filled(plan[0]["transportation"]):
        return False
    modes = {transport_mode(plan[0]["transportation"])}
    for day in days:
        if "transportation" in day and is_filled(day["transportation"]):
            modes.add(transport_mode(day["transportation"]))
    return "Self-driving" not in modes or not ({"Flight", "Taxi"} & modes)


def _day_cities(value: Any, strict: bool) -> Any:
    """What an item must mention on this day: the two cities of "from A to B"; on a stay day,
    officially the city STRING, whose characters are then tested one by one; strictly the city."""
    if "from" in value:
        origin, destination = from_to(value)
        return [before_parenthesis(origin), before_parenthesis(destination)]
    city = before_parenthesis(value)
    return [city.strip()] if strict else city


def is_valid_information_in_current_city(query: dict, plan: list, days: Days, lookup: Lookup) -> bool:
    for day in days:
        cities = _day_cities(day["current_city"], lookup.strict)
        if "transportation" in day and is_filled(day["transportation"]):
            if any(city not in day["transportation"] for city in cities):
                return False
        for meal in MEALS:
            if meal in day and is_filled(day[meal]) and not any(c in day[meal] for c in cities):
                return False
        if "attraction" in day and is_filled(day["attraction"]):
            for item in attraction_items(day["attraction"], lookup.strict):
                if not any(city in item for city in cities):
                    return False
        if "accommodation" in day and is_filled(day["accommodation"]):
            if lookup.strict and not cities[-1]:
                return False
            if cities[-1] not in day["accommodation"]:
                return False
    return True


def _transport_exists(day: dict, lookup: Lookup) -> bool:
    """The flight / drive of a day's transportation exists (a text naming neither is officially not
    checked; strictly it fails, as nothing in it can be verified)."""
    value = day["transportation"]
    origin, destination = from_to(value)
    if origin is None or destination is None:
        origin, destination = from_to(day["current_city"])
    lowered = value.lower()
    if "flight number" in lowered or (lookup.strict and "flight" in lowered):
        if lookup.strict and (origin is None or "Flight Number: " not in value):
            return False
        origin, destination = before_parenthesis(origin), before_parenthesis(destination)
        return lookup.flight_on_route(flight_number(value), origin, destination)
    if "self-driving" in lowered or "taxi" in lowered:
        if origin is None or destination is None:
            origin = destination = "-"  # officially looked up as "-" (never found)
        mode = "self-driving" if "self-driving" in lowered else "taxi"
        return (
            lookup.drive_cost(before_parenthesis(origin), before_parenthesis(destination), mode) is not None
        )
    return not lookup.strict


def is_valid_information_in_sandbox(query: dict, plan: list, days: Days, lookup: Lookup) -> bool:
    for day in days:
        if is_filled(day["transportation"]) and not _transport_exists(day, lookup):
            return False
        for meal in MEALS:
            if meal in day and is_filled(day[meal]) and not lookup.places(RESTAURANTS, day[meal]):
                return False
        if "attraction" in day and is_filled(day["attraction"]):
            for item in attraction_items(day["attraction"], lookup.strict):
                if not lookup.places(ATTRACTIONS, item):
                    return False
        if "accommodation" in day and is_filled(day["accommodation"]):
            if not lookup.places(ACCOMMODATIONS, day["accommodation"]):
                return False
    return True


def _runs(values: list[Any]) -> list[tuple[Any, int]]:
    runs: list[tuple[Any, int]] = []
    for value in values:
        if runs and runs[-1][0] == value:
            runs[-1] = (value, runs[-1][1] + 1)
        else:
            runs.append((value, 1))
    return runs


def is_valid_accommodation(query: dict, plan: list, days: Days, lookup: Lookup) -> bool:
    """Minimum nights: a run of the same accommodation is at least its `minimum nights` long, judged
    officially only when exactly one row matches (strict: the first matching row, and a stay the
    database lacks fails: its minimum cannot be verified, so it is not met)."""
    if any("accommodation" not in day for day in days):
        return False
    for value, nights in _runs([day["accommodation"] for day in days]):
        if value in ("-", ""):
            continue
        rows = lookup.places(ACCOMMODATIONS, value)
        if lookup.strict and not rows:
            return False
        judged = bool(rows) if lookup.strict else len(rows) == 1
        if judged and nights < rows[0]["minimum nights"]:
            return False
    return True


def _absent(value: Any, strict: bool) -> bool:
    """Officially only "" and "-" are absent (a None passes); strict adds None."""
    return value in ("", "-") or (strict and value is None)


def _complete_day(index: int, day: dict, query: dict, strict: bool) -> bool:
    if any(key not in day for key in DAY_KEYS):
        return False
    city = day["current_city"]
    if ("from " in city or "to " in city) and _absent(day["transportation"], strict):
        return False
    if "from " not in city and " to " not in city and _absent(day["attraction"], strict):
        return False
    if index != query["days"] - 1 and _absent(day["accommodation"], strict):
        return False
    if any(_absent(day[meal], strict) for meal in MEALS) and "from " not in city:
        return False
    return True


def is_not_absent(query: dict, plan: list, days: Days, lookup: Lookup) -> bool:
    """Complete information: all days present, the right number of cities, the needed fields, and at
    least half of 6 x days values given (officially counting every key of a day; strict the six)."""
    filled_days = sum(1 for day in days if day != {} and day["current_city"] != PLACEHOLDER_CITY)
    if filled_days != query["days"]:
        return False
    cities = route_cities(query, days, lookup.strict)
    if cities is None or len(set(cities) - {query["org"]}) != query["visiting_city_number"]:
        return False
    given = 0
    for index, day in enumerate(days):
        if not _complete_day(index, day, query, lookup.strict):
            return False
        keys = DAY_KEYS if lookup.strict else list(day)
        given += sum(1 for key in keys if is_filled(day[key]))
    return given / (6 * query["days"]) >= 0.5


CHECKS = {
    "is_valid_information_in_current_city": is_valid_information_in_current_city,
    "is_valid_information_in_sandbox": is_valid_information_in_sandbox,
    "is_reasonable_visiting_city": is_reasonable_visiting_city,
    "is_valid_restaurants": is_valid_restaurants,
    "is_valid_transportation": is_valid_transportation,
    "is_valid_attractions": is_valid_attractions,
    "is_valid_accommodation": is_valid_accommodation,
    "is_not_absent": is_not_absent,
}
