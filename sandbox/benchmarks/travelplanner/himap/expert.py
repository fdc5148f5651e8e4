"""Scripted TravelPlanner policies for the HiMAP roles, on the single-agent expert's solver.

Coordinator: information_extractor, then the single TravelPlanner expert's steps through the
tools (sandbox.benchmarks.travelplanner.expert._Solver: cities, legs, places; it reads the hidden query and
reference cities, an annotator's privilege) and its solver's plan, which fixes the trip-level
choices: route, transport family, each city's accommodation, which meals each day has and which
day covers which required cuisine. Budget hints: each day's cost in that plan plus an equal share
of the slack. Executor: its day's restaurants (and attractions on a stay day) and, on a moving
day, the leg's drives and flights; the cheapest distinct restaurants that cover its cuisines,
each checked against Σ so another day's picks are replaced; submit_day in the plan fields.
"""

from __future__ import annotations

import json
import math
from typing import Any

from sandbox.benchmarks.travelplanner.database import RESTAURANTS
from sandbox.benchmarks.travelplanner.expert import _drive, _Solver, parse_table
from sandbox.benchmarks.travelplanner.plan_reader import PLAN_FIELDS
from sandbox.benchmarks.travelplanner.solver import (
    ATTRACTIONS_PER_STAY_DAY,
    constraint,
    flight_text,
    people_of,
    safe_first_rows,
)
from sandbox.benchmarks.travelplanner.text import from_to, is_filled
from sandbox.benchmarks.travelplanner.tools import FLIGHT_COLUMNS, PLACE_COLUMNS
from sandbox.expert_session import ExpertFailure, tool_call, turn_text
from sandbox.himap.expert import RoleSession, subgoal_of
from sandbox.himap.protocol import StreamStart

MEALS = ("breakfast", "lunch", "dinner")
MAX_ATTEMPTS = 6


def _floor2(x: float) -> float:
    return math.floor(x * 100) / 100


class TravelPlannerExpertPolicies:
    """`policies(start)` -> the policy of a role. `pricing` prices plan items as Σ does (the
    coordinator's hints); `truth` holds the structured query and the reference cities."""

    def __init__(self, visible: dict[str, Any], truth: dict[str, Any], pricing: Any):
        self.visible, self.truth, self.pricing = visible, truth, pricing

    def __call__(self, start: StreamStart):
        return self.coordinator if start.role == "coordinator" else self.executor

    # -- coordinator -----------------------------------------------------------------------------
    def coordinator(self, rs: RoleSession, start: StreamStart) -> None:
        rs.act("Reading the request into the task tuple.", calls=[tool_call("information_extractor")])
        solution = _Solver(rs, self.truth).run()
        q = self.truth["query"]
        goals = self._goals(solution.plan, q)
        mode = "self-driving" if solution.mode == "self-driving" else "flight"
        think = (
            f"Route {' -> '.join([q['org'], *solution.cities, q['org']])}, {solution.mode}; one stay "
            "per city; each day's meals and cuisines as the cheapest plan has them."
        )
        while True:
            step = rs.raw(
                turn_text(think, (), [tool_call("distribute_task", subgoals=goals, transport_mode=mode)])
            )
            reply = next(r for r in step.responses if r.name == "distribute_task")
            if reply.is_error:
                raise ExpertFailure(f"distribute_task refused: {reply.text[:200]}")
            report = json.loads(reply.text)
            if report.get("fallback"):
                return self._fallback(rs, solution.plan, report)
            left, open_days = float(report["budget_left"]), report["open_days"]
            previous = [g for g in goals if g["day"] in open_days]
            total = sum(g["budget"] for g in previous) or 1.0
            goals = [{**g, "budget": _floor2(left * g["budget"] / total)} for g in previous]
            think = f"Round {report['round']} left days {open_days}; they share the {left:.0f} USD left."

    def _fallback(self, rs: RoleSession, plan: list[dict[str, Any]], report: dict[str, Any]) -> None:
        """No rounds left and days open: hand in the single expert's plan, every day of it."""
        days = [{"day": d, **{f: day[f] for f in PLAN_FIELDS}} for d, day in enumerate(plan, 1)]
        think = f"Days {report['open_days']} are still open and no rounds are left: I write the whole plan."
        step = rs.raw(turn_text(think, (), [tool_call("submit_plan", days=days)]))
        if step.responses[-1].is_error or not step.done:
            raise ExpertFailure(f"submit_plan refused: {step.responses[-1].text[:200]}")

    def _goals(self, plan: list[dict[str, Any]], q: dict[str, Any]) -> list[dict[str, Any]]:
        days = int(q["days"])
        costs = [self._day_cost(day) for day in plan]
        share = (float(q["budget"]) - sum(costs)) / days
        wanted = list(constraint(q, "cuisine") or [])
        goals = []
        for d, (day, cost) in enumerate(zip(plan, costs), 1):
            kind = "departure" if d == 1 else "return" if d == days else "travel" if d % 2 == 1 else "stay"
            city = from_to(day["current_city"])[1] or day["current_city"]
            goal: dict[str, Any] = {"day": d, "city": city, "budget": _floor2(cost + share), "day_type": kind}
            if kind != "stay":
                goal["route"] = day["current_city"]
            if is_filled(day["accommodation"]):
                goal["accommodation"] = day["accommodation"]
            meals = [m for m in MEALS if is_filled(day[m])]
            goal["meals"] = ", ".join(meals)
            covered = [c for c in wanted if any(c in self._cuisines(day[m]) for m in meals)]
            wanted = [c for c in wanted if c not in covered]
            if covered:
                goal["cuisines"] = ", ".join(covered)
            goals.append(goal)
        return goals

    def _day_cost(self, day: dict[str, Any]) -> float:
        items = []
        for field in ("transportation", *MEALS, "accommodation"):
            if is_filled(day[field]):
                items.append({"field": field, "value": day[field], "current_city": day["current_city"]})
        return sum(self.pricing.cost({**i, "day": day["days"]}) for i in items)

    def _cuisines(self, value: str) -> str:
        rows = self.pricing.lookup.places(RESTAURANTS, value)
        return str(rows[0].get("Cuisines", "")) if rows else ""

    # -- executor --------------------------------------------------------------------------------
    def executor(self, rs: RoleSession, start: StreamStart) -> None:
        _DayPlanner(rs, self.truth["query"], subgoal_of(start), start).run()


