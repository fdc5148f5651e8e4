"""TravelPlanner as a HiMAP domain: multi-city routes, travel days, one stay per city.

The task tuple is read from the visible query text (`query_text.parse_query_text`, the rules the
benchmark already uses for its training queries). Day slots follow the official trip shapes: 3
days = one city (departure, stay, return); 5 days = two cities and 7 days = three, each city two
days (arrive, stay), the last day back to the origin (`return`), every arrival after the first a
`travel` day. Slot cities are the query's destination (a state for 5- and 7-day trips): the
coordinator picks the cities (CitySearch) and gives each sub-goal its `city`, the `route` of a
travel day ("from A to B") and the city's `accommodation` (the same stay for all the city's nights,
so the minimum-nights rule is the coordinator's). A day is submitted in the official plan fields
(current_city, transportation, breakfast, attraction, lunch, dinner, accommodation; "-" for none);
Σ's items are those fields, one per item, one attraction per item (Σ's TravelPlanner pricing).
"""

from __future__ import annotations

import json
from typing import Any

from sandbox.benchmarks.travelplanner.himap.pricing import TravelPlannerPricing
from sandbox.benchmarks.travelplanner.plan_reader import PLAN_FIELDS
from sandbox.benchmarks.travelplanner.query_text import parse_query_text
from sandbox.benchmarks.travelplanner.text import is_filled
from sandbox.himap.domain import DaySlot, HimapDomain, SubGoal
from sandbox.tools.args import Param

# The coordinator fixes the trip-level choices, which in TravelPlanner include the stays (minimum
# nights) and which day covers which required cuisine, so it may search every kind of place.
_COORDINATOR_TOOLS = (
    "CitySearch",
    "FlightSearch",
    "DistanceMatrix",
    "AccommodationSearch",
    "RestaurantSearch",
    "AttractionSearch",
)
_EXECUTOR_TOOLS = (
    "FlightSearch",
    "DistanceMatrix",
    "AccommodationSearch",
    "RestaurantSearch",
    "AttractionSearch",
)
_FIELD_HELP = {
    "current_city": 'the city, or "from A to B" on a travel day',
    "transportation": '"Flight Number: F123, from A to B, ..." or "Self-driving, from A to B, ...", or "-"',
    "breakfast": '"Name, City" or "-"',
    "attraction": '"Name, City;Name, City;" or "-"',
    "lunch": '"Name, City" or "-"',
    "dinner": '"Name, City" or "-"',
    "accommodation": '"Name, City" or "-" (the last day)',
}


