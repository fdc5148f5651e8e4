"""The 32-constraint plan evaluator (SPEC.md section 5, paper Table 8).

`evaluate_plan(answer, instance, ground_truth, world) -> EvalResult`. One module per constraint
category registers its checks; `CONSTRAINTS` lists them in the paper's order (Format,
Authenticity, Reasonableness, Information richness, then the 10 Personalization/UPC checks).
"""

from sandbox.benchmarks.b2t.evaluator.constraints import C_NAMES, CONSTRAINT_NAMES, CONSTRAINTS, UPC_NAMES
from sandbox.benchmarks.b2t.evaluator.evaluate import EvalResult, evaluate_plan
from sandbox.benchmarks.b2t.evaluator.registry import Constraint, ConstraintResult

__all__ = [
    "CONSTRAINTS",
    "CONSTRAINT_NAMES",
    "C_NAMES",
    "UPC_NAMES",
    "Constraint",
    "ConstraintResult",
    "EvalResult",
    "evaluate_plan",
]
