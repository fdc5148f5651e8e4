"""The expert planner: solves an instance through the episode environment, recording its turns.

It knows the hidden profile and query (an annotator's privilege), but learns everything about the
world the way the agent must: tool calls and memory operations sent through `EpisodeEnv.step` as
assistant text in the agent's action format. Its turns (think, memory, tool calls) and the
environment's replies form a chain-of-action trace for SFT (paper section 3.2.3).

Steps: (1) note the trip and preferences in memory; weather and transport both ways;
(2) a hotel that fits, near the centre and within a share of the budget; (3) restaurants and
attractions that fit, near the hotel, none visited before; (4) time every day
(sandbox/benchmarks/b2t/expert/schedule.py) and ask MapGuide for every local leg used; (5) read
memory back and
answer with the plan.
"""

import datetime as dt
import json
import math
from typing import Any

from sandbox.benchmarks.b2t.expert import responses
from sandbox.benchmarks.b2t.expert.days import DayPlanning
from sandbox.benchmarks.b2t.expert.schedule import (
    Leg,
)
from sandbox.benchmarks.b2t.expert.shared import (
    SEARCH_N,
    Option,
)
from sandbox.benchmarks.b2t.expert.venues import VenueSearch
from sandbox.benchmarks.b2t.tools.registry import B2TTools
from sandbox.benchmarks.b2t.vocab import WALKING_LIMIT_KM
from sandbox.env import EpisodeEnv
from sandbox.expert_session import ExpertFailure, ExpertResult, ExpertSession, tool_call

MAX_TURNS = 16


class Expert:
    """Solves instances of one world; `solve` never raises for an unsolvable instance."""

    def __init__(self, world: Any, max_turns: int = MAX_TURNS):
        self.world = world
        self.max_turns = max_turns

    def solve(self, visible: dict[str, Any], hidden: dict[str, Any]) -> ExpertResult:
        session = ExpertSession(
            EpisodeEnv(B2TTools(self.world), memory_enabled=True, max_turns=self.max_turns)
        )
        try:
            answer, plan = _Solver(session, visible, hidden).run()
        except ExpertFailure as err:
            return ExpertResult(False, str(err), session.turns, any_error=session.env.any_error)
        except (KeyError, ValueError, TypeError) as err:  # a reply or instance it cannot read
            return ExpertResult(
                False,
                f"unreadable data ({type(err).__name__}: {err})",
                session.turns,
                any_error=session.env.any_error,
            )
        return ExpertResult(True, "", session.turns, answer, session.env.any_error, plan, session.replies)


