"""New TravelPlanner-style training queries from the database, each with a budget proven feasible.

The benchmark permits training on queries generated from its database. A query follows the
official recipe: origin city, a destination city (3 days) or state with 2 / 3 cities (5 / 7 days),
dates in March 2022, and local constraints by level (easy: budget only and one traveller; medium:
one of house rule, cuisine, room type; hard: three of those and transportation). The cities are
drawn in route order like the annotators' reference information. The solver then builds the full
plan over those cities; only queries it can plan are kept, and the budget is that plan's cost
times 1.15-1.6, rounded up to $100, so a plan within it exists. The text is written from the
fields with a few phrasings that sandbox.benchmarks.travelplanner.query_text reads back.

Same seed -> the same queries: every query draws from its own random stream (seed, index, attempt).
"""

from __future__ import annotations

import datetime as dt
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.benchmarks.travelplanner.database import Database
from sandbox.benchmarks.travelplanner.query_text import CUISINES, level_of
from sandbox.benchmarks.travelplanner.reference import route_legs
from sandbox.benchmarks.travelplanner.solver import CityRows, LegOptions, drive_plan_text, solve
from sandbox.benchmarks.travelplanner.tools import drive_text

LEVELS = ("easy", "medium", "hard")
DAYS = (3, 5, 7)
HOUSE_RULES = ("smoking", "parties", "children under 10", "visitors", "pets")
ROOM_TYPES = ("entire room", "private room", "shared room", "not shared room")
TRANSPORT = ("no flight", "no self-driving")
BUDGET_SLACK = (1.15, 1.6)
MAX_ATTEMPTS = 60
YEAR, MONTH = 2022, 3


@dataclass(frozen=True)
class GeneratedQuery:
    query: dict[str, Any]  # structured, official field names
    cities: list[str]  # the reference cities in route order
    solution_cost: float  # the solver's plan cost: proves the budget feasible


def _legs(db: Database, query: dict[str, Any], cities: Sequence[str]) -> list[LegOptions]:
    legs = []
    for origin, dest, date in route_legs(query, cities):
        drives = [drive_text(db, origin, dest, mode) for mode in ("self-driving", "taxi")]
        costs = [db.drive_cost(origin, dest, mode) for mode in ("self-driving", "taxi")]
        legs.append(
            LegOptions(
                origin,
                dest,
                date,
                *[(drive_plan_text(t), c) if t else None for t, c in zip(drives, costs)],
                tuple(db.flights(origin, dest, date)),
            )
        )
    return legs


def plan_over(db: Database, query: dict[str, Any], cities: Sequence[str]):
    """The solver's plan for `query` over `cities` with rows straight from the database."""
    rows = {c: CityRows(db.accommodations(c), db.restaurants(c), db.attractions(c)) for c in cities}
    return solve(query, list(cities), rows, _legs(db, query, cities))


def _local_constraint(rng: random.Random, level: str) -> dict[str, Any]:
    kinds = {
        "easy": [],
        "medium": rng.sample(["house rule", "cuisine", "room type"], 1),
        "hard": rng.sample(["house rule", "cuisine", "room type", "transportation"], 3),
    }[level]
    values = {
        "house rule": lambda: rng.choice(HOUSE_RULES),
        "cuisine": lambda: rng.sample(CUISINES, 2 if level == "medium" else rng.randint(2, 4)),
        "room type": lambda: rng.choice(ROOM_TYPES),
        "transportation": lambda: rng.choice(TRANSPORT),
    }
    return {
        k: (values[k]() if k in kinds else None)
        for k in ("house rule", "cuisine", "room type", "transportation")
    }


