"""Evaluate one plan against its instance: the 32 constraint results and their summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sandbox.benchmarks.b2t.evaluator.constraints import CONSTRAINTS
from sandbox.benchmarks.b2t.evaluator.context import EvalContext, Profile, parse_query
from sandbox.benchmarks.b2t.evaluator.lookup import index_for
from sandbox.benchmarks.b2t.evaluator.registry import ConstraintResult, summarize
from sandbox.benchmarks.b2t.plan import Plan, read_plan


@dataclass
class EvalResult:
    """The verdict on one plan. Undelivered plans fail every constraint (R_format = 0)."""

    delivered: bool
    results: list[ConstraintResult]
    reason: str = ""  # why the plan was not delivered
    instance_id: str | None = None
    difficulty: str | None = None
    # The checks' own outcomes when a readable plan failed the format check (for the "no format
    # gate" ablation); None when they equal `results`.
    ungated: list[ConstraintResult] | None = None
    _by_name: dict[str, ConstraintResult] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self._by_name = {r.name: r for r in self.results}

    def __getitem__(self, name: str) -> ConstraintResult:
        return self._by_name[name]

    def pass_fraction(self, group: str, gated: bool = True) -> float:
        """Share of a group's ("C" or "UPC") constraints passed; `gated=False` ignores Format."""
        source = self.results if gated or self.ungated is None else self.ungated
        group_results = [r for r in source if r.group == group]
        return sum(r.passed for r in group_results) / len(group_results) if group_results else 0.0

    @property
    def c_pass_fraction(self) -> float:
        return self.pass_fraction("C")

    @property
    def upc_pass_fraction(self) -> float:
        return self.pass_fraction("UPC")

    @property
    def all_passed(self) -> bool:
        return self.delivered and all(r.passed for r in self.results)

    @property
    def failed(self) -> list[ConstraintResult]:
        return [r for r in self.results if not r.passed]

    def to_dict(self) -> dict:
        return {
            "id": self.instance_id,
            "difficulty": self.difficulty,
            "delivered": self.delivered,
            "reason": self.reason,
            "results": {r.name: {"passed": r.passed, "reason": r.reason} for r in self.results},
        }


def _undelivered(reason: str, instance: dict, ungated: list[ConstraintResult] | None = None) -> EvalResult:
    results = [
        ConstraintResult(
            c.name, c.category, c.group, False, reason if c.category == "Format" else "plan not delivered"
        )
        for c in CONSTRAINTS
    ]
    return EvalResult(False, results, reason, *_ids(instance), ungated=ungated)


def _ids(instance: Any) -> tuple[str | None, str | None]:
    if not isinstance(instance, dict):
        return None, None
    return instance.get("id"), instance.get("difficulty")


def evaluate_plan(answer: Any, instance: dict | None, ground_truth: dict, world: Any) -> EvalResult:
    """Judge an answer (`<answer>` text, parsed JSON or a Plan) on all 32 constraints.

    `instance` is the visible instance (only its id and difficulty are used), `ground_truth` the
    hidden query + profile, `world` a World, a store path or a DATA directory. Never raises on
    bad answers; a bad world or ground truth is a programming error and does raise.
    """
    if isinstance(answer, Plan):
        plan, reason = answer, ""
    else:
        read = read_plan(answer)
        plan, reason = read.plan, read.reason
    if plan is None:
        return _undelivered(reason, instance)
    ctx = EvalContext(plan, parse_query(ground_truth), Profile(ground_truth), index_for(world))
    results = []
    for c in CONSTRAINTS:
        violations = c.check(ctx)
        results.append(ConstraintResult(c.name, c.category, c.group, not violations, summarize(violations)))
    if not results[0].passed:  # CONSTRAINTS[0] is the format check
        return _undelivered(results[0].reason, instance, ungated=results)
    return EvalResult(True, results, "", *_ids(instance))
