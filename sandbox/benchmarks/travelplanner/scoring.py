"""Score a plans file against a queries file: what `launch/eval.py --benchmark travelplanner` runs."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.benchmarks.travelplanner.database import DEFAULT_DATABASE_DIR, Database
from sandbox.benchmarks.travelplanner.evaluator import Evaluation, evaluate
from sandbox.benchmarks.travelplanner.loader import LoaderError, check_split, read_queries
from sandbox.benchmarks.travelplanner.metrics import breakdown, compute_metrics, format_table
from sandbox.benchmarks.travelplanner.submission import read_submission


@dataclass(frozen=True)
class FileScore:
    metrics: dict[str, float]
    groups: dict[tuple[str, int], dict]
    evaluations: list[Evaluation]
    mode: str
    split: str | None

    def table(self) -> str:
        return f"TravelPlanner {self.split or ''} ({self.mode} mode)\n" + format_table(
            self.metrics, self.groups
        )


def evaluate_files(
    queries_path: str | Path,
    plans_path: str | Path,
    split: str | None = None,
    mode: str = "official",
    database: Database | str | Path | None = None,
) -> FileScore:
    """Evaluate every plan of a submission file against the queries file (same order).

    `split` ("train" / "validation" / "test") checks the official size and uses the official metric
    constants; `database` is a Database or an official database directory (default: the copy
    shipped with the package). Raises LoaderError / SubmissionError / DatabaseError (one line)."""
    queries = read_queries(queries_path)
    if split is not None:
        check_split(queries, split)
    plans = read_submission(plans_path)
    if len(plans) != len(queries):
        raise LoaderError(f"{plans_path}: {len(plans)} plans for {len(queries)} queries in {queries_path}")
    db = database if isinstance(database, Database) else Database.from_dir(database or DEFAULT_DATABASE_DIR)
    results = [evaluate(q, p, db, mode=mode) for q, p in zip(queries, plans)]
    return FileScore(
        compute_metrics(queries, results, split), breakdown(queries, results), results, mode, split
    )


def score_summary(score: FileScore) -> dict[str, Any]:
    """A JSON-ready summary (metrics, per-group rates, how many plans the harness would raise on)."""
    return {
        "split": score.split,
        "mode": score.mode,
        **score.metrics,
        "official_raises": sum(e.official_raises for e in score.evaluations),
        "groups": {
            f"{level}-{days}": {k: v for k, v in row.items() if k != "passed"}
            for (level, days), row in score.groups.items()
        },
    }
