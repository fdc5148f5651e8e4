"""The 32-constraint plan evaluator (SPEC.md section 5, paper Table 8).

`evaluate_plan(answer, instance, ground_truth, world) -> EvalResult`. One module per constraint
category registers its checks; `CONSTRAINTS` lists them in the paper's order (Format,
Authenticity, Reasonableness, Information richness, then the 10 Personalization/UPC checks).
"""

from sandbox.evaluator import (  # noqa: F401  (importing registers the checks, in order)
    authenticity, formatting, personalization, reasonableness, richness)
from sandbox.evaluator.evaluate import EvalResult, evaluate_plan
from sandbox.evaluator.registry import CATEGORIES, Constraint, ConstraintResult, registered

CONSTRAINTS: tuple[Constraint, ...] = tuple(
    sorted(registered(), key=lambda c: CATEGORIES.index(c.category)))
CONSTRAINT_NAMES: tuple[str, ...] = tuple(c.name for c in CONSTRAINTS)
C_NAMES = tuple(c.name for c in CONSTRAINTS if c.group == "C")
UPC_NAMES = tuple(c.name for c in CONSTRAINTS if c.group == "UPC")

__all__ = ["CONSTRAINTS", "CONSTRAINT_NAMES", "C_NAMES", "UPC_NAMES", "Constraint",
           "ConstraintResult", "EvalResult", "evaluate_plan"]
