"""Seeded random TravelPlanner queries and plans, for agreement tests against the official harness.

A plan starts near-valid (a closed route through cities of the database, real restaurants,
attractions, stays and routes) and then receives a few random edits drawn from the corners where the
official reading is peculiar: "(State)" suffixes, attraction lists without the trailing ";",
lower-case "flight", bare "Taxi", name prefixes that match several rows, "-"/""/None fields, missing
keys, padding entries, cities outside the list, and so on. Most plans therefore fail something, in
many different ways, which is what an agreement test needs.
"""

import random
from typing import Any

from sandbox.benchmarks.travelplanner import Database
from sandbox.benchmarks.travelplanner.hard import HOUSE_RULES, ROOM_TYPES

CUISINES = ("Chinese", "American", "Italian", "Mexican", "Indian", "Mediterranean", "French")
MEALS = ("breakfast", "lunch", "dinner")
FIELDS = ("current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")


_LINKS: dict[int, dict[str, list[str]]] = {}


def _linked(db: Database) -> dict[str, list[str]]:
    """City -> the cities with a drivable route or a flight to it (computed once per database)."""
    if id(db) not in _LINKS:
        links: dict[str, list[str]] = {}
        for (origin, dest), route in db.routes.items():
            if route.drivable:
                links.setdefault(dest, []).append(origin)
        for row in db.flight_rows:
            links.setdefault(row["DestCityName"], []).append(row["OriginCityName"])
        _LINKS[id(db)] = {dest: sorted(set(origins)) for dest, origins in links.items()}
    return _LINKS[id(db)]


def random_query(rng: random.Random, db: Database) -> dict[str, Any]:
    """A structured query with a route of 1-3 visited cities (3-day trips visit one city)."""
    days = rng.choice((3, 5, 7))
    if days == 3:
        dest, visit = rng.choice(db.cities), 1
        near = dest
    else:
        states = [s for s in db.states if len(db.cities_in_state(s)) >= 3]
        dest, visit = rng.choice(states), (2 if days == 5 else 3)
        near = rng.choice(db.cities_in_state(dest))
    # Mostly an origin with a drive or a flight to the destination, so that routes often exist.
    linked = _linked(db).get(near, [])
    org = rng.choice(linked if linked and rng.random() < 0.8 else db.cities)
    constraints = {"house rule": None, "cuisine": None, "room type": None, "transportation": None}
    for key in rng.sample(list(constraints), rng.choice((0, 0, 1, 3, 4))):
        constraints[key] = {
            "house rule": lambda: rng.choice(HOUSE_RULES),
            "cuisine": lambda: rng.sample(CUISINES, rng.randint(1, 4)),
            "room type": lambda: rng.choice(list(ROOM_TYPES)),
            "transportation": lambda: rng.choice(("no flight", "no self-driving")),
        }[key]()
    return {
        "org": org,
        "dest": dest,
        "days": days,
        "visiting_city_number": visit,
        "date": [f"2022-03-{10 + d:02d}" for d in range(days)],
        "people_number": rng.randint(1, 8),
        "local_constraint": constraints,
        "budget": rng.choice((500, 1500, 3000, 6000, 12000, 30000)),
        "query": "random",
        "level": rng.choice(("easy", "medium", "hard")),
    }


