"""Scripted TravelPlanner policies for the HiMAP roles, on the single-agent expert's solver rules.

Coordinator (one search turn, then distribute_task): information_extractor; CitySearch; the
self-driving leg of every hop (the trip drives when every hop can be driven and driving is allowed, else
flies or takes a taxi per leg: on the 45 training queries that rule picks the single solver's family
every time); each city's accommodations (the cheapest stay meeting the house rule, room type and two
nights); each city's restaurants (the protocol shows them to every executor:
TravelPlannerDomain.shared_lookups, so the two or three days of a city do not each read the city's
table after their own brief, where prefix reuse cannot share it). It writes each choice once: a stay
day names its city and stay, the protocol completes the moving days
(TravelPlannerDomain.complete_subgoals). A required cuisine that no city's shared block (below)
covers goes to the stay day of the city with the cheapest such restaurant. Budget hints: a day's
nights plus an equal share of the rest. Fallback: the single expert's whole search and solver.

Executor: the restaurants from its prompt (searched only when the prompt has none, as in the flat
ablation), a stay day's attractions and a moving day's leg; then submit_day. Parallel days share
restaurants without talking by one rule (the single solver's meal slots): a city's meal slots, the
stay day's last, take the city's cheapest restaurants in that order (the block), so no two days pick
the same one and the trip's meals cost what the single solver's cost; a stay day's cuisine duty
swaps its dearest meal for the cheapest restaurant of that cuisine past the block. Σ's refusals: a
taken venue is replaced past the block; over budget, the day drops its optional meals (dearest
first), else rejects `budget`.
"""

from __future__ import annotations

import json
import math
from typing import Any

from sandbox.benchmarks.travelplanner.expert import _drive, _Solver, parse_table
from sandbox.benchmarks.travelplanner.plan_reader import PLAN_FIELDS
from sandbox.benchmarks.travelplanner.solver import (
    ATTRACTIONS_PER_STAY_DAY,
    NIGHTS_PER_CITY,
    _meal_slots,
    _MealSlot,
    accommodation_ok,
    constraint,
    flight_text,
    people_of,
    safe_first_rows,
    stay_cost,
)
from sandbox.benchmarks.travelplanner.text import from_to
from sandbox.benchmarks.travelplanner.tools import FLIGHT_COLUMNS, PLACE_COLUMNS
from sandbox.expert_session import ExpertFailure, tool_call, turn_text
from sandbox.himap.expert import RoleSession, lookup_key, lookup_replies, subgoal_of
from sandbox.himap.kinds import Role, StreamStart

MEALS = ("breakfast", "lunch", "dinner")
MAX_ATTEMPTS = 6


def _floor2(x: float) -> float:
    return math.floor(x * 100) / 100


