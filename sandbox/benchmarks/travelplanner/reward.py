"""The RL reward of one TravelPlanner episode, with B2T's formula and switches (SPEC.md section 7):

    R = P_action + R_format x (commonsense fraction + applicable hard fraction)

- P_action = -1 when any tool or memory response of the episode was an error (`action_penalty`).
- R_format = 1 when a plan was delivered and shaped like the trip (exactly `days` non-empty day
  entries; trailing `{}` padding is allowed as in the official files), else 0.
- commonsense fraction = checks not failed / 8; hard fraction = passed / applicable hard checks
  (a check whose constraint the query lacks is not applicable; the budget always is), and 0 when
  the evaluator's gate (sandbox + completeness) failed, since every hard check then counts failed.
`format_gate=False` drops the R_format factor: a delivered plan with the wrong number of days still
earns the fractions the evaluator gives it. No answer earns only P_action. Total is in [-1, 2].
"""

from __future__ import annotations

from typing import Any

from sandbox.benchmarks.travelplanner.evaluator import Evaluation
from sandbox.reward import ACTION_ERROR_PENALTY, Reward


def shaped_like_trip(plan: Any, days: int) -> bool:
    """`days` non-empty day dicts, then only empty padding."""
    if not isinstance(plan, list):
        return False
    filled = [d for d in plan if d]
    return len(filled) == days and all(isinstance(d, dict) for d in filled) and all(plan[:days])


def fractions(evaluation: Evaluation) -> tuple[float, float]:
    """(commonsense fraction, applicable hard fraction) of one evaluation."""
    commonsense = evaluation.commonsense
    c = sum(v is not False for v in commonsense.values()) / len(commonsense) if evaluation.delivered else 0.0
    if evaluation.hard is None:
        return c, 0.0
    applicable = [v for v in evaluation.hard.values() if v is not None]
    return c, (sum(bool(v) for v in applicable) / len(applicable) if applicable else 1.0)


def compute_reward(
    evaluation: Evaluation | None,
    shaped: bool,
    any_action_error: bool,
    *,
    action_penalty: bool = True,
    format_gate: bool = True,
) -> Reward:
    """Reward components (Reward.r_c = commonsense, Reward.r_upc = hard fraction); `evaluation`
    None means no answer was given."""
    p_action = ACTION_ERROR_PENALTY if (action_penalty and any_action_error) else 0.0
    if evaluation is None:
        return Reward(p_action, p_action, 0.0, 0.0, 0.0)
    r_format = 1.0 if (evaluation.delivered and shaped) else 0.0
    r_c, r_hard = fractions(evaluation)
    gate = r_format if format_gate else 1.0
    return Reward(p_action + gate * (r_c + r_hard), p_action, r_format, r_c, r_hard)
