"""TravelPlanner (Xie et al., 2024) as a benchmark: database, loader, plan reader, evaluator, metrics.

Pure Python (never imports jax). `evaluate(..., mode="official")` gives the official harness's
verdicts; `mode="strict"` fixes its quirks (see README.md in this package).
"""

from sandbox.travelplanner.database import Database, DatabaseError, Route

__all__ = ["Database", "DatabaseError", "Route"]
