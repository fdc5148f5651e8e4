"""Tiny Trip's HiMAP domain and scripted team: what a benchmark adds to offer HiMAP."""

from __future__ import annotations

import json
import math
from typing import Any

from sandbox.expert_session import ExpertFailure, tool_call, turn_text
from sandbox.himap.domain import DaySlot, HimapDomain, SubGoal
from sandbox.himap.expert import RoleSession, subgoal_of
from sandbox.himap.protocol import StreamStart
from sandbox.himap.state import BadItem, UnknownPlace
from sandbox.tools.args import Param
from tests.tiny_trip.world import TinyTripWorld, price


class TinyPricing:
    """Σ's Pricing: a lunch costs its place's price; a place is a venue that must not repeat."""

    def __init__(self, city: str):
        self.city = city

    def cost(self, item: dict) -> float:
        cost = price(self.city, self._name(item))
        if cost is None:
            raise UnknownPlace(f"no restaurant {self._name(item)!r} in {self.city}")
        return cost

    def venue_key(self, item: dict) -> str | None:
        return f"restaurant:{self._name(item)}"

    def transport_mode(self, item: dict) -> str | None:
        return None

    def history_key(self, item: dict) -> str | None:
        return None

    def slot(self, item: dict) -> str | None:
        return "lunch"

    def label(self, item: dict) -> str:
        return f"lunch {self._name(item)!r}"

    @staticmethod
    def _name(item: dict) -> str:
        if not isinstance(item.get("restaurant"), str):
            raise BadItem("an item is {'restaurant': name}")
        return item["restaurant"]


class TinyTripDomain(HimapDomain):
    name = "tiny_trip"
    transport_modes = ("none",)
    item_description = "[{'restaurant': name}]"

    def __init__(self, visible: dict[str, Any]):
        self.visible = visible

    def task(self) -> dict[str, Any]:
        v = self.visible
        return {"destination": v["city"], "days": v["days"], "budget": v["budget"]}

    def request(self) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.visible["query"]}]

    def instruction(self) -> str:
        return self.visible["query"]

    def slots(self) -> list[DaySlot]:
        return [DaySlot(d, None, self.visible["city"], "stay") for d in range(1, self.visible["days"] + 1)]

    def world(self) -> TinyTripWorld:
        return TinyTripWorld()

    def coordinator_tools(self) -> tuple[str, ...]:
        return ()

    def executor_tools(self) -> tuple[str, ...]:
        return ("RestaurantLookup",)

    def pricing(self) -> TinyPricing:
        return TinyPricing(self.visible["city"])

    def visited(self) -> set[str]:
        return set()

    def day_problem(self, goal: SubGoal, day: dict[str, Any]) -> str | None:
        return None if isinstance(day.get("restaurant"), str) else "give the day's restaurant"

    def day_items(self, goal: SubGoal, day: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"restaurant": day["restaurant"]}]

    def merge(self, days: dict[int, dict[str, Any]]) -> str:
        plan = [
            {"day": d, "restaurant": days.get(d, {}).get("restaurant", "")}
            for d in range(1, self.num_days + 1)
        ]
        return json.dumps(plan)

    def day_fields(self) -> tuple[Param, ...]:
        return (Param("restaurant", "string", "the day's lunch place", required=True),)


class TinyTripPolicies:
    """Coordinator: an even budget split; executor of day d: the d-th cheapest place (distinct)."""

    def __init__(self, truth: dict[str, Any]):
        self.query = truth["query"]

    def __call__(self, start: StreamStart):
        return self.coordinator if start.role == "coordinator" else self.executor

    def coordinator(self, rs: RoleSession, start: StreamStart) -> None:
        rs.act("Reading the request.", calls=[tool_call("information_extractor")])
        days, left = list(range(1, self.query["days"] + 1)), float(self.query["budget"])
        while True:
            share = math.floor(100 * left / len(days)) / 100
            goals = [
                {"day": d, "city": self.query["city"], "budget": share, "day_type": "stay"} for d in days
            ]
            call = tool_call("distribute_task", subgoals=goals, transport_mode="none")
            reply = next(r for r in rs.raw(turn_text("Even split.", (), [call])).responses)
            if reply.is_error:
                raise ExpertFailure(f"distribute_task refused: {reply.text[:200]}")
            report = json.loads(reply.text)
            days, left = report["open_days"], float(report["budget_left"])

    def executor(self, rs: RoleSession, start: StreamStart) -> None:
        goal = subgoal_of(start)
        [reply] = rs.act("Look up lunch places.", calls=[tool_call("RestaurantLookup", city=goal["city"])])
        rows = [json.loads(line) for line in reply.splitlines()]
        pick = rows[goal["day"] - 1]["name"]  # day d takes the d-th cheapest: no place twice
        rs.raw(turn_text("Cheapest free place.", (), [tool_call("submit_day", restaurant=pick)]))
