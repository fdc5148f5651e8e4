"""evaluate(): the 13 TravelPlanner verdicts of one plan, in `official` or `strict` mode.

`official` gives the official harness's verdicts, quirks included (the published numbers depend on
them). Where the harness would raise on a malformed plan, the check that raises is failed instead and
`official_raises` is set, so one bad plan never stops a run. `strict` fixes the quirks; the list is in
sandbox/benchmarks/travelplanner/README.md and in the docstrings of the checks.
"""

from dataclasses import dataclass, field
from typing import Any

from sandbox.benchmarks.travelplanner import commonsense, hard
from sandbox.benchmarks.travelplanner.database import Database
from sandbox.benchmarks.travelplanner.lookup import Lookup
from sandbox.benchmarks.travelplanner.query import QueryError, normalize_query

MODES = ("official", "strict")
COMMONSENSE_NAMES = tuple(commonsense.CHECKS)
HARD_NAMES = tuple(hard.CHECKS)
GATE = ("is_not_absent", "is_valid_information_in_sandbox")


@dataclass(frozen=True)
class Evaluation:
    """Verdicts of one plan.

    commonsense: the 8 checks (False for all when no plan was delivered).
    hard: the 5 checks, None when the gate (sandbox + completeness) failed, which counts every hard
      check as failed; a check is None when its constraint is absent from the query.
    official_raises: the official harness would raise on this plan (official mode only).
    error: why nothing could be judged (an unreadable query), else None."""

    commonsense: dict[str, bool | None]
    hard: dict[str, bool | None] | None
    official_raises: bool = False
    delivered: bool = True
    mode: str = "official"
    error: str | None = None
    raised_in: tuple[str, ...] = field(default=())

    @property
    def commonsense_pass(self) -> bool:
        return all(v is not False for v in self.commonsense.values()) and self.delivered

    @property
    def hard_pass(self) -> bool:
        """Every applicable hard check passed (False when the gate failed)."""
        return self.hard is not None and all(v is not False for v in self.hard.values())

    @property
    def final_pass(self) -> bool:
        return self.commonsense_pass and self.hard_pass

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready verdicts (for per-plan detail files)."""
        return {
            "mode": self.mode,
            "delivered": self.delivered,
            "final_pass": self.final_pass,
            "commonsense": dict(self.commonsense),
            "hard": None if self.hard is None else dict(self.hard),
            "official_raises": self.official_raises,
            "raised_in": list(self.raised_in),
            "error": self.error,
        }


def _failed(mode: str, delivered: bool, raises: bool = False, error: str | None = None) -> Evaluation:
    return Evaluation({name: False for name in COMMONSENSE_NAMES}, None, raises, delivered, mode, error)


def _run(checks: dict[str, Any], args: tuple) -> tuple[dict[str, bool | None], list[str]]:
    """Run each check; one that raises is failed and named in the second result."""
    verdicts: dict[str, bool | None] = {}
    raised = []
    for name, check in checks.items():
        try:
            verdict = check(*args)
            verdicts[name] = None if verdict is None else bool(verdict)
        except Exception:  # noqa: BLE001 - any error of a malformed plan is the harness raising
            verdicts[name] = False
            raised.append(name)
    return verdicts, raised


def evaluate(
    query: dict[str, Any], plan: list[dict[str, Any]] | None, db: Database, mode: str = "official"
) -> Evaluation:
    """Judge `plan` (a list of day dicts; None or [] = not delivered) for the structured `query`
    (as the official files give it, either key spelling). Never raises for any query or plan;
    an unknown `mode` is a programming error (ValueError)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    try:
        query = normalize_query(query)
    except (QueryError, AttributeError, TypeError) as err:  # e.g. a non-string constraint key
        return _failed(mode, bool(plan), error=f"query: {err}")
    if not plan:
        return _failed(mode, delivered=False)
    if not isinstance(plan, list):
        # The harness indexes the plan by day number: a dict or string plan makes it raise.
        return _failed(mode, True, raises=mode == "official", error="plan is not a list of days")
    lookup = Lookup(db, strict=mode == "strict")
    days = plan[: min(query["days"], len(plan))]
    verdicts, raised = _run(commonsense.CHECKS, (query, plan, days, lookup))
    hard_verdicts = None
    if all(verdicts[name] for name in GATE):
        hard_verdicts, hard_raised = _run(hard.CHECKS, (query, days, lookup))
        raised += hard_raised
    official = mode == "official"
    return Evaluation(
        verdicts,
        hard_verdicts,
        official and bool(raised),
        True,
        mode,
        raised_in=tuple(raised) if official else (),
    )