def _item(
    rng: random.Random, db: Database, kind: str, city: str, used: set[str] | None = None, nights: int = 99
) -> str:
    """ "Name, City" of a random row; mostly a fresh name (`used`) and a stay whose minimum nights
    fit `nights`, so that base plans often pass."""
    column = "NAME" if kind == "accommodations" else "Name"
    rows = db.rows(kind, city)
    if rng.random() < 0.9:
        rows = [
            r
            for r in rows
            if (used is None or str(r[column]).strip() not in used)
            and (kind != "accommodations" or r["minimum nights"] <= nights)
        ]
    if not rows:
        return "-"
    name = str(rng.choice(rows)[column]).strip()
    if used is not None:
        used.add(name)
    if rng.random() < 0.05:
        name = name[: max(1, len(name) // 3)]  # a prefix: may match several rows
    return f"{name}, {city}"


def _transport(rng: random.Random, db: Database, origin: str, dest: str, mode: str) -> str:
    flights = db.flights(origin, dest)
    if mode == "flight" and flights:
        f = rng.choice(flights)
        return (
            f"Flight Number: {f['Flight Number']}, from {origin} to {dest}, "
            f"Departure Time: {f['DepTime']}, Arrival Time: {f['ArrTime']}"
        )
    route = db.route(origin, dest)
    label = "Taxi" if mode == "taxi" else "Self-driving"
    if route is None:
        return f"{label}, from {origin} to {dest}, no valid information."
    return (
        f"{label}, from {origin} to {dest}, duration: {route.duration}, distance: {route.distance}, cost: 1"
    )


def _route(rng: random.Random, db: Database, query: dict) -> list[str]:
    """The city of each night: visited cities in consecutive runs."""
    days, visit = query["days"], query["visiting_city_number"]
    if days == 3:
        cities = [query["dest"]]
    else:
        pool = db.cities_in_state(query["dest"])
        cities = rng.sample(pool, min(visit, len(pool)))
    nights = days - 1
    cuts = sorted(rng.sample(range(1, nights), len(cities) - 1)) if len(cities) > 1 else []
    bounds = [0, *cuts, nights]
    return [cities[k] for k in range(len(cities)) for _ in range(bounds[k + 1] - bounds[k])]


def random_plan(rng: random.Random, db: Database, query: dict) -> list[Any]:
    """A near-valid plan for `query`, then 0-3 random edits."""
    stay = _route(rng, db, query)
    where = [query["org"], *stay, query["org"]]
    mode = rng.choice(("flight", "self-driving", "taxi"))
    used: set[str] = set()
    plan: list[Any] = []
    for d in range(query["days"]):
        before, after = where[d], where[d + 1]
        travel = before != after
        city = after
        day = {
            "days": d + 1,
            "current_city": f"from {before} to {after}" if travel else city,
            "transportation": _transport(rng, db, before, after, mode) if travel else "-",
        }
        for meal in MEALS:
            day[meal] = _item(rng, db, "restaurants", rng.choice((before, after)) if travel else city, used)
        n = rng.randint(1, 3)
        day["attraction"] = "".join(_item(rng, db, "attractions", city, used) + ";" for _ in range(n))
        last = d == query["days"] - 1
        nights = sum(1 for c in where[d + 1 : -1] if c == city) if not last else 0
        day["accommodation"] = "-" if last else _item(rng, db, "accommodations", city, nights=nights)
        if d > 0 and not travel and not last and rng.random() < 0.8:
            day["accommodation"] = plan[-1]["accommodation"]  # a stay of several nights
        plan.append(day)
    for _ in range(rng.choice((0, 1, 1, 2, 3))):
        _edit(rng, db, query, plan)
    return plan


def _edit(rng: random.Random, db: Database, query: dict, plan: list[Any]) -> None:
    """One random edit of the plan (in place)."""
    days = [p for p in plan if isinstance(p, dict) and p]
    if not days:
        return
    day = rng.choice(days)
    key = rng.choice(FIELDS)
    value = day.get(key)
    choice = rng.randrange(16)
    if choice == 0:
        day[key] = rng.choice(("-", "", None))
    elif choice == 1:
        day.pop(key, None)
    elif choice == 2 and isinstance(value, str) and ", " in value:
        state = db.state_of(value.rsplit(", ", 1)[1].rstrip(";")) or "Texas"
        day[key] = value.replace(";", f" ({state});") if key == "attraction" else f"{value} ({state})"
    elif choice == 3 and key == "attraction" and isinstance(value, str):
        day[key] = value.rstrip(";")
    elif choice == 4:
        other = rng.choice(days)
        day[key] = other.get(key, "-")
    elif choice == 5:
        city = rng.choice(db.cities)
        kind = {"attraction": "attractions", "accommodation": "accommodations"}.get(key, "restaurants")
        day[key] = _item(rng, db, kind, city) + (";" if key == "attraction" else "")
    elif choice == 6 and isinstance(value, str):
        day[key] = value.replace("Flight Number: ", rng.choice(("flight number: ", "Flight ", "flight ")))
    elif choice == 7:
        a, b = rng.choice(db.cities), rng.choice(db.cities)
        day["transportation"] = rng.choice(
            (
                "Taxi",
                f"Self-driving from {a} to {b}",
                "flight",
                f"Taxi, from {a} to {b}",
                f"Flight Number: F0000000, from {a} to {b}",
            )
        )
    elif choice == 8:
        day["current_city"] = rng.choice(
            (
                f"from {rng.choice(db.cities)} to {query['org']}",
                rng.choice(db.cities),
                f"{rng.choice(db.cities)} (Some State)",
                "from Nowhere",
                "Atlantis",
            )
        )
    elif choice == 9:
        plan.extend({} for _ in range(rng.randint(1, 3)))
    elif choice == 10 and len(plan) > 1:
        del plan[rng.randrange(len(plan))]
    elif choice == 11:
        day["notes"] = rng.choice(("extra", "-", "", None))
    elif choice == 12:
        plan[rng.randrange(len(plan))] = rng.choice(({}, None, "day", {"days": 9}))
    elif choice == 13:
        query["people_number"] = rng.randint(1, 9)
        query["budget"] = rng.choice((100, 2000, 50000))
    elif choice == 14 and key in MEALS:
        day[key] = _item(rng, db, "restaurants", query["org"])
    elif choice == 15:
        day["accommodation"] = _item(
            rng, db, "accommodations", rng.choice((query["org"], day.get("current_city", "")))
        )
