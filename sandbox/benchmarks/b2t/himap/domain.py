"""Behaviour2Trip as a HiMAP domain: a round trip origin -> destination -> origin, one city.

Day types: day 1 `departure` (outbound train/flight, then the rest of the day in the city),
middle days `stay`, the last day `return`. Trip-level decisions belong to the coordinator: the
intercity mode (`transport_mode`: train | flight, what Σ locks) and the hotel, because a B2T day
starts where the previous night ended (the evaluator times a day's first local leg from last
night's hotel), which an isolated executor cannot know. So the coordinator may search hotels and
intercity services, and each sub-goal names `hotel` (tonight's check-in; on the return day, last
night's), `start_hotel` (where the morning starts, when it differs) and `hotel_info` (its search
result: coordinates and price, so the executor can time the day from it). Executors search the rest
(weather, the day's train/flight, restaurants, attractions, entertainment, MapGuide) and submit
their day's activities with the day's weather and city information; `merge` writes the plan in the
benchmark's answer format, day fields from the sub-goals.
"""

from __future__ import annotations

import json
from typing import Any

from sandbox.benchmarks.b2t.himap.instruction_parser import task_tuple
from sandbox.benchmarks.b2t.himap.pricing import B2TPricing, visited_from_trajectory
from sandbox.benchmarks.b2t.plan import read_plan
from sandbox.benchmarks.b2t.prompt import build_prompt
from sandbox.benchmarks.b2t.tools.poi_search import hotel_item
from sandbox.benchmarks.b2t.tools.registry import B2TTools
from sandbox.himap.domain import DaySlot, HimapDomain, SubGoal
from sandbox.tools.args import Param

_COORDINATOR_TOOLS = (
    "AccommodationSearch",
    "TrainSearch",
    "FlightSearch",
    "RestaurantSearch",
    "AttractionSearch",
    "EntertainmentSearch",
)
_EXECUTOR_TOOLS = (
    "AccommodationSearch",
    "AttractionSearch",
    "EntertainmentSearch",
    "RestaurantSearch",
    "FlightSearch",
    "TrainSearch",
    "WeatherSearch",
    "MapGuide",
)


class B2TDomain(HimapDomain):
    """One visible B2T instance over the benchmark's world."""

    name = "b2t"
    transport_modes = ("train", "flight")
    item_description = "activities of your day in the plan format (one object per activity)"
    subgoal_fields = (
        Param("hotel", "string", "the hotel checked into tonight (return day: last night's hotel)"),
        Param("start_hotel", "string", "where the day starts, if not `hotel` (last night's hotel)"),
    )  # the protocol adds `hotel_info`, the hotel's search record, for the executor
    # The coordinator searches the places around its hotel once; every executor is shown them.
    shared_lookups = ("RestaurantSearch", "AttractionSearch", "EntertainmentSearch")

    def __init__(self, visible: dict[str, Any], world: Any):
        self.visible = visible
        self._world = world
        self._task = task_tuple(visible)

    def task(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._task))  # a copy the caller may change

    def request(self) -> list[dict[str, str]]:
        return build_prompt(self.visible, None).messages[1:]

    def instruction(self) -> str:
        return str(self.visible["instruction"])

    def slots(self) -> list[DaySlot]:
        t = self._task
        last = t["days"]
        return [
            DaySlot(
                d,
                t["dates"][d - 1],
                t["destination"],
                "departure" if d == 1 else "return" if d == last else "stay",
            )
            for d in range(1, last + 1)
        ]

    def world(self) -> Any:
        return B2TTools(self._world)

    def coordinator_tools(self) -> tuple[str, ...]:
        return _COORDINATOR_TOOLS

    def executor_tools(self) -> tuple[str, ...]:
        return _EXECUTOR_TOOLS

    def _query(self) -> dict[str, Any]:
        t = self._task
        keys = ("origin", "destination", "start_date", "days", "people", "budget")
        return {k: t[k] for k in keys}

    def pricing(self) -> Any:

        return B2TPricing.from_ground_truth(self._world, {"query": self._query()})

    def visited(self) -> set[str]:

        return set(visited_from_trajectory(self.visible.get("trajectory") or [], self._task["destination"]))

    def day_fields(self) -> tuple[Param, ...]:
        return (
            Param("activities", "array", "the day's activities in time order", required=True),
            Param("weather", "object", 'the day\'s weather {"condition", "max_temp", "min_temp"}'),
            Param("city_info", "string", "a line about the city for the day"),
        )

    def _plan_day(self, goal: SubGoal, day: dict[str, Any]) -> dict[str, Any]:
        return {
            "day": goal.day,
            "date": goal.date,
            "city": goal.city,
            "weather": day.get("weather"),
            "city_info": day.get("city_info"),
            "activities": day.get("activities"),
        }

    def day_problem(self, goal: SubGoal, day: dict[str, Any]) -> str | None:
        if not isinstance(day.get("activities"), list) or not day["activities"]:
            return "activities must be a non-empty list of activity objects"
        read = read_plan(json.dumps([self._plan_day(goal, day)], ensure_ascii=False))
        return None if read.ok else f"the day cannot be read as a plan day: {read.reason}"

    def day_items(self, goal: SubGoal, day: dict[str, Any]) -> list[dict[str, Any]]:
        return [{**a, "day": goal.day} for a in day.get("activities") or [] if isinstance(a, dict)]

    def merge(self, days: dict[int, dict[str, Any]]) -> str:
        plan = []
        for slot in self.slots():
            goal = SubGoal(slot.day, slot.city, None, slot.day_type, date=slot.date)
            day = days.get(slot.day)
            plan.append(self._plan_day(goal, day) if day else {**self._plan_day(goal, {}), "activities": []})
        return json.dumps(plan, ensure_ascii=False)

    def subgoal_details(self, goal: SubGoal) -> dict[str, Any] | str:

        details = {}
        for key in ("hotel", "start_hotel"):
            name = goal.extra.get(key)
            row = self._world.find_poi("hotel", goal.city, name) if name else None
            if name and row is None:
                return f"{key} {name!r} is not a hotel in {goal.city}"
            if key == "hotel" and row is not None:
                details["hotel_info"] = hotel_item(row)
        return details

    def executor_brief(self, goal: SubGoal) -> str:
        t = self._task
        hotel, start = goal.extra.get("hotel"), goal.extra.get("start_hotel") or goal.extra.get("hotel")
        mode = f" by {goal.transport_mode}" if goal.transport_mode else ""
        if goal.day_type == "departure":
            lines = [f"Travel {t['origin']} -> {goal.city}{mode} this morning; the day starts at arrival."]
        else:
            lines = [f"The day starts at {start}." if start else "The day starts at last night's hotel."]
        if goal.day_type == "return":
            lines.append(f"End the day with the return trip {goal.city} -> {t['origin']}{mode}.")
        else:
            lines.append(
                f"End the day with the check-in at {hotel}." if hotel else "End with a hotel check-in."
            )
        lines.append(
            "Submit every activity of the day (meals, attractions, entertainment, hotel, intercity "
            "trips) in time order with the plan format's fields; prices are for the whole party."
        )
        return " ".join(lines)
