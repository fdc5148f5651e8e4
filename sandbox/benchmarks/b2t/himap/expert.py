"""Scripted B2T policies for the HiMAP roles, on the single-agent expert's logic (planner._Solver).

Like the single-agent expert they read the hidden profile (an annotator's privilege) but learn the
world only through tool calls. Coordinator (here): information_extractor; the trains/flights both
ways (one mode for the trip: the cheapest same-mode pair), the hotel, and the restaurants and
attractions near it, searched once for the whole trip as the single expert searches them (the
protocol shows these searches to every executor: B2TDomain.shared_lookups); budget hints = each
day's transport and hotel night plus an equal share of what is left; after a round, the open days
share the budget the accepted days left. The executor of one day is executor.DayPlanner.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from sandbox.benchmarks.b2t.expert import responses
from sandbox.benchmarks.b2t.expert.planner import _Solver
from sandbox.benchmarks.b2t.expert.schedule import Place
from sandbox.benchmarks.b2t.expert.shared import Option
from sandbox.benchmarks.b2t.himap.executor import DayPlanner
from sandbox.expert_session import ExpertFailure, tool_call, turn_text
from sandbox.himap.expert import RoleSession
from sandbox.himap.protocol import StreamStart


@dataclasses.dataclass(frozen=True)
class ExpertKnobs:
    """Test and demo switches. `hint_override`: day -> budget hint of the first distribution;
    `fix_rejections=False`: a coordinator that re-sends the same sub-goals (never adapts)."""

    hint_override: dict[int, float] = dataclasses.field(default_factory=dict)
    fix_rejections: bool = True


def _floor2(x: float) -> float:
    return math.floor(x * 100) / 100


class B2TExpertPolicies:
    """`policies(start)` -> the policy of a role (see sandbox.himap.expert.drive)."""

    def __init__(self, visible: dict[str, Any], hidden: dict[str, Any], knobs: ExpertKnobs | None = None):
        self.visible, self.hidden, self.knobs = visible, hidden, knobs or ExpertKnobs()

    def __call__(self, start: StreamStart):
        return self.coordinator if start.role == "coordinator" else self.executor

    # -- coordinator -----------------------------------------------------------------------------
    def coordinator(self, rs: RoleSession, start: StreamStart) -> None:
        solver = _Solver(rs, self.visible, self.hidden)
        task = json.loads(
            rs.act("Reading the request into the task tuple.", calls=[tool_call("information_extractor")])[0]
        )
        out, back = self._transport(rs, solver)
        hotel = solver._step_hotel(out, back)
        places = solver._step_places(hotel)  # shown to every executor (B2TDomain.shared_lookups)
        goals = self._hints(task, solver, out, back, hotel)
        think = (
            f"One mode for the trip: {out.mode} ({out.number} out, {back.number} back); every night at "
            f"{hotel.name}. Budget hints: each day's transport and hotel plus an equal share of the rest."
        )
        while True:
            step = rs.raw(
                turn_text(think, (), [tool_call("distribute_task", subgoals=goals, transport_mode=out.mode)])
            )
            reply = next(r for r in step.responses if r.name == "distribute_task")
            if reply.is_error:
                raise ExpertFailure(f"distribute_task refused: {reply.text[:200]}")
            report = json.loads(reply.text)
            if report.get("fallback"):
                return self._fallback(rs, report, solver, hotel, places)
            goals, think = self._redistribute(report, goals, task)

    def _fallback(
        self, rs: RoleSession, report: dict[str, Any], solver: _Solver, hotel: Place, places
    ) -> None:
        """No rounds left and days open: plan the whole trip as the single-agent expert does, from
        the transport, hotel and places already searched, and hand it in (the team's accepted days
        are re-planned too, so the venues fit together). Only the weather and MapGuide are new
        calls, so the fallback fits in the coordinator's turns."""
        think = (
            f"Round {report['round']} left days {report['open_days']} open and no rounds are left: "
            "I plan the trip myself, day by day, and hand in every day. First the weather of every day."
        )
        call = tool_call("WeatherSearch", city=solver.city, date=solver.dates[0], n=solver.days)
        weather = {r["date"]: r for r in responses.items(rs.act(think, calls=[call])[0])}
        days, out, back = solver._plan_with_transport(hotel, *places)
        days = solver._step_map(days, hotel, out, back, *places)
        plan = solver._assemble(days, weather, out, back)
        days = [{k: d[k] for k in ("day", "activities", "weather", "city_info")} for d in plan]
        think = "Every day is timed with MapGuide's durations; handing in the whole plan."
        step = rs.raw(turn_text(think, (), [tool_call("submit_plan", days=days)]))
        reply = step.responses[-1]
        if reply.is_error or not step.done:
            raise ExpertFailure(f"submit_plan refused: {reply.text[:200]}")

    def _transport(self, rs: RoleSession, solver: _Solver) -> tuple[Option, Option]:
        legs = ((solver.origin, solver.city, solver.dates[0]), (solver.city, solver.origin, solver.dates[-1]))
        calls, kinds = solver._transport_calls(legs)
        think = (
            f"{solver.days} days {solver.origin} -> {solver.city} for {solver.people}, budget "
            f"{solver.budget:.0f} CNY. The trip needs one intercity mode: trains/flights both ways first."
        )
        replies = rs.act(think, calls=calls)
        half = len(kinds) // 2
        outbound = [
            o for i, (k, t) in enumerate(zip(kinds, replies)) if i < half for o in solver._options(k, t)
        ]
        returns = [
            o for i, (k, t) in enumerate(zip(kinds, replies)) if i >= half for o in solver._options(k, t)
        ]
        best = None
        for mode in ("train", "flight"):
            outs = sorted(
                (o for o in outbound if o.mode == mode and o.same_day_ok(21 * 60, 6 * 60)),
                key=lambda o: (o.price, o.arrive),
            )
            backs = sorted(
                (o for o in returns if o.mode == mode and o.same_day_ok(23 * 60, 7 * 60)),
                key=lambda o: (o.price, -o.depart),
            )
            if outs and backs and (best is None or outs[0].price + backs[0].price < best[0]):
                best = (outs[0].price + backs[0].price, outs[0], backs[0])
        if best is None:
            raise ExpertFailure("no daytime train or flight both ways in one mode")
        solver._choose_transport(outbound, returns)  # the single expert's options, for the fallback
        return best[1], best[2]

    def _hints(self, task, solver, out: Option, back: Option, hotel: Place) -> list[dict[str, Any]]:
        days = int(task["days"])
        night = hotel.price * solver.rooms
        fixed = [0.0] * days
        fixed[0] += out.price * solver.people
        fixed[-1] += back.price * solver.people
        for d in range(days - 1):
            fixed[d] += night
        share = (float(task["budget"]) - sum(fixed)) / days
        goals = []
        for d in range(days):
            hint = self.knobs.hint_override.get(d + 1, _floor2(fixed[d] + share))
            goals.append({"day": d + 1, "budget": hint, "hotel": hotel.name})  # city, type: the slot's
        return goals

    def _redistribute(self, report, goals, task) -> tuple[list[dict[str, Any]], str]:
        open_days = report["open_days"]
        previous = [g for g in goals if g["day"] in open_days]
        if not self.knobs.fix_rejections:
            return previous, f"Round {report['round']} left days {open_days} open; sending them again."
        left = float(report["budget_left"])
        total = sum(g["budget"] for g in goals if g["day"] in open_days)
        new = []
        for g in previous:
            share = g["budget"] / total if total > 0 else 1 / len(previous)
            new.append({**g, "budget": _floor2(left * share)})
        reasons = "; ".join(f"day {r['day']}: {r['code']}" for r in report["rejected"])
        think = (
            f"Round {report['round']}: {reasons}. The accepted days keep their plans; the open days "
            f"{open_days} share the {left:.0f} CNY left."
        )
        return new, think

    # -- executor --------------------------------------------------------------------------------
    def executor(self, rs: RoleSession, start: StreamStart) -> None:
        DayPlanner(rs, self.visible, self.hidden, start).run()
