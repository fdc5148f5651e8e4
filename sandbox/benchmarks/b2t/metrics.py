"""Benchmark metrics over a set of evaluated plans (SPEC.md section 5, TravelPlanner convention).

- Delivery rate: plans delivered (readable and shaped like the trip) / plans.
- Micro pass rate of a group (C: 22 commonsense, UPC: 10 preference constraints): constraints
  passed / (plans x constraints in the group).
- Macro pass rate of a group: plans passing every constraint of the group / plans.
- Final pass rate: plans passing all 32 / plans.
- Per-constraint pass rate: plans passing it / plans.
Undelivered plans count as failing every constraint. All values are fractions in [0, 1].
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sandbox.benchmarks.b2t.evaluator import C_NAMES, CONSTRAINT_NAMES, UPC_NAMES, EvalResult

DIFFICULTY_ORDER = ("easy", "medium", "hard")
SUMMARY_KEYS = ("delivery_rate", "c_micro", "c_macro", "upc_micro", "upc_macro", "final_pass_rate")
_HEADERS = ("Delivery", "C micro", "C macro", "UPC micro", "UPC macro", "Final")


def _passed(result: EvalResult) -> dict[str, bool]:
    return {r.name: r.passed for r in result.results}


def group_metrics(results: Sequence[EvalResult]) -> dict:
    """Summary metrics and per-constraint pass rates of one set of plans."""
    n = len(results)
    if n == 0:
        return {
            "n": 0,
            **{k: 0.0 for k in SUMMARY_KEYS},
            "per_constraint": {name: 0.0 for name in CONSTRAINT_NAMES},
        }
    passed = [_passed(r) for r in results]
    c_all = [all(p[name] for name in C_NAMES) for p in passed]
    upc_all = [all(p[name] for name in UPC_NAMES) for p in passed]
    return {
        "n": n,
        "delivery_rate": sum(r.delivered for r in results) / n,
        "c_micro": sum(p[name] for p in passed for name in C_NAMES) / (n * len(C_NAMES)),
        "c_macro": sum(c_all) / n,
        "upc_micro": sum(p[name] for p in passed for name in UPC_NAMES) / (n * len(UPC_NAMES)),
        "upc_macro": sum(upc_all) / n,
        "final_pass_rate": sum(c and u for c, u in zip(c_all, upc_all)) / n,
        "per_constraint": {name: sum(p[name] for p in passed) / n for name in CONSTRAINT_NAMES},
    }


def _difficulty_key(name: str) -> tuple[int, str]:
    return (DIFFICULTY_ORDER.index(name) if name in DIFFICULTY_ORDER else len(DIFFICULTY_ORDER), name)


def compute_metrics(results: Sequence[EvalResult]) -> dict:
    """Overall metrics plus `per_difficulty` (difficulty -> the same summary)."""
    groups: dict[str, list[EvalResult]] = defaultdict(list)
    for result in results:
        groups[result.difficulty or "unknown"].append(result)
    metrics = group_metrics(results)
    metrics["per_difficulty"] = {
        name: group_metrics(groups[name]) for name in sorted(groups, key=_difficulty_key)
    }
    return metrics


def format_table(metrics: dict) -> str:
    """The metrics as two plain-text tables (summary rows; per-constraint pass rates)."""
    rows = [("all", metrics)] + list(metrics.get("per_difficulty", {}).items())
    width = max(10, *(len(name) for name, _ in rows))
    lines = [f"{'split':<{width}} {'n':>6} " + " ".join(f"{h:>9}" for h in _HEADERS)]
    for name, m in rows:
        lines.append(f"{name:<{width}} {m['n']:>6} " + " ".join(f"{100 * m[k]:>8.1f}%" for k in SUMMARY_KEYS))
    lines.append("")
    names = [name for name, _ in rows]
    cwidth = max(len(n) for n in CONSTRAINT_NAMES)
    lines.append(f"{'constraint':<{cwidth}} " + " ".join(f"{n:>8}" for n in names))
    for constraint in CONSTRAINT_NAMES:
        lines.append(
            f"{constraint:<{cwidth}} "
            + " ".join(f"{100 * m['per_constraint'][constraint]:>7.1f}%" for _, m in rows)
        )
    return "\n".join(lines)