class _Solver(VenueSearch, DayPlanning):
    """One instance's solve: the steps below, as the module docstring lists them."""

    def __init__(self, session: ExpertSession, visible: dict[str, Any], hidden: dict[str, Any]):
        self.s = session
        self.q = hidden["query"]
        self.profile = hidden["profile"]
        self.city = self.q["destination"]
        self.origin = self.q["origin"]
        self.days = int(self.q["days"])
        self.people = int(self.q["people"])
        self.rooms = math.ceil(self.people / 2)
        self.budget = float(self.q["budget"])
        self.start = dt.date.fromisoformat(self.q["start_date"])
        self.dates = [(self.start + dt.timedelta(days=i)).isoformat() for i in range(self.days)]
        history = self.profile.get("history") or {}
        self.visited = {
            k: {n.casefold() for n in history.get(k, [])}
            for k in ("accommodations", "restaurants", "attractions")
        }
        self.pref = {
            c: (self.profile.get(c) or {}) for c in ("hotel", "attraction", "dining", "transportation")
        }
        self.leg_cache: dict[tuple[str, str], tuple[bool, Leg]] = {}
        walking = self.pref["attraction"].get("walking_tolerance")
        self.walking_limit = WALKING_LIMIT_KM.get(walking, float("inf")) if walking else float("inf")

    # ------------------------------------------------------------------ the episode

    def run(self) -> tuple[str, list[dict[str, Any]]]:
        plan = self.plan()
        total = sum(a["price"] for d in plan for a in d["activities"])
        answer = self.s.answer(
            f"Every day is timed with MapGuide durations, meals fall in their windows and the "
            f"total is {total:.0f} CNY within the {self.budget:.0f} CNY budget. Writing the plan.",
            plan,
        )
        return answer, plan

    def plan(self) -> list[dict[str, Any]]:
        """Every step but the answer: the plan's days (HiMAP's coordinator falls back to it)."""
        weather, outbound, returns = self._step_transport()
        out, back = self._choose_transport(outbound, returns)
        hotel = self._step_hotel(out, back)
        restaurants, attractions = self._step_places(hotel)
        days, out, back = self._plan_with_transport(hotel, restaurants, attractions)
        days = self._step_map(days, hotel, out, back, restaurants, attractions)
        return self._assemble(days, weather, out, back)

    # ------------------------------------------------------------------ step 1

    def _preference_notes(self) -> dict[str, Any]:
        notes = {}
        for category, pref in self.pref.items():
            if pref:
                notes[category] = {k: v for k, v in pref.items() if v}
        return notes

    def _step_transport(self) -> tuple[dict[str, dict], list[Option], list[Option]]:
        notes = self._preference_notes()
        seen = {k: sorted(v) for k, v in (self.profile.get("history") or {}).items() if v}
        think = (
            f"The user wants {self.days} days in {self.city} from {self.origin}, "
            f"{self.dates[0]} to {self.dates[-1]}, {self.people} traveller(s), budget "
            f"{self.budget:.0f} CNY. Their favorites and bookings show: "
            + (
                "; ".join(f"{c}: {json.dumps(v, ensure_ascii=False)}" for c, v in notes.items())
                or "no firm preferences"
            )
            + (f". Already visited: {json.dumps(seen, ensure_ascii=False)}" if seen else "")
            + ". First the weather and the trains/flights both ways."
        )
        memory = [
            {
                "action": "write",
                "key": "trip",
                "value": {
                    "origin": self.origin,
                    "destination": self.city,
                    "dates": [self.dates[0], self.dates[-1]],
                    "people": self.people,
                    "budget": self.budget,
                },
            },
            {"action": "write", "key": "preferences", "value": notes or "none stated"},
        ]
        if seen:
            memory.append({"action": "write", "key": "visited_before", "value": seen})
        calls = [tool_call("WeatherSearch", city=self.city, date=self.dates[0], n=self.days)]
        legs = ((self.origin, self.city, self.dates[0]), (self.city, self.origin, self.dates[-1]))
        more, plan = self._transport_calls(legs)
        calls += more
        replies = self.s.act(think, memory, calls)
        weather = {r["date"]: r for r in responses.items(replies[0])}
        half = len(plan) // 2
        outbound, returns = [], []
        for i, (kind, text) in enumerate(zip(plan, replies[1:])):
            options = self._options(kind, text)
            (outbound if i < half else returns).extend(options)
        return weather, outbound, returns

    def _transport_calls(self, legs) -> tuple[list[dict[str, Any]], list[str]]:
        """Searches for each (origin, destination, date) leg in the preferred intercity modes, and
        the kind ("flight" | "train") of each call, in order."""
        t = self.pref["transportation"]
        modes = (
            [t["intercity_transport"]]
            if t.get("intercity_transport")
            else ["High-speed Rail", "Regular Train", "Airplane"]
        )
        calls, plan = [], []
        for origin, dest, date in legs:
            if "Airplane" in modes:
                cabin = [t["seat_class"]] if t.get("seat_class") else None
                calls.append(
                    tool_call(
                        "FlightSearch",
                        origin=origin,
                        destination=dest,
                        departure_date=date,
                        n=SEARCH_N,
                        preferences={"cabin_class": cabin} if cabin else None,
                        depart_after="06:00",
                    )
                )
                plan.append("flight")
            trains = [m for m in modes if m != "Airplane"]
            if trains:
                calls.append(
                    tool_call(
                        "TrainSearch",
                        origin=origin,
                        destination=dest,
                        n=SEARCH_N,
                        preferences={"train_type": trains},
                        depart_after="06:00",
                    )
                )
                plan.append("train")
        return calls, plan

    def _options(self, kind: str, text: str) -> list[Option]:
        seat_pref = self.pref["transportation"].get("seat_class")
        mode_pref = self.pref["transportation"].get("intercity_transport")
        out = []
        for r in responses.items(text):
            if kind == "flight":
                dep_date, dep = r["depart"].split()
                arr_date, arr = r["arrive"].split()
                if dep_date != arr_date or (seat_pref and r["cabin"] != seat_pref):
                    continue
                out.append(
                    Option(
                        "flight",
                        r["flight_number"],
                        "Airplane",
                        r["cabin"],
                        responses.minutes(dep),
                        responses.minutes(arr),
                        float(r["price"]),
                    )
                )
            else:
                if "(+" in r["arrive"] or (mode_pref and r["type"] != mode_pref):
                    continue
                fares = {k: float(v) for k, v in r["fares"].items()}
                seats = [seat_pref] if seat_pref else sorted(fares, key=fares.get)
                for seat in seats:
                    if seat in fares:
                        out.append(
                            Option(
                                "train",
                                r["train_number"],
                                r["type"],
                                seat,
                                responses.minutes(r["depart"]),
                                responses.minutes(r["arrive"]),
                                fares[seat],
                            )
                        )
                        break
        return out

    def _choose_transport(self, outbound: list[Option], returns: list[Option]) -> tuple[Option, Option]:
        outs = sorted(
            (o for o in outbound if o.same_day_ok(21 * 60, 6 * 60)), key=lambda o: (o.price, o.arrive)
        )
        backs = sorted(
            (o for o in returns if o.same_day_ok(23 * 60, 7 * 60)), key=lambda o: (o.price, -o.depart)
        )
        if not outs or not backs:
            raise ExpertFailure("no daytime train or flight in the preferred mode and class")
        self.transport_options = (outs, backs)
        return outs[0], backs[0]