class TravelPlannerDomain(HimapDomain):
    """One visible TravelPlanner query over the benchmark's database and tools."""

    name = "travelplanner"
    transport_modes = ("flight", "self-driving", "taxi")
    item_description = (
        'plan fields of your day, one per item: {"field": "lunch", "value": "Name, City"}; one '
        "attraction per item; a transportation item may carry current_city"
    )
    subgoal_fields = (
        Param("route", "string", 'a travel day\'s "from A to B"'),
        Param("accommodation", "string", 'the stay for the city\'s nights, "Name, City"'),
        Param("meals", "string", 'the meals the day has, e.g. "breakfast, lunch, dinner"'),
        Param("cuisines", "string", 'required cuisines the day\'s meals must cover, e.g. "Chinese, Indian"'),
    )

    # The coordinator searches every city's restaurants once; every executor is shown them in the
    # shared part of its prompt (a city's restaurants serve two or three days; its sights one).
    shared_lookups = ("RestaurantSearch",)

    def __init__(self, visible: dict[str, Any], benchmark: Any):
        self.visible, self.benchmark = visible, benchmark
        db = benchmark.db
        self.query = parse_query_text(str(visible["query"]), {c: db.state_of(c) for c in db.cities})

    def task(self) -> dict[str, Any]:
        q = self.query
        return {
            "origin": q["org"],
            "destination": q["dest"],
            "days": q["days"],
            "cities_to_visit": q["visiting_city_number"],
            "dates": list(q["date"]),
            "people": q["people_number"],
            "budget": float(q["budget"]),
            "hard_constraints": {k: v for k, v in (q.get("local_constraint") or {}).items() if v},
            "soft_preferences": {},
        }

    def request(self) -> list[dict[str, str]]:
        return self.benchmark.prompt(self.visible).messages[1:]

    def instruction(self) -> str:
        return str(self.visible["query"])

    def slots(self) -> list[DaySlot]:
        days, dates, dest = self.query["days"], list(self.query["date"]), self.query["dest"]
        out = []
        for d in range(1, days + 1):
            kind = "departure" if d == 1 else "return" if d == days else "travel" if d % 2 == 1 else "stay"
            city = self.query["org"] if kind == "return" else dest  # a day's city: where it ends
            out.append(DaySlot(d, dates[d - 1] if d <= len(dates) else None, city, kind))
        return out

    def complete_subgoals(
        self, goals: list[dict[str, Any]], earlier: dict[int, SubGoal]
    ) -> list[dict[str, Any]]:
        """A moving day without a city arrives where the next day is; a moving day's route runs
        from the previous day's city (day 1: the origin); a day other than the last without a
        stay sleeps at the stay named by another day in its city."""
        slots = {s.day: s for s in self.slots()}
        known = {d: {"city": g.city, "day_type": g.day_type, **g.extra} for d, g in earlier.items()}
        by_day = {**known, **{int(g["day"]): dict(g) for g in goals}}
        kind = {d: g.get("day_type") or slots[d].day_type for d, g in by_day.items() if d in slots}
        for d in sorted(by_day, reverse=True):  # from the end: the next day is complete
            nxt = by_day.get(d + 1, {})
            if not by_day[d].get("city") and kind.get(d) in ("departure", "travel") and nxt.get("city"):
                by_day[d]["city"] = nxt["city"]
        stays = {
            g["city"]: g["accommodation"] for g in by_day.values() if g.get("city") and g.get("accommodation")
        }
        out = []
        for g in goals:
            d = int(g["day"])
            g = by_day[d]
            city = g.get("city") or (slots[d].city if d in slots else None)
            if kind.get(d) != "stay" and not g.get("route") and city:
                prev = self.query["org"] if d == 1 else by_day.get(d - 1, {}).get("city")
                g["route"] = f"from {prev} to {city}" if prev else None
            if d < self.query["days"] and not g.get("accommodation") and city in stays:
                g["accommodation"] = stays[city]
            out.append({k: v for k, v in g.items() if v is not None})
        return out

    def world(self) -> Any:
        return self.benchmark.world_for(self.visible)

    def coordinator_tools(self) -> tuple[str, ...]:
        return _COORDINATOR_TOOLS

    def executor_tools(self) -> tuple[str, ...]:
        return _EXECUTOR_TOOLS

    def pricing(self) -> Any:

        return TravelPlannerPricing(self.query, self.benchmark.db, self.benchmark.eval_mode)

    def visited(self) -> set[str]:
        return set()  # TravelPlanner has no visit history

    def day_fields(self) -> tuple[Param, ...]:
        return tuple(Param(f, "string", _FIELD_HELP[f], required=f == "current_city") for f in PLAN_FIELDS)

    def day_problem(self, goal: SubGoal, day: dict[str, Any]) -> str | None:
        return None if is_filled(day.get("current_city")) else "current_city must name the day's city"

    def day_items(self, goal: SubGoal, day: dict[str, Any]) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for field in PLAN_FIELDS:
            value = day.get(field, "-")
            if field == "current_city" or not is_filled(value):
                continue
            if field == "attraction":
                items += [{"field": field, "value": a.strip()} for a in value.split(";") if a.strip()]
            elif field == "transportation":
                items.append({"field": field, "value": value, "current_city": day["current_city"]})
            else:
                items.append({"field": field, "value": value})
        return [{**item, "day": goal.day} for item in items]

    def merge(self, days: dict[int, dict[str, Any]]) -> str:
        plan = []
        for slot in self.slots():
            day = days.get(slot.day) or {}
            plan.append({"days": slot.day, **{f: day.get(f) or "-" for f in PLAN_FIELDS}})
        return json.dumps(plan, ensure_ascii=False)

    def executor_brief(self, goal: SubGoal) -> str:
        # The sub-goal already carries the route and the stay, and the executor's system message
        # that no venue may repeat: the brief says only what the day type means.
        lines = {
            "departure": f"Travel {self.query['org']} -> {goal.city} today.",
            "travel": f"Move to {goal.city} today.",
            "return": f"Go back to {self.query['org']} today.",
            "stay": f"A full day in {goal.city}.",
        }
        text = lines.get(goal.day_type, "")
        return text + (" The accommodation is tonight's stay." if goal.extra.get("accommodation") else "")
