"""The TravelPlanner expert: solves a query through the two-stage tools, recording its turns.

Like the B2T expert (sandbox/benchmarks/b2t/expert), it knows the hidden structured query and the reference
cities (an annotator's privilege: the official reference information lists the cities the
annotators used, in route order), but learns every fact about the world through `EpisodeEnv.step`
with assistant text in the agent's action format: (1) it notes the trip in memory and asks for
the cities of the state, the drives and the flights of every leg; (2) it searches the
accommodations, restaurants and attractions of each city; (3) it plans with
sandbox.benchmarks.travelplanner.solver over the rows it read back and stores the choice in memory
(every day's items, so an answer written after its replies folded still reads them there);
(4) it answers. If the route order given has no plan, it tries the other orders of the same
cities (one more tool turn for their legs). An unsolvable query is `ok=False`, never an exception.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Sequence
from typing import Any

from sandbox.benchmarks.travelplanner.solver import (
    CityRows,
    LegOptions,
    Solution,
    constraint,
    drive_plan_text,
    people_of,
    solve,
)
from sandbox.benchmarks.travelplanner.text import is_filled
from sandbox.benchmarks.travelplanner.tools import COLUMN_SEP, FLIGHT_COLUMNS, PLACE_COLUMNS
from sandbox.env import EpisodeEnv

# The B2T expert's episode driver (assistant text in the action format, transcript, errors as
# ExpertFailure) serves here unchanged.
from sandbox.expert_session import ExpertFailure, ExpertResult, ExpertSession, tool_call

MAX_TURNS = 8
_COST = re.compile(r"cost: (\d+)")
_SEARCHES = (
    ("AccommodationSearch", "accommodations"),
    ("RestaurantSearch", "restaurants"),
    ("AttractionSearch", "attractions"),
)


def parse_table(text: str, columns: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """Rows of a tool table (sandbox.benchmarks.travelplanner.tools.table) under the database's column names.

    Numbers come back as floats (what the solver compares); the first column (the name or flight
    number) stays verbatim, even when it looks like a number (a restaurant is called "12212")."""
    lines = text.split("\n")
    if len(lines) < 2 or lines[1] != COLUMN_SEP.join(c for c, _ in columns):
        return []
    rows = []
    for line in lines[2:]:
        cells = line.split(COLUMN_SEP)
        if len(cells) == len(columns):
            row = {src: _number_or_text(value) for (_, src), value in zip(columns[1:], cells[1:])}
            name = cells[0].replace("\\n", "\n").replace("\\t", "\t")  # tools.cell escapes them
            rows.append({columns[0][1]: name, **row})
    return rows


def _number_or_text(value: str) -> Any:
    try:
        return float(value) if re.fullmatch(r"-?\d+(\.\d+)?", value) else value
    except ValueError:
        return value


def _drive(text: str) -> tuple[str, int] | None:
    """(plan text, cost per vehicle) from a DistanceMatrix reply; None for "no valid route"."""
    match = _COST.search(text)
    return (drive_plan_text(text), int(match.group(1))) if match and "no valid route" not in text else None


class TravelPlannerExpert:
    """Solves TravelPlanner instances over one two-stage world; `solve` never raises."""

    def __init__(self, world: Any, max_turns: int = MAX_TURNS) -> None:
        self.world = world
        self.max_turns = max_turns

    def solve(self, visible: dict[str, Any], truth: dict[str, Any]) -> ExpertResult:
        session = ExpertSession(EpisodeEnv(self.world, memory_enabled=True, max_turns=self.max_turns))
        try:
            solution = _Solver(session, truth).run()
        except ExpertFailure as err:
            return ExpertResult(False, str(err), session.turns, any_error=session.env.any_error)
        except (KeyError, ValueError, TypeError, IndexError) as err:  # data it cannot read
            return ExpertResult(
                False,
                f"unreadable data ({type(err).__name__}: {err})",
                session.turns,
                any_error=session.env.any_error,
            )
        answer = session.answer(
            f"The plan costs {solution.cost:.0f} USD for {people_of(truth['query'])} people, within the "
            f"budget of {truth['query']['budget']} USD, and meets every stated constraint. Writing it.",
            solution.plan,
        )
        return ExpertResult(
            True, "", session.turns, answer, session.env.any_error, solution.plan, session.replies
        )


class _Solver:
    def __init__(self, session: ExpertSession, truth: dict[str, Any]) -> None:
        self.s = session
        self.q = truth["query"]
        self.cities = list(truth["cities"])
        self.org = self.q["org"]
        self.legs: dict[tuple[str, str, str], LegOptions] = {}

    def run(self) -> Solution:
        self._ask_legs(self.cities, first=True)
        rows = self._ask_places()
        orders = [tuple(self.cities)]
        orders += [o for o in itertools.permutations(self.cities) if list(o) != self.cities]
        solution = self._solve(orders[0], rows)
        if solution is None and len(orders) > 1:
            for order in orders[1:]:
                self._ask_legs(list(order), first=False)
                solution = self._solve(order, rows)
                if solution is not None:
                    break
        if solution is None:
            raise ExpertFailure("no plan meets the constraints within the budget")
        self._remember(solution)
        return solution

    def _route(self, order: Sequence[str]) -> list[tuple[str, str, str]]:
        stops = [self.org, *order, self.org]
        dates = self.q["date"]
        return [(stops[k], stops[k + 1], dates[min(2 * k, len(dates) - 1)]) for k in range(len(stops) - 1)]

    def _ask_legs(self, order: list[str], first: bool) -> None:
        legs = [leg for leg in self._route(order) if leg not in self.legs]
        if not legs:
            return
        banned = constraint(self.q, "transportation")
        calls = [tool_call("CitySearch", state=self.q["dest"])] if first and int(self.q["days"]) > 3 else []
        for origin, dest, date in legs:
            if banned != "no self-driving":
                calls.append(
                    tool_call("DistanceMatrix", origin=origin, destination=dest, mode="self-driving")
                )
            calls.append(tool_call("DistanceMatrix", origin=origin, destination=dest, mode="taxi"))
            if banned != "no flight":
                calls.append(tool_call("FlightSearch", origin=origin, destination=dest, date=date))
        think = (
            self._trip_summary() + " First the cities and the ways to travel each leg."
            if first
            else f"No plan fits the order {' -> '.join(self.cities)}; checking the legs of "
            f"{' -> '.join(order)}."
        )
        memory = [{"action": "write", "key": "trip", "value": self._trip_note()}] if first else []
        replies = iter(self.s.act(think, memory, calls))
        if calls and calls[0]["name"] == "CitySearch":
            next(replies)
        for origin, dest, date in legs:
            drive = _drive(next(replies)) if banned != "no self-driving" else None
            taxi = _drive(next(replies))
            flights = parse_table(next(replies), FLIGHT_COLUMNS) if banned != "no flight" else []
            self.legs[(origin, dest, date)] = LegOptions(origin, dest, date, drive, taxi, tuple(flights))

    def _ask_places(self) -> dict[str, CityRows]:
        calls = [tool_call(tool, city=city) for city in self.cities for tool, _ in _SEARCHES]
        replies = iter(
            self.s.act(
                f"Now the accommodations, restaurants and attractions of {', '.join(self.cities)}.",
                calls=calls,
            )
        )
        rows = {}
        for city in self.cities:
            found = {kind: parse_table(next(replies), PLACE_COLUMNS[kind]) for _, kind in _SEARCHES}
            rows[city] = CityRows(found["accommodations"], found["restaurants"], found["attractions"])
        return rows

    def _solve(self, order: Sequence[str], rows: dict[str, CityRows]) -> Solution | None:
        legs = [self.legs[leg] for leg in self._route(order)]
        return solve(self.q, list(order), rows, legs)

    def _remember(self, solution: Solution) -> None:
        days = solution.plan
        choice = {
            "route": [self.org, *solution.cities, self.org],
            "transport": solution.mode,
            "stays": sorted({d["accommodation"] for d in days if d["accommodation"] != "-"}),
            "total_cost": round(solution.cost),
            # every item the answer names, while the replies it came from are still whole: under a
            # context budget they may fold before the answer (rollout/context.py)
            "days": [{k: v for k, v in d.items() if is_filled(v)} for d in days],
        }
        self.s.act(
            f"Cheapest allowed transport is {solution.mode}; the stays respect the house rule, room "
            f"type and minimum nights; meals are distinct and cover the cuisines asked for. Total "
            f"{solution.cost:.0f} USD of {self.q['budget']}. Noting the choice, then reading "
            "memory back.",
            memory=[{"action": "write", "key": "choice", "value": choice}, {"action": "read", "key": "all"}],
        )

    def _trip_note(self) -> dict[str, Any]:
        local = {k: v for k, v in (self.q.get("local_constraint") or {}).items() if v not in (None, "None")}
        return {
            "org": self.org,
            "dest": self.q["dest"],
            "dates": self.q["date"],
            "people": people_of(self.q),
            "budget": self.q["budget"],
            "constraints": local or "none",
            "cities": self.cities,
        }

    def _trip_summary(self) -> str:
        local = self._trip_note()["constraints"]
        return (
            f"{people_of(self.q)} traveller(s) from {self.org} to {self.q['dest']} for {self.q['days']} "
            f"days ({self.q['date'][0]} to {self.q['date'][-1]}), visiting {', '.join(self.cities)}, "
            f"budget {self.q['budget']} USD, constraints: {json.dumps(local)}."
        )
