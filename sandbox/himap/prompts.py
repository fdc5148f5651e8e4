"""Role prompts of HiMAP (one policy, conditioned by the role's system message).

The coordinator sees the user's request exactly as the single agent does (the benchmark's user
message: for B2T the behaviour trajectory and the instruction). An executor sees ONLY its
sub-goal and the task essentials (the task tuple, which summarises preferences without quoting
the trajectory): context isolation. Without a coordinator (flat ablation) an executor also sees
the instruction text, never the trajectory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sandbox.himap.domain import SubGoal, dumps
from sandbox.types import Prompt

SUBGOAL_PREFIX = "Your sub-goal: "  # the executor prompt line that states its sub-goal
ACTIONS = (
    "Each turn: think briefly inside <think></think>, then call one or more tools with "
    '<tool_call>{"name": ..., "arguments": {...}}</tool_call>; several calls in one turn run '
    "together and their results come back in the next message. Never guess facts: look them up."
)

COORDINATOR = (
    "You are the coordinator of a team of travel planners. You do not plan days yourself: read the "
    "request with information_extractor, decide the trip's shape (the city and day type of every "
    "day, one intercity transport mode for the whole trip, and what else the day planners must "
    "share), then call distribute_task once with one sub-goal per day whose budget hints add up to "
    "at most the total budget. Name what you chose (a hotel, a stay); the day planners get its "
    "details. One day planner per day plans its day in parallel with the others. The reply to "
    "distribute_task is the round report: accepted days, rejected days with the reason, the "
    "budget left and the open days. Then re-distribute only the rejected days (change the budget "
    "hint, the city, the route or the mode); accepted days keep their plans. If days are still "
    "open after the last round, write them yourself with submit_plan (you may re-plan accepted "
    "days with them); otherwise the accepted days are merged into the final plan."
)

EXECUTOR = (
    "You are a day planner in a team of travel planners. Plan exactly one day of the trip: the "
    "sub-goal below gives the day, its city, its type and a budget hint. Search what you need, "
    "then call submit_day with the day's activities in time order. Other planners plan the other "
    "days at the same time and share one budget and one set of venues: no restaurant or "
    "attraction may appear twice in the trip."
)
EXECUTOR_SIGMA = (
    "check_items tells you whether items would fit the shared state now (budget, venues already "
    "taken, visited before, transport mode lock) without changing it; commit_items reserves them "
    "for your day; submit_day commits the whole day. A rejection names the rule it broke: pick "
    "another place and try again."
)
EXECUTOR_REJECT = (
    "If the sub-goal cannot be met (for instance, no day fits the budget hint), call "
    "reject_subgoal with the reason, and the coordinator will re-plan."
)


COORDINATOR_SHARES = (
    "Every day planner is shown the results of your {tools} calls: search those once for the "
    "whole trip (enough places for every day), so the day planners need not search them again."
)
EXECUTOR_LOOKUPS = "The coordinator's searches, shown to every day planner of the trip:"


def coordinator_prompt(
    request: list[dict[str, str]], tools: list[dict[str, Any]], shares: tuple[str, ...] = ()
) -> Prompt:
    """`request`: the benchmark's user message(s) (the single agent's prompt without its system);
    `shares`: the world tools whose results the executors are shown (HimapDomain.shared_lookups)."""
    notes = [COORDINATOR_SHARES.format(tools=", ".join(shares))] if shares else []
    system = "\n\n".join([COORDINATOR, *notes, ACTIONS])
    return Prompt([{"role": "system", "content": system}, *request], tools, memory=False)


def executor_prompt(
    goal: SubGoal,
    task: dict[str, Any],
    brief: str,
    tools: list[dict[str, Any]],
    *,
    sigma: bool,
    can_reject: bool,
    instruction: str | None = None,
    lookups: Sequence[str] = (),
) -> Prompt:
    """The isolated context of one day executor; `lookups`: the coordinator's shared searches,
    each a rendered call and its response."""
    system = "\n\n".join(
        [EXECUTOR, *([EXECUTOR_SIGMA] if sigma else []), *([EXECUTOR_REJECT] if can_reject else []), ACTIONS]
    )
    # What every day of the episode shares comes first (instruction, trip essentials, the
    # coordinator's searches), then the day's own sub-goal: the executors' prompts share one long
    # token prefix that the engine's prefix reuse computes once per episode.
    parts = [f"Trip essentials: {dumps(task)}"]
    if lookups:
        parts.append("\n".join([EXECUTOR_LOOKUPS, *lookups]))
    parts.append(f"{SUBGOAL_PREFIX}{dumps(goal.to_dict())}")
    if instruction is not None:
        parts.insert(0, f"The traveller's request: {instruction}")
    if brief:
        parts.append(brief)
    return Prompt(
        [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(parts)}],
        tools,
        memory=False,
    )