def city_slots(days: int, city: int) -> list[_MealSlot]:
    """City `city`'s meal slots (0-based days, cities by index) in the order its block is shared:
    the single solver's slot order, the stay day's slots last (a cuisine duty swaps the dearest)."""
    slots = [s for s in _meal_slots(list(range((days - 1) // 2))) if s.city == city]
    return sorted(slots, key=lambda s: s.day == 2 * city + 1)


def sorted_restaurants(text: str) -> list[dict[str, Any]]:
    rows = safe_first_rows(parse_table(text, PLACE_COLUMNS["restaurants"]), "Name")
    return sorted(rows, key=lambda r: float(r["Average Cost"]))


class TravelPlannerExpertPolicies:
    """`policies(start)` -> the policy of a role. `pricing` prices plan items as Σ does;
    `truth` holds the structured query and the reference cities."""

    def __init__(self, visible: dict[str, Any], truth: dict[str, Any], pricing: Any):
        self.visible, self.truth, self.pricing = visible, truth, pricing

    def __call__(self, start: StreamStart):
        return self.coordinator if start.role == Role.COORDINATOR else self.executor

    # -- coordinator -----------------------------------------------------------------------------
    def coordinator(self, rs: RoleSession, start: StreamStart) -> None:
        q, cities = self.truth["query"], list(self.truth["cities"])
        stops = [q["org"], *cities, q["org"]]
        drive = constraint(q, "transportation") != "no self-driving"
        wanted = list(constraint(q, "cuisine") or [])
        calls = [tool_call("information_extractor")]
        calls += [tool_call("CitySearch", state=q["dest"])] if int(q["days"]) > 3 else []
        hops = list(zip(stops, stops[1:])) if drive else []
        calls += [tool_call("DistanceMatrix", origin=a, destination=b, mode="self-driving") for a, b in hops]
        calls += [tool_call("AccommodationSearch", city=c) for c in cities]
        # Shown to every day planner (TravelPlannerDomain.shared_lookups): a city's restaurants
        # serve two or three days, so they are searched once per trip.
        calls += [tool_call("RestaurantSearch", city=c) for c in cities]
        replies = rs.act(
            f"{', '.join(cities)}: can every hop be driven, where to stay and eat"
            + (", which city serves the cuisines." if wanted else "."),
            calls=calls,
        )[len(calls) - len(hops) - 2 * len(cities) :]
        mode = "self-driving" if drive and all(_drive(r) for r in replies[: len(hops)]) else "flight"
        replies = replies[len(hops) :]
        stays = {c: self._stay(c, text) for c, text in zip(cities, replies)}
        duties = self._duties(cities, replies[len(cities) : 2 * len(cities)], wanted)
        goals = self._goals(q, cities, stays, duties)
        think = f"Route {' -> '.join(stops)} by {mode}; one stay per city."
        while True:
            step = rs.raw(
                turn_text(think, (), [tool_call("distribute_task", subgoals=goals, transport_mode=mode)])
            )
            reply = next(r for r in step.responses if r.name == "distribute_task")
            if reply.is_error:
                raise ExpertFailure(f"distribute_task refused: {reply.text[:200]}")
            report = json.loads(reply.text)
            if report.get("fallback"):
                return self._fallback(rs, report)
            left, open_days = float(report["budget_left"]), report["open_days"]
            previous = [g for g in goals if g["day"] in open_days]
            total = sum(g["budget"] for g in previous) or 1.0
            goals = [{**g, "budget": _floor2(left * g["budget"] / total)} for g in previous]
            think = f"Round {report['round']} left days {open_days}; they share the {left:.0f} USD left."

    def _stay(self, city: str, text: str) -> tuple[str, float]:
        """The single solver's stay: the cheapest listing its rules allow; (value, cost a night)."""
        q = self.truth["query"]
        rows = safe_first_rows(parse_table(text, PLACE_COLUMNS["accommodations"]), "NAME")
        rows = [r for r in rows if accommodation_ok(r, q, NIGHTS_PER_CITY)]
        if not rows:
            raise ExpertFailure(f"no accommodation in {city} meets the rules")
        row = min(rows, key=lambda r: stay_cost(r, people_of(q), NIGHTS_PER_CITY))
        return f"{row['NAME']}, {city}", stay_cost(row, people_of(q), 1)

    def _duties(self, cities: list[str], texts: list[str], wanted: list[str]) -> dict[str, list[str]]:
        """City -> the cuisines its stay day's meals must serve: each required cuisine that no
        moving day's share of a block serves goes to the city where it costs least (a stay meal of
        the block already serving it, else the cheapest restaurant serving it past the block)."""
        if not wanted:
            return {}
        days = int(self.truth["query"]["days"])
        rows = {c: sorted_restaurants(t) for c, t in zip(cities, texts)}
        sizes = {c: len(city_slots(days, k)) for k, c in enumerate(cities)}
        duties: dict[str, list[str]] = {c: [] for c in cities}
        for cuisine in wanted:
            if any(cuisine in str(r["Cuisines"]) for c in cities for r in rows[c][: sizes[c] - 3]):
                continue
            options = []
            for k, c in enumerate(cities):
                own = rows[c][sizes[c] - 3 : sizes[c]]
                past = [
                    float(r["Average Cost"]) for r in rows[c][sizes[c] :] if cuisine in str(r["Cuisines"])
                ]
                if any(cuisine in str(r["Cuisines"]) for r in own):
                    options.append((0.0, k, c))
                elif past:
                    options.append((past[0], k, c))
            if options:
                duties[min(options)[2]].append(cuisine)
        return duties

    def _goals(self, q: dict[str, Any], cities: list[str], stays: dict, duties: dict) -> list[dict[str, Any]]:
        """Stay days name their city, stay and cuisines; the protocol completes the moving days."""
        days = int(q["days"])
        nights = {d: stays[cities[(d - 1) // 2]][1] for d in range(1, days)}
        share = max(0.0, float(q["budget"]) - sum(nights.values())) / days
        goals = []
        for d in range(1, days + 1):
            goal: dict[str, Any] = {"day": d, "budget": _floor2(nights.get(d, 0.0) + share)}
            if d % 2 == 0:
                city = cities[d // 2 - 1]
                goal.update(city=city, accommodation=stays[city][0])
                if duties.get(city):
                    goal["cuisines"] = ", ".join(duties[city])
            goals.append(goal)
        return goals

    def _fallback(self, rs: RoleSession, report: dict[str, Any]) -> None:
        """No rounds left and days open: the single expert's search and plan, every day of it."""
        plan = _Solver(rs, self.truth).run().plan
        days = [{"day": d, **{f: day[f] for f in PLAN_FIELDS}} for d, day in enumerate(plan, 1)]
        think = f"Days {report['open_days']} are still open and no rounds are left: I write the whole plan."
        step = rs.raw(turn_text(think, (), [tool_call("submit_plan", days=days)]))
        if step.responses[-1].is_error or not step.done:
            raise ExpertFailure(f"submit_plan refused: {step.responses[-1].text[:200]}")

    # -- executor --------------------------------------------------------------------------------
    def executor(self, rs: RoleSession, start: StreamStart) -> None:
        _DayPlanner(rs, self.truth["query"], subgoal_of(start), start).run()


class _DayPlanner:
    """One executor's TravelPlanner day."""

    def __init__(self, rs: RoleSession, query: dict[str, Any], goal: dict[str, Any], start: StreamStart):
        self.s, self.q, self.goal = rs, query, goal
        self.day, self.kind, self.city = int(goal["day"]), goal["day_type"], goal["city"]
        self.days = int(query["days"])
        self.route = from_to(goal.get("route", ""))
        meals = [m.strip() for m in goal.get("meals", "").split(",") if m.strip()]
        self.meals = set(meals or MEALS)
        self.cuisines = [c.strip() for c in goal.get("cuisines", "").split(",") if c.strip()]
        self.can_reject = "reject_subgoal" in {t["function"]["name"] for t in start.prompt.tools or []}
        self.picks: dict[str, tuple[str, float, bool]] = {}  # meal -> (value, cost, optional)
        self.block: dict[str, int] = {}  # city -> how many of its cheapest restaurants its slots share
        self.taken: set[str] = set()  # restaurants Σ says another day has
        self.shown = lookup_replies(start)  # the coordinator's searches in the prompt

    def _slots(self) -> list[tuple[_MealSlot, int, str]]:
        """(slot, its place in its city's block, the city) of each of this day's meals."""
        d0, n = self.day - 1, (self.days - 1) // 2
        if d0 % 2:
            names = {d0 // 2: self.city}
        else:
            names = {k: c for k, c in ((d0 // 2 - 1, self.route[0]), (d0 // 2, self.route[1])) if 0 <= k < n}
        self.block = {c: len(city_slots(self.days, k)) for k, c in names.items()}
        return [
            (slot, i, names[k])
            for k in names
            for i, slot in enumerate(city_slots(self.days, k))
            if slot.day == d0 and slot.meal in self.meals
        ]

    def run(self) -> None:
        mine = self._slots()
        cities = sorted({c for _, _, c in mine} | ({self.city} if self.kind == "stay" else set()))
        searches = [tool_call("RestaurantSearch", city=c) for c in cities]
        if self.kind == "stay":
            searches.append(tool_call("AttractionSearch", city=self.city))
        # The coordinator's searches in the prompt are used as they are; only the rest is searched.
        calls = [c for c in searches if lookup_key(c) not in self.shown]
        legs = self._leg_calls()
        replies = self.s.act(
            f"Day {self.day} ({self.kind}): restaurants, sights and the leg.", calls=calls + legs
        )
        found = {**self.shown, **{lookup_key(c): r for c, r in zip(calls, replies)}}
        texts = [found[lookup_key(c)] for c in searches]
        rows = {c: sorted_restaurants(t) for c, t in zip(cities, texts)}
        sights = []
        if self.kind == "stay":
            sights = safe_first_rows(parse_table(texts[len(cities)], PLACE_COLUMNS["attractions"]), "Name")
        transport = self._transport(replies[len(calls) :]) if legs else "-"
        self._pick(mine, rows)
        for _ in range(MAX_ATTEMPTS):
            day = self._fields(sights, transport)
            step = self.s.raw(
                turn_text(f"Day {self.day} is ready; submitting it.", (), [tool_call("submit_day", **day)])
            )
            if step.done:
                return
            text = step.responses[-1].text
            if not self._repair(text, rows):
                break
        if not self.can_reject:
            raise ExpertFailure(f"day {self.day} cannot be submitted")
        self.s.raw(
            turn_text("No day fits.", (), [tool_call("reject_subgoal", reason=text[:200], code="budget")])
        )

    def _pick(self, mine: list[tuple[_MealSlot, int, str]], rows: dict[str, list[dict[str, Any]]]) -> None:
        """Each meal its block row; then a stay day serves each cuisine duty with a meal that
        already serves it, else swaps its dearest other meal for the cheapest such restaurant."""
        cuisines: dict[str, str] = {}  # meal -> the cuisines its restaurant serves
        for slot, i, city in mine:
            if i >= len(rows[city]):
                raise ExpertFailure(f"too few restaurants in {city}")
            row = rows[city][i]
            self.picks[slot.meal] = (f"{row['Name']}, {city}", float(row["Average Cost"]), slot.optional)
            cuisines[slot.meal] = str(row["Cuisines"])
        free = list(self.picks)
        for cuisine in self.cuisines:
            meal = next((m for m in free if cuisine in cuisines[m]), None)
            if meal is None and free:
                row = self._past_block(rows[self.city], self.block[self.city], cuisine)
                meal = max(free, key=lambda m: self.picks[m][1])
                self.picks[meal] = (f"{row['Name']}, {self.city}", float(row["Average Cost"]), False)
            if meal is not None:
                free.remove(meal)

    def _past_block(
        self, rows: list[dict[str, Any]], start: int, cuisine: str | None = None
    ) -> dict[str, Any]:
        """The cheapest restaurant past the city's block that this day does not use yet."""
        used = {v for v, _, _ in self.picks.values()}
        for row in rows[start:]:
            fits = cuisine is None or cuisine in str(row["Cuisines"])
            if fits and not any(v.startswith(f"{row['Name']}, ") for v in used | self.taken):
                return row
        raise ExpertFailure(f"no free restaurant{' serving ' + cuisine if cuisine else ''}")

    def _repair(self, text: str, rows: dict[str, list[dict[str, Any]]]) -> bool:
        """Change the day after Σ refused it: False when nothing can be changed."""
        if "budget" in text.split(":")[1]:
            optional = [m for m, p in self.picks.items() if p[2]]
            if not optional:
                return False
            del self.picks[max(optional, key=lambda m: self.picks[m][1])]
            return True
        meal = next((m for m, p in self.picks.items() if p[0] in text), None)
        if meal is None:
            raise ExpertFailure(f"refused: {text[:200]}")
        value, _, optional = self.picks[meal]
        self.taken.add(value)
        city = value.rsplit(", ", 1)[1]
        row = self._past_block(rows[city], self.block[city])
        self.picks[meal] = (f"{row['Name']}, {city}", float(row["Average Cost"]), optional)
        return True

    def _fields(self, sights: list[dict[str, Any]], transport: str) -> dict[str, str]:
        day = {f: "-" for f in PLAN_FIELDS}
        day["current_city"] = self.goal.get("route") if self.kind != "stay" else self.city
        day["transportation"] = transport
        day["accommodation"] = self.goal.get("accommodation", "-")
        day.update({meal: value for meal, (value, _, _) in self.picks.items()})
        picks = [f"{a['Name']}, {self.city};" for a in sights[:ATTRACTIONS_PER_STAY_DAY]]
        day["attraction"] = "".join(picks) or "-"
        return day

    def _leg_calls(self) -> list[dict[str, Any]]:
        origin, dest = self.route
        if origin is None or self.kind == "stay":
            return []
        date = self.goal.get("date")
        if self.goal.get("transport_mode") == "self-driving":
            return [tool_call("DistanceMatrix", origin=origin, destination=dest, mode="self-driving")]
        calls = [tool_call("DistanceMatrix", origin=origin, destination=dest, mode="taxi")]
        if constraint(self.q, "transportation") != "no flight":
            calls.append(tool_call("FlightSearch", origin=origin, destination=dest, date=date))
        return calls

    def _transport(self, replies: list[str]) -> str:
        """The single solver's per-leg choice: the drive, or the cheaper of taxi and flights."""
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
