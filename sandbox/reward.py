"""The RL reward of one episode (SPEC.md section 7), as every benchmark shapes it:
R = P_action + R_format * (R_C + R_UPC).

- P_action = -1 when any tool or memory response of the episode was an explicit error, else 0.
- R_format in {0, 1}: the answer was delivered (read and shaped like the trip).
- R_C, R_UPC: the fractions of the benchmark's two constraint groups that passed.

Each benchmark computes the fractions from its own verdict (B2T: sandbox.benchmarks.b2t.reward,
TravelPlanner: sandbox.benchmarks.travelplanner.reward); this module holds only the shared type.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

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
