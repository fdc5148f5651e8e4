"""A planner that builds a plan passing all 13 TravelPlanner checks from the rows the tools show.

One function serves both callers: the query generator hands it database rows to price a trip (its
cost proves the generated budget feasible), and the expert hands it the rows it read back from
its tool replies. Either way the rows of a city are in file order, as the tools list them, which
matters because the evaluator prices a name by the *first* row whose name contains it.

Plan shape for k cities over 2k+1 days: day 1 travels org -> c1, then each city gets a stay day
and a travel day out of it (c_i -> c_{i+1}, the last one back to org). Stay days have three meals
and attractions; travel days have optional meals in a non-origin city (dropped, most expensive
first, when the budget needs it), and every night but the last is at the city's accommodation
(2 nights per city, so its minimum nights must be <= 2). Intercity transport is self-driving on
every leg, or per leg the cheaper of taxi and flight (never self-driving mixed with either).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.benchmarks.travelplanner.plan_reader import PLAN_FIELDS

NIGHTS_PER_CITY = 2
ATTRACTIONS_PER_STAY_DAY = 2
ROOM_TYPES = {"entire room": "Entire home/apt", "private room": "Private room", "shared room": "Shared room"}
_UNSAFE_NAME_CHARS = (";", "\t", "\n")  # would break the plan's item lists or the tool tables


@dataclass(frozen=True)
class LegOptions:
    """What the tools say about one intercity leg: DistanceMatrix lines and flights of its date."""

    origin: str
    destination: str
    date: str
    self_driving: tuple[str, int] | None = None  # (plan text, cost per vehicle)
    taxi: tuple[str, int] | None = None
    flights: tuple[dict[str, Any], ...] = ()  # rows with Flight Number, Price, DepTime, ArrTime


@dataclass(frozen=True)
class CityRows:
    """A city's rows as its search tools list them (official column names, file order)."""

    accommodations: Sequence[dict[str, Any]]
    restaurants: Sequence[dict[str, Any]]
    attractions: Sequence[dict[str, Any]]


@dataclass
class Solution:
    plan: list[dict[str, Any]]
    cost: float
    cities: list[str]
    mode: str  # "self-driving" | "taxi/flight"


def constraint(query: dict[str, Any], key: str) -> Any:
    """A local constraint of a structured query (official nesting or flat keys; "None" = absent)."""
    local = query.get("local_constraint")
    if isinstance(local, dict) and key in local:
        value = local[key]
    else:
        value = query.get(key)
    return None if value in (None, "None", "", []) else value


def people_of(query: dict[str, Any]) -> int:
    return int(query.get("people_number") or query.get("people number") or 1)


def safe_first_rows(rows: Sequence[dict[str, Any]], name_key: str) -> list[dict[str, Any]]:
    """Rows that the evaluator will find as themselves: the first row whose name contains their
    name (so a short name inside a longer earlier one is skipped), without characters that would
    break the plan's item lists. Names are kept verbatim, trailing spaces included (the official
    data has such names, and a plan that copies them passes)."""
    out = []
    for i, row in enumerate(rows):
        name = str(row[name_key])
        if not name.strip() or any(c in name for c in _UNSAFE_NAME_CHARS):
            continue
        if all(name not in str(earlier[name_key]) for earlier in rows[:i]):
            out.append(row)
    return out


def accommodation_ok(row: dict[str, Any], query: dict[str, Any], nights: int) -> bool:
    rule, room = constraint(query, "house rule"), constraint(query, "room type")
    if rule and f"No {rule}" in str(row["house_rules"]):
        return False
    room_type = str(row["room type"])
    if room == "not shared room" and room_type == "Shared room":
        return False
    if room in ROOM_TYPES and room_type != ROOM_TYPES[room]:
        return False
    return float(row["minimum nights"]) <= nights


def stay_cost(row: dict[str, Any], people: int, nights: int) -> float:
    """Rooms needed for the party at the listing's maximum occupancy, times the nights."""
    return float(row["price"]) * math.ceil(people / max(1, int(float(row["maximum occupancy"])))) * nights


def choose_transport(
    legs: Sequence[LegOptions], query: dict[str, Any]
) -> tuple[str, list[tuple[str, float]]] | None:
    """The cheapest allowed transport for every leg: ("self-driving" | "taxi/flight",
    [(plan text, cost for the party)])."""
    people, banned = people_of(query), constraint(query, "transportation")
    families = []
    if banned != "no self-driving" and all(leg.self_driving for leg in legs):
        cars = math.ceil(people / 5)
        families.append(("self-driving", [(leg.self_driving[0], leg.self_driving[1] * cars) for leg in legs]))
    mixed = []
    for leg in legs:
        options = []
        if leg.taxi:
            options.append((leg.taxi[0], leg.taxi[1] * math.ceil(people / 4)))
        if banned != "no flight":
            options += [
                (flight_text(f, leg.origin, leg.destination), float(f["Price"]) * people) for f in leg.flights
            ]
        if not options:
            break
        mixed.append(min(options, key=lambda o: o[1]))
    else:
        families.append(("taxi/flight", mixed))
    if not families:
        return None
    return min(families, key=lambda f: sum(cost for _, cost in f[1]))


def flight_text(row: dict[str, Any], origin: str, destination: str) -> str:
    return (
        f"Flight Number: {row['Flight Number']}, from {origin} to {destination}, "
        f"Departure Time: {row['DepTime']}, Arrival Time: {row['ArrTime']}"
    )


def drive_plan_text(line: str) -> str:
    """A DistanceMatrix line as a plan's transportation ("Self-driving, from A to B, ...")."""
    line = line.split(" (cost per vehicle", 1)[0]
    return line[:1].upper() + line[1:]


