"""TravelPlanner (Xie et al., 2024) as a benchmark: database, loader, plan reader, evaluator, metrics.

Pure Python (never imports jax). `evaluate(..., mode="official")` gives the official harness's
verdicts; `mode="strict"` fixes its quirks (see README.md in this package).
"""

from sandbox.benchmarks.travelplanner.database import Database, DatabaseError, Route
from sandbox.benchmarks.travelplanner.evaluator import Evaluation, evaluate
from sandbox.benchmarks.travelplanner.query import QueryError, normalize_query

__all__ = ["Database", "DatabaseError", "Evaluation", "QueryError", "Route", "evaluate", "normalize_query"]
