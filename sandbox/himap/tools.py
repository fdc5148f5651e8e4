"""The protocol tools of each role, bound to one episode's session.

Coordinator: `information_extractor()` -> the task tuple; `distribute_task(subgoals,
transport_mode)` starts a round (its reply, the round report, comes when the round is over).
Executor of (day, round): `check_items(items)` / `commit_items(items)` against Σ (only with Σ and
early detection), `submit_day(...the domain's day fields)` ends the role with the day (with Σ during planning
the day is committed atomically first: a rejection is a normal reply and the executor goes on),
`reject_subgoal(reason, code)` ends the role refusing the sub-goal (only with bargaining).
Agent mistakes (bad arguments, a malformed day, a distribution that misses a day) are error
replies found at stage time; Σ's verdicts are never errors.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from sandbox.himap.domain import DAY_TYPES, SubGoal, dumps, subgoal_from_args
from sandbox.himap.roles import ProtocolTool, RoleEnv
from sandbox.tools.args import Param, ToolArgError, validate_arguments
from sandbox.types import ToolResult

if TYPE_CHECKING:
    from sandbox.himap.protocol import HimapSession

ROUND_PENDING = "\x00round-report-pending\x00"  # replaced by the round report when the round ends
_SUBGOAL_PARAMS = (
    Param("day", "integer", "day number", required=True),
    Param("budget", "number", "budget hint for the day (whole party)", required=True),
    Param("city", "string", "the day's city (default: the trip's)"),
    Param("day_type", "string", f"one of {', '.join(DAY_TYPES)} (default: the trip's)"),
)


def coordinator_tools(session: HimapSession) -> list[ProtocolTool]:
    domain = session.domain
    extra = tuple(domain.subgoal_fields)

    def extract(args: dict[str, Any]) -> ToolResult:
        return ToolResult(dumps(domain.task()))

    def check_distribution(args: dict[str, Any]) -> str | None:
        return _distribution_problem(session, args["subgoals"], args.get("transport_mode"), extra)

    def distribute(args: dict[str, Any]) -> ToolResult:
        session.start_round(_subgoals(session, args["subgoals"], extra), args.get("transport_mode"))
        return ToolResult(ROUND_PENDING)

    fields = ", ".join(p.name for p in _SUBGOAL_PARAMS + extra)
    return [
        ProtocolTool(
            "information_extractor",
            "Read the user's request into the task tuple: origin, destination(s), days, dates, people, "
            "budget, hard constraints and the preferences the user's behaviour shows.",
            (),
            extract,
        ),
        ProtocolTool(
            "distribute_task",
            f"Give every open day a sub-goal {{{fields}}} (budget hints plus accepted days' costs at "
            "most the total budget; name what you chose, its details reach the day planner) and "
            "the trip's one intercity transport mode "
            f"({' | '.join(domain.transport_modes)}). Replies with the round report when all day "
            "planners have finished.",
            (
                Param("subgoals", "array", f"one object per day: {fields}", required=True),
                Param("transport_mode", "string", " | ".join(domain.transport_modes)),
            ),
            distribute,
            check_distribution,
        ),
    ]


def _distribution_problem(
    session: HimapSession, subgoals: list[Any], mode: str | None, extra: tuple[Param, ...]
) -> str | None:
    domain = session.domain
    if mode is not None and mode not in domain.transport_modes:
        return f"transport_mode must be one of {list(domain.transport_modes)}, got {mode!r}"
    days, checked = [], []
    trip_days = [s.day for s in domain.slots()]
    for i, goal in enumerate(subgoals, 1):
        try:
            checked.append(validate_arguments(f"subgoal {i}", _SUBGOAL_PARAMS + extra, goal))
        except ToolArgError as err:
            return str(err)
        if checked[-1].get("day_type") is not None and checked[-1]["day_type"] not in DAY_TYPES:
            return f"subgoal {i}: day_type must be one of {list(DAY_TYPES)}, got {checked[-1]['day_type']!r}"
        if checked[-1]["budget"] < 0 or (domain.budget is not None and checked[-1]["budget"] > domain.budget):
            return f"subgoal {i}: the budget hint must be between 0 and the total budget"
        days.append(int(checked[-1]["day"]))
        if days[-1] not in trip_days:  # before the domain completes sub-goals from the day's slot
            return f"subgoal {i}: day {days[-1]} is not a day of the trip; the days are {trip_days}"
    for i, goal in enumerate(_subgoals(session, checked, extra), 1):
        details = domain.subgoal_details(goal)
        if isinstance(details, str):
            return f"subgoal {i}: {details}"
    if session.round >= session.options.rounds:
        return f"no rounds left (max_rounds {session.options.rounds})"
    open_days = session.open_days()
    if sorted(days) != open_days:
        accepted = sorted(set(days) - set(open_days))
        why = f"; day(s) {accepted} were accepted and keep their plans" if accepted else ""
        return f"give exactly one sub-goal to each open day {open_days}, got days {days}{why}"
    total = domain.budget
    hints = math.fsum(float(g["budget"]) for g in subgoals)
    if total is not None and hints + session.accepted_cost() > total + 1e-6:
        return (
            f"budget hints {hints:.2f} plus the accepted days' {session.accepted_cost():.2f} exceed "
            f"the total budget {total:.2f}"
        )
    return None


def _subgoals(session: HimapSession, raws: list[dict[str, Any]], extra: tuple[Param, ...]) -> list[SubGoal]:
    """The distribution's sub-goals, completed by the domain from each other and earlier rounds'."""
    raws = session.domain.complete_subgoals([dict(r) for r in raws], dict(session.goals))
    return [_subgoal(session, raw, extra) for raw in raws]


def _subgoal(session: HimapSession, raw: dict[str, Any], extra: tuple[Param, ...]) -> SubGoal:
    """A sub-goal from a checked distribute_task entry; city and day type default to the day's slot."""
    slot = {s.day: s for s in session.domain.slots()}.get(int(raw["day"]))
    if slot is not None:
        raw = {
            "city": slot.city,
            "day_type": slot.day_type,
            **{k: v for k, v in raw.items() if v is not None},
        }
    return subgoal_from_args(raw, [p.name for p in extra])


