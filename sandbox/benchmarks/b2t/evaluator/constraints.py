"""The 32 checks in the paper's order (Format, Authenticity, Reasonableness, Information richness,
then the 10 Personalization/UPC checks).

Importing the category modules registers their checks; this module is the one place that does it,
so the evaluator and the package both read the finished list without importing each other.
"""

from sandbox.benchmarks.b2t.evaluator import (  # noqa: F401  (importing registers the checks)
    authenticity,
    formatting,
    personalization,
    reasonableness,
    richness,
)
from sandbox.benchmarks.b2t.evaluator.registry import CATEGORIES, Constraint, registered

CONSTRAINTS: tuple[Constraint, ...] = tuple(sorted(registered(), key=lambda c: CATEGORIES.index(c.category)))
CONSTRAINT_NAMES: tuple[str, ...] = tuple(c.name for c in CONSTRAINTS)
C_NAMES = tuple(c.name for c in CONSTRAINTS if c.group == "C")
UPC_NAMES = tuple(c.name for c in CONSTRAINTS if c.group == "UPC")
