"""The RL reward of one episode (SPEC.md section 7): R = P_action + R_format * (R_C + R_UPC).

- P_action = -1 when any tool or memory response of the episode was an explicit error, else 0.
- R_format in {0, 1}: the plan was delivered (read and shaped like the trip).
- R_C, R_UPC: fractions of the 22 commonsense and 10 preference constraints passed.

Ablation switches: `action_penalty=False` drops P_action (always 0); `format_gate=False` drops
the gate: R_C and R_UPC are then the checks' own pass fractions even when a readable plan failed
the format check (wrong number of days or dates), so such a plan still earns partial credit; an
unreadable answer has nothing to check and earns 0 either way. The returned r_c / r_upc are the
fractions that entered the total.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sandbox.evaluator import EvalResult

ACTION_ERROR_PENALTY = -1.0


@dataclass(frozen=True)
class Reward:
    total: float
    p_action: float
    r_format: float
    r_c: float
    r_upc: float

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


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