def executor_tools(session: HimapSession, goal: SubGoal, env_ref: list[RoleEnv]) -> list[ProtocolTool]:
    """`env_ref[0]` is the executor's environment (made after its tools): ending tools mark it."""
    domain, options, day = session.domain, session.options, goal.day
    items_param = Param("items", "array", domain.item_description, required=True)
    tools = []
    if options.sigma_while_planning:

        def sigma_op(op: str):
            def run(args: dict[str, Any]) -> ToolResult:
                # Items go to Σ as written: one that names another day is refused there (an
                # executor reserves only for its own day), one without a day gets this one.
                verdict = getattr(session.sigma, op)(day, args["items"])
                return ToolResult(
                    verdict.message if verdict.ok else f"{verdict.code.value}: {verdict.message}"
                )

            return run

        tools += [
            ProtocolTool(
                "check_items",
                "Would these items fit the shared state now (budget, venues taken, visited before, "
                "mode lock)? Changes nothing.",
                (items_param,),
                sigma_op("check"),
            ),
            ProtocolTool(
                "commit_items",
                "Reserve these items for your day in the shared state.",
                (items_param,),
                sigma_op("commit"),
            ),
        ]

    def day_of(args: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in args.items() if v is not None}

    def check_day(args: dict[str, Any]) -> str | None:
        return domain.day_problem(goal, day_of(args))

    def submit(args: dict[str, Any]) -> ToolResult:
        return session.submit_day(env_ref[0], goal, day_of(args))

    tools.append(
        ProtocolTool(
            "submit_day",
            "Hand in your day in the plan's format. Ends your work unless the shared state rejects the day.",
            tuple(domain.day_fields()),
            submit,
            check_day,
            ends_role=True,
        )
    )
    if options.bargaining and options.coordinator:
        codes = domain.reject_codes

        def check_reject(args: dict[str, Any]) -> str | None:
            code = args.get("code") or "other"
            return None if code in codes else f"code must be one of {list(codes)}, got {code!r}"

        def reject(args: dict[str, Any]) -> ToolResult:
            env_ref[0].ending = ("rejected", (args.get("code") or "other", args["reason"]))
            return ToolResult(f"rejected: the coordinator will re-plan day {day}")

        tools.append(
            ProtocolTool(
                "reject_subgoal",
                "Refuse your sub-goal when it cannot be met; say why. Ends your work.",
                (
                    Param("reason", "string", "what makes the sub-goal infeasible", required=True),
                    Param("code", "string", " | ".join(codes)),
                ),
                reject,
                check_reject,
                ends_role=True,
            )
        )
    return tools