@dataclass
class _MealSlot:
    day: int
    meal: str
    city: str
    optional: bool
    row: dict[str, Any] | None = None


def _meal_slots(cities: Sequence[str]) -> list[_MealSlot]:
    slots = [_MealSlot(0, "dinner", cities[0], True)]
    for k, city in enumerate(cities):
        stay, travel = 2 * k + 1, 2 * k + 2
        slots += [_MealSlot(stay, meal, city, False) for meal in ("breakfast", "lunch", "dinner")]
        slots.append(_MealSlot(travel, "breakfast", city, True))
        if k + 1 < len(cities):
            slots.append(_MealSlot(travel, "dinner", cities[k + 1], True))
        else:
            slots.append(_MealSlot(travel, "lunch", city, True))
    return slots


def _assign_meals(
    slots: list[_MealSlot], restaurants: dict[str, list[dict[str, Any]]], cuisines: Sequence[str]
) -> bool:
    """Cheapest distinct restaurants per slot, after covering each required cuisine once."""
    used: dict[str, set[str]] = {city: set() for city in restaurants}
    for cuisine in cuisines:
        if any(s.row is not None and cuisine in str(s.row["Cuisines"]) for s in slots):
            continue
        best = None
        for slot in slots:
            if slot.row is not None:
                continue
            for row in restaurants[slot.city]:
                if cuisine in str(row["Cuisines"]) and row["Name"] not in used[slot.city]:
                    key = (float(row["Average Cost"]), slot.optional)  # prefer a required slot
                    if best is None or key < best[0]:
                        best = (key, slot, row)
                    break  # rows are sorted by cost
        if best is None:
            return False
        best[1].row = best[2]
        best[1].optional = False  # it carries a cuisine: keep it
        used[best[1].city].add(best[2]["Name"])
    for slot in slots:
        if slot.row is None:
            row = next((r for r in restaurants[slot.city] if r["Name"] not in used[slot.city]), None)
            if row is None:
                return False
            slot.row = row
            used[slot.city].add(row["Name"])
    return True


def solve(
    query: dict[str, Any], cities: Sequence[str], city_rows: dict[str, CityRows], legs: Sequence[LegOptions]
) -> Solution | None:
    """A plan visiting `cities` in order over the legs org->c1->...->ck->org, within the query's
    budget when it has one (None: cheapest full plan); None when no plan passes every check."""
    people, org = people_of(query), query["org"]
    days = int(query["days"])
    if days != 2 * len(cities) + 1 or len(legs) != len(cities) + 1:
        return None
    transport = choose_transport(legs, query)
    if transport is None:
        return None
    stays, restaurants, attractions = {}, {}, {}
    for city in cities:
        rows = city_rows[city]
        options = [
            r
            for r in safe_first_rows(rows.accommodations, "NAME")
            if accommodation_ok(r, query, NIGHTS_PER_CITY)
        ]
        restaurants[city] = sorted(
            safe_first_rows(rows.restaurants, "Name"), key=lambda r: float(r["Average Cost"])
        )
        attractions[city] = safe_first_rows(rows.attractions, "Name")
        if not options or not attractions[city]:
            return None
        stays[city] = min(options, key=lambda r: stay_cost(r, people, NIGHTS_PER_CITY))
    slots = _meal_slots(cities)
    if not _assign_meals(slots, restaurants, constraint(query, "cuisine") or []):
        return None
    fixed = sum(c for _, c in transport[1])
    fixed += sum(stay_cost(stays[c], people, NIGHTS_PER_CITY) for c in cities)

    def total() -> float:
        return fixed + sum(float(s.row["Average Cost"]) * people for s in slots)

    budget = query.get("budget")
    for slot in sorted((s for s in slots if s.optional), key=lambda s: -float(s.row["Average Cost"])):
        if budget is None or total() <= float(budget):
            break
        slots.remove(slot)
    if budget is not None and total() > float(budget):
        return None
    plan = _assemble(org, cities, days, transport[1], stays, slots, attractions)
    return Solution(plan, total(), list(cities), transport[0])


def _assemble(
    org: str,
    cities: Sequence[str],
    days: int,
    transport: list[tuple[str, float]],
    stays: dict[str, dict[str, Any]],
    slots: list[_MealSlot],
    attractions: dict[str, list[dict[str, Any]]],
) -> list[dict[str, Any]]:
    route = [org, *cities, org]
    plan = []
    for d in range(days):
        k = d // 2  # the city index this day belongs to
        day: dict[str, Any] = {"days": d + 1}
        if d % 2 == 0:  # travel day route[k] -> route[k+1]
            day["current_city"] = f"from {route[k]} to {route[k + 1]}"
            day["transportation"] = transport[k][0]
            day["attraction"] = "-"
        else:
            city = cities[k]
            day["current_city"] = city
            day["transportation"] = "-"
            picks = attractions[city][:ATTRACTIONS_PER_STAY_DAY]
            day["attraction"] = "".join(f"{a['Name']}, {city};" for a in picks)
        for meal in ("breakfast", "lunch", "dinner"):
            slot = next((s for s in slots if s.day == d and s.meal == meal), None)
            day[meal] = f"{slot.row['Name']}, {slot.city}" if slot else "-"
        stay_city = cities[k] if d < days - 1 else None  # a travel day sleeps in its arrival city
        day["accommodation"] = f"{stays[stay_city]['NAME']}, {stay_city}" if stay_city else "-"
        plan.append({key: day[key] for key in ("days", *PLAN_FIELDS)})  # the official key order
    return plan
