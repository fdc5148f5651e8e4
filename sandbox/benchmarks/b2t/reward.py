"""B2T's reward (SPEC.md section 7): R = P_action + R_format * (R_C + R_UPC), where R_C and R_UPC
are the fractions of the 22 commonsense and 10 preference constraints passed.

Ablation switches: `action_penalty=False` drops P_action (always 0); `format_gate=False` drops
the gate: R_C and R_UPC are then the checks' own pass fractions even when a readable plan failed
the format check (wrong number of days or dates), so such a plan still earns partial credit; an
unreadable answer has nothing to check and earns 0 either way. The returned r_c / r_upc are the
fractions that entered the total.
"""

from __future__ import annotations

from sandbox.benchmarks.b2t.evaluator import EvalResult
from sandbox.reward import ACTION_ERROR_PENALTY, Reward


def compute_reward(
    eval_result: EvalResult | None,
    any_action_error: bool,
    *,
    action_penalty: bool = True,
    format_gate: bool = True,
) -> Reward:
    """Reward components for one episode; `eval_result` None means no answer was given."""
    p_action = ACTION_ERROR_PENALTY if (action_penalty and any_action_error) else 0.0
    if eval_result is None:
        return Reward(p_action, p_action, 0.0, 0.0, 0.0)
    r_format = 1.0 if eval_result.delivered else 0.0
    r_c = eval_result.pass_fraction("C", gated=format_gate)
    r_upc = eval_result.pass_fraction("UPC", gated=format_gate)
    gate = r_format if format_gate else 1.0
    return Reward(p_action + gate * (r_c + r_upc), p_action, r_format, r_c, r_upc)