class _DayPlanner:
    """One executor's TravelPlanner day."""

    def __init__(self, rs: RoleSession, query: dict[str, Any], goal: dict[str, Any], start: StreamStart):
        self.s, self.q, self.goal = rs, query, goal
        self.kind, self.city = goal["day_type"], goal["city"]
        self.route = from_to(goal.get("route", ""))
        self.meals = [m.strip() for m in goal.get("meals", "").split(",") if m.strip()]
        self.cuisines = [c.strip() for c in goal.get("cuisines", "").split(",") if c.strip()]
        self.reserves = "commit_items" in {t["function"]["name"] for t in start.prompt.tools or []}
        self.reserved: dict[str, str] = {}  # meal -> the restaurant Σ holds for it
        self.reserved_sights: list[str] = []
        self.cuisine_of: dict[str, str] = {}
        self.taken: set[str] = set()

    def _meal_city(self, meal: str) -> str:
        if self.kind == "stay" or self.route[0] is None:
            return self.city
        return self.route[1] if meal == "dinner" else self.route[0]

    def run(self) -> None:
        cities = sorted(
            {self._meal_city(m) for m in self.meals} | ({self.city} if self.kind == "stay" else set())
        )
        calls = [tool_call("RestaurantSearch", city=c) for c in cities]
        if self.kind == "stay":
            calls.append(tool_call("AttractionSearch", city=self.city))
        legs = self._leg_calls()
        replies = self.s.act(
            f"Day {self.goal['day']} ({self.kind}): restaurants, sights and the leg.", calls=calls + legs
        )
        cheapest = {
            c: sorted(
                safe_first_rows(parse_table(t, PLACE_COLUMNS["restaurants"]), "Name"),
                key=lambda r: float(r["Average Cost"]),
            )
            for c, t in zip(cities, replies)
        }
        sights = (
            safe_first_rows(parse_table(replies[len(cities)], PLACE_COLUMNS["attractions"]), "Name")
            if self.kind == "stay"
            else []
        )
        transport = self._transport(replies[len(calls) :]) if legs else "-"
        self.cuisine_of = {
            f"{r['Name']}, {c}": str(r["Cuisines"]) for c, rows in cheapest.items() for r in rows
        }
        for _ in range(MAX_ATTEMPTS):
            day = self._pick(cheapest, sights, transport)
            if self.reserves and self._reserve(day):
                continue
            step = self.s.raw(
                turn_text(
                    f"Day {self.goal['day']} is ready; submitting it.", (), [tool_call("submit_day", **day)]
                )
            )
            if step.done:
                return
            if "budget" in step.responses[-1].text.split(":")[1]:
                raise ExpertFailure("even the cheapest day is over the budget left")
        raise ExpertFailure("no day whose places are free")

    def _leg_calls(self) -> list[dict[str, Any]]:
        origin, dest = self.route
        if origin is None:
            return []
        date = self.goal.get("date")
        if self.goal.get("transport_mode") == "self-driving":
            return [tool_call("DistanceMatrix", origin=origin, destination=dest, mode="self-driving")]
        calls = [tool_call("DistanceMatrix", origin=origin, destination=dest, mode="taxi")]
        if constraint(self.q, "transportation") != "no flight":
            calls.append(tool_call("FlightSearch", origin=origin, destination=dest, date=date))
        return calls

    def _transport(self, replies: list[str]) -> str:
        origin, dest = self.route
        people = people_of(self.q)
        drive = _drive(replies[0])
        if self.goal.get("transport_mode") == "self-driving":
            if drive is None:
                raise ExpertFailure("no drive on this leg")
            return drive[0]
        options = [(drive[0], drive[1] * math.ceil(people / 4))] if drive else []
        flights = parse_table(replies[1], FLIGHT_COLUMNS) if len(replies) > 1 else []
        options += [(flight_text(f, origin, dest), float(f["Price"]) * people) for f in flights]
        if not options:
            raise ExpertFailure("no taxi or flight on this leg")
        return min(options, key=lambda o: o[1])[0]

    def _pick(self, restaurants, sights, transport) -> dict[str, str]:
        """The day's fields: what Σ already holds for this day, the rest the cheapest free rows
        (first a meal for each cuisine asked of this day that no held meal covers)."""
        day = {f: "-" for f in ("transportation", "attraction", *MEALS, "accommodation")}
        day["current_city"] = self.goal.get("route") or self.city
        day["transportation"] = transport
        day["accommodation"] = self.goal.get("accommodation", "-")
        used = set(self.reserved.values())
        day.update(self.reserved)
        todo = [m for m in self.meals if m not in self.reserved]
        for cuisine in self.cuisines:
            if any(cuisine in self.cuisine_of.get(v, "") for v in self.reserved.values()):
                continue
            for meal in list(todo):
                city = self._meal_city(meal)
                fits = (
                    r for r in restaurants[city] if cuisine in str(r["Cuisines"]) and self._ok(r, city, used)
                )
                row = next(fits, None)
                if row is not None:
                    day[meal] = self._use(row, city, used)
                    todo.remove(meal)
                    break
        for meal in todo:
            city = self._meal_city(meal)
            row = next((r for r in restaurants[city] if self._ok(r, city, used)), None)
            if row is None:
                raise ExpertFailure(f"no free restaurant for {meal} in {city}")
            day[meal] = self._use(row, city, used)
        picks = list(self.reserved_sights)
        for a in sights:
            value = f"{a['Name']}, {self.city}"
            if len(picks) < ATTRACTIONS_PER_STAY_DAY and value not in self.taken and value not in picks:
                picks.append(value)
        if picks:
            day["attraction"] = "".join(f"{v};" for v in picks)
        return day

    def _ok(self, row: dict[str, Any], city: str, used: set[str]) -> bool:
        value = f"{row['Name']}, {city}"
        return value not in self.taken and value not in used

    def _use(self, row: dict[str, Any], city: str, used: set[str]) -> str:
        value = f"{row['Name']}, {city}"
        used.add(value)
        return value

    def _reserve(self, day: dict[str, str]) -> bool:
        """commit_items for each of the day's places Σ does not hold for it yet, one call each, so
        what is free is held at once (parallel days cannot take it in the next tick) and what is
        taken is known; True when some place was refused (the day is picked again)."""
        todo = [(m, day[m]) for m in MEALS if is_filled(day[m]) and m not in self.reserved]
        sights = [a.strip() for a in day["attraction"].split(";") if is_filled(a.strip())]
        todo += [("attraction", a) for a in sights if a not in self.reserved_sights]
        if not todo:
            return False
        calls = [tool_call("commit_items", items=[{"field": f, "value": v}]) for f, v in todo]
        replies = self.s.act(
            "Holding the day's restaurants and attractions in the shared state.", calls=calls
        )
        refused = False
        for (field, value), text in zip(todo, replies):
            if not text.startswith("ok"):
                self.taken.add(value)
                refused = True
            elif field == "attraction":
                self.reserved_sights.append(value)
            else:
                self.reserved[field] = value
        return refused