class _RouteGraph:
    """Which cities can host a stay and which ordered pairs are drivable (the distance table is
    sparse, so routes are drawn along it rather than at random)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.hosts = {
            c for c in db.cities if db.accommodations(c) and db.attractions(c) and len(db.restaurants(c)) >= 8
        }
        self.drivable = {pair for pair, route in db.routes.items() if route.drivable}

    def next_stops(self, origin: str, options: Sequence[str]) -> list[str]:
        return [c for c in options if (origin, c) in self.drivable]

    def route(self, rng: random.Random, org: str, options: Sequence[str], k: int) -> list[str] | None:
        """k distinct cities from `options`, drivable org -> c1 -> ... -> ck -> org, drawn at random."""
        cities: list[str] = []
        for _ in range(k):
            here = cities[-1] if cities else org
            nxt = [c for c in self.next_stops(here, options) if c not in cities and c != org]
            if len(cities) == k - 1:
                nxt = [c for c in nxt if (c, org) in self.drivable]
            if not nxt:
                return None
            cities.append(rng.choice(nxt))
        return cities


def _draw(
    graph: _RouteGraph, rng: random.Random, level: str, days: int
) -> tuple[dict[str, Any], list[str]] | None:
    """One candidate query (budget not yet set) and its cities, or None for a dead draw."""
    db = graph.db
    org = rng.choice(db.cities)
    k = (days - 1) // 2
    if days == 3:
        options = sorted(graph.hosts)
        dest = None
    else:
        states = [
            s
            for s in db.states
            if s != db.state_of(org) and len([c for c in db.cities_in_state(s) if c in graph.hosts]) >= k
        ]
        if not states:
            return None
        dest = rng.choice(states)
        options = [c for c in db.cities_in_state(dest) if c in graph.hosts]
    cities = graph.route(rng, org, options, k)
    if cities is None:
        return None
    start = dt.date(YEAR, MONTH, rng.randint(1, 31 - days + 1))
    local = _local_constraint(rng, level)
    query = {
        "org": org,
        "dest": dest or cities[0],
        "days": days,
        "visiting_city_number": k,
        "date": [(start + dt.timedelta(days=i)).isoformat() for i in range(days)],
        "people_number": 1 if level == "easy" else rng.randint(2, 8),
        "local_constraint": local,
        "budget": None,
        "query": "",
        "level": level_of(local),
    }
    return query, cities


def generate_query(
    db: Database,
    seed: int,
    index: int,
    level: str,
    days: int,
    graph: _RouteGraph | None = None,
    stream: str = "train",
) -> GeneratedQuery | None:
    """The index-th generated query of a seed and stream (None when MAX_ATTEMPTS draws found no
    plan); different streams ("train", "dev") never share random draws."""
    graph = graph or _RouteGraph(db)
    for attempt in range(MAX_ATTEMPTS):
        rng = random.Random(f"travelplanner-{stream}-{seed}-{index}-{attempt}")
        drawn = _draw(graph, rng, level, days)
        if drawn is None:
            continue
        query, cities = drawn
        solution = plan_over(db, query, cities)
        if solution is None:
            continue
        query["budget"] = int(math.ceil(solution.cost * rng.uniform(*BUDGET_SLACK) / 100.0) * 100)
        query["query"] = query_text(query, rng)
        return GeneratedQuery(query, cities, solution.cost)
    return None


def generate_queries(
    db: Database,
    n: int,
    seed: int = 0,
    levels: Sequence[str] = LEVELS,
    days: Sequence[int] = DAYS,
    stream: str = "train",
) -> list[GeneratedQuery]:
    """n queries cycling through levels x durations (balanced), skipping the rare unplannable slot."""
    out, graph = [], _RouteGraph(db)
    for i in range(n):
        generated = generate_query(
            db, seed, i, levels[i % len(levels)], days[(i // len(levels)) % len(days)], graph, stream
        )
        if generated is not None:
            out.append(generated)
    return out


# ------------------------------------------------------------------------------------ query text


def _ordinal(day: int) -> str:
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


_HOUSE_TEXT = {
    "smoking": "Our accommodation must allow smoking.",
    "parties": "We want to hold a small party, so the accommodation must allow parties.",
    "children under 10": "We travel with children under 10, so the accommodation must accept them.",
    "visitors": "Friends will drop by, so the accommodation must allow visitors.",
    "pets": "We are bringing our pets, so we need pet-friendly accommodation.",
}
_ROOM_TEXT = {
    "entire room": "We would like entire rooms.",
    "private room": "We would like private rooms.",
    "shared room": "A shared room is fine for us and keeps costs down.",
    "not shared room": "We want rooms that are not shared.",
}
_TRANSPORT_TEXT = {
    "no flight": "We do not want to take any flights.",
    "no self-driving": "We will not do any self-driving.",
}
_TEMPLATES = (
    "Please plan a {days}-day trip for {people} from {org} to {dest}, from {start} to {end}, {year}, "
    "with a budget of ${budget:,}.",
    "Can you create a {days}-day itinerary departing from {org} and visiting {dest} for {people}? "
    "The trip runs from {start} to {end}, {year}, and the budget is ${budget:,}.",
    "I need a travel plan for {people}, starting from {org} and heading to {dest} for {days} days, "
    "from {start} to {end}, {year}. The total budget is ${budget:,}.",
    "Could you design a {days}-day journey from {org} to {dest} for {people} between {start} and {end}, "
    "{year}? We can spend up to ${budget:,}.",
)


def query_text(query: dict[str, Any], rng: random.Random) -> str:
    """The natural-language query of a generated structured query (one of a few phrasings)."""
    people = query["people_number"]
    first, last = (dt.date.fromisoformat(query["date"][i]) for i in (0, -1))
    dest = query["dest"]
    if query["days"] > 3:
        dest = f"{query['visiting_city_number']} cities in {dest}"
    text = rng.choice(_TEMPLATES).format(
        days=query["days"],
        org=query["org"],
        dest=dest,
        year=first.year,
        budget=query["budget"],
        people="one person" if people == 1 else rng.choice([f"{people} people", f"a group of {people}"]),
        start=f"{first.strftime('%B')} {_ordinal(first.day)}",
        end=f"{last.strftime('%B')} {_ordinal(last.day)}",
    )
    local = query["local_constraint"]
    extra = []
    if local["house rule"]:
        extra.append(_HOUSE_TEXT[local["house rule"]])
    if local["cuisine"]:
        extra.append(f"We would love to try {_and(local['cuisine'])} cuisine.")
    if local["room type"]:
        extra.append(_ROOM_TEXT[local["room type"]])
    if local["transportation"]:
        extra.append(_TRANSPORT_TEXT[local["transportation"]])
    rng.shuffle(extra)
    return " ".join([text, *extra])
