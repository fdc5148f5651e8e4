"""Bargaining's last resort: the coordinator hands in the plan of the days the rounds left open.

Without it an episode whose last round still has a rejected day delivers that day empty (no
hotel, no meals, no sights), which is worse than any single agent. With it (`HimapOptions.fallback`,
only with a coordinator and bargaining) the last round report says `"fallback": true` and the
coordinator may call `submit_plan(days)`: it names every open day and may include accepted days
too (they are re-planned: the plan a single agent would write need not fit around the team's
accepted days). Σ releases the named days and commits them all, in day order, atomically: a Σ
rejection is a normal reply and nothing changes. Accepted, the named days become the coordinator's
(their executors' outcomes turn `replaced`) and the episode ends. The session counts the open
days the fallback filled (`figures().fallback_days`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sandbox.himap.domain import SubGoal
from sandbox.himap.kinds import COORDINATOR, DayOutcome, DayStatus, Ending, EndKind
from sandbox.himap.roles import ProtocolTool, RoleEnv
from sandbox.tools.args import Param, ToolArgError, validate_arguments
from sandbox.types import ToolResult

if TYPE_CHECKING:
    from sandbox.himap.domain import HimapDomain
    from sandbox.himap.protocol import HimapSession
    from sandbox.himap.state import GlobalState


def submit_plan_tool(session: HimapSession) -> ProtocolTool:
    """The coordinator's submit_plan."""
    domain = session.domain
    day_param = Param("day", "integer", "day number", required=True)
    fields = (day_param, *domain.day_fields())
    names = ", ".join(p.name for p in fields)

    def parsed(args: dict[str, Any]) -> dict[int, dict[str, Any]] | str:
        days: dict[int, dict[str, Any]] = {}
        for i, raw in enumerate(args["days"], 1):
            try:
                checked = validate_arguments(f"days[{i}]", fields, raw)
            except ToolArgError as err:
                return str(err)
            day = int(checked.pop("day"))
            if day in days or session.goal_of(day) is None:
                return f"days[{i}]: day {day} is not a day of the trip or is given twice"
            days[day] = {k: v for k, v in checked.items() if v is not None}
        return days

    def check(args: dict[str, Any]) -> str | None:
        if not session.fallback_open:
            return "submit_plan is only open after the last round left days open"
        days = parsed(args)
        if isinstance(days, str):
            return days
        missing = sorted(set(session.open_days()) - set(days))
        if missing:
            return f"give a plan for every open day {session.open_days()}; missing {missing}"
        for day, plan in sorted(days.items()):
            problem = domain.day_problem(session.goal_of(day), plan)
            if problem:
                return f"day {day}: {problem}"
        return None

    def run(env: RoleEnv, args: dict[str, Any]) -> ToolResult:
        days = parsed(args)
        assert not isinstance(days, str)  # check() passed
        return submit_plan(session, env, days)

    return ProtocolTool(
        "submit_plan",
        "Only after the last round left days open: write those days yourself, one object per day "
        f"{{{names}}}; accepted days you include are re-planned. Ends the episode when the shared "
        "state accepts the days.",
        (Param("days", "array", f"one object per day: {names}", required=True),),
        run,
        check,
        ends_role=True,
    )


def submit_plan(session: HimapSession, env: RoleEnv, days: dict[int, dict[str, Any]]) -> ToolResult:
    """submit_plan's effect: the named days replace what they had, committed to Σ in day order and
    atomically; accepted, the episode ends."""
    goals = {d: goal_for_slot(session, d) for d in days}
    sigma = session.sigma
    cost = commit_days(sigma, session.domain, goals, days) if sigma else dict.fromkeys(days)
    if isinstance(cost, str):
        return ToolResult(f"not accepted: {cost}. Change the plan and submit again.")
    session.fallback_days = [d for d in session.open_days() if d in days]
    for d in sorted(days):
        if d in session.accepted:
            session.accepted[d].status = DayStatus.REPLACED
        outcome = DayOutcome(d, session.round, COORDINATOR, DayStatus.ACCEPTED, cost=cost[d], plan=days[d])
        session.accepted[d] = outcome
        session.outcomes.append(outcome)
    env.ending = Ending(EndKind.FALLBACK, days=tuple(session.fallback_days))
    return ToolResult(f"accepted: days {sorted(days)} are the coordinator's; the plan is complete.")


def goal_for_slot(session: HimapSession, day: int) -> SubGoal | None:
    """The day's latest sub-goal, or one made from its slot (a day never distributed)."""
    if day in session.goals:
        return session.goals[day]
    slot = next((s for s in session.domain.slots() if s.day == day), None)
    if slot is None:
        return None
    return SubGoal(slot.day, slot.city, None, slot.day_type, session.mode, slot.date)


def commit_days(
    sigma: GlobalState, domain: HimapDomain, goals: dict[int, SubGoal], days: dict[int, dict[str, Any]]
) -> dict[int, float | None] | str:
    """Replace the named days' commits with these days, in day order, all or nothing: each day's
    cost, or Σ's rejection ("code: message") with Σ as it was."""
    before = {d: sigma.committed(d) for d in days}
    for d in days:
        sigma.release(d)
    cost: dict[int, float | None] = {}
    for d in sorted(days):
        verdict = sigma.commit(d, domain.day_items(goals[d], days[d]))
        if not verdict.ok:
            for k in days:
                sigma.release(k)
            for k in sorted(days):
                if before[k]:
                    sigma.commit(k, before[k])
            return f"{verdict.code.value}: {verdict.message}"
        cost[d] = verdict.cost
    return cost
