"""Metrics over TravelPlanner verdicts, with the official script's definitions and a level x days
breakdown:

- delivery rate: plans present and non-empty / N;
- commonsense micro: checks passed / (8 N); macro: plans passing all 8 / N;
- hard micro: hard checks passed / applicable hard checks (gated plans count their applicable
  checks as failed); macro: plans passing every applicable hard check / N;
- final pass rate: plans passing everything / N.
The official script divides hard micro by fixed constants (105 / 420 / 2,290 for train /
validation / test); those equal the applicable counts of the official splits, which is what this
computes for any set of queries.
"""

from __future__ import annotations

from typing import Any, Sequence

KEYS = ("n", "delivery_rate", "commonsense_micro", "commonsense_macro", "hard_micro", "hard_macro",
        "final_pass_rate")


def _group(verdicts: Sequence[Any]) -> dict[str, float]:
    n = len(verdicts)
    if n == 0:
        return {k: 0.0 for k in KEYS} | {"n": 0}
    cs_passed = sum(sum(v is True for v in x.evaluation.commonsense.values()) for x in verdicts)
    applicable = sum(x.applicable_hard for x in verdicts)
    hard_passed = sum(sum(v is True for v in (x.evaluation.hard or {}).values()) for x in verdicts)
    return {"n": n,
            "delivery_rate": sum(x.delivered for x in verdicts) / n,
            "commonsense_micro": cs_passed / (8 * n),
            "commonsense_macro": sum(x.evaluation.commonsense_pass for x in verdicts) / n,
            "hard_micro": hard_passed / applicable if applicable else 0.0,
            "hard_macro": sum(x.evaluation.hard_pass for x in verdicts) / n,
            "final_pass_rate": sum(x.all_passed for x in verdicts) / n}


def compute_metrics(verdicts: Sequence[Any]) -> dict[str, Any]:
    """The metrics overall and per "level-days" group (e.g. "hard-5")."""
    groups: dict[str, list[Any]] = {}
    for v in verdicts:
        groups.setdefault(f"{v.level}-{v.days}", []).append(v)
    return {**_group(verdicts), "per_level_days": {k: _group(g) for k, g in sorted(groups.items())}}


def format_metrics(metrics: dict[str, Any]) -> str:
    """A plain-text table: one row overall, one per level x days group."""
    header = f"{'group':<10}" + "".join(f"{k:>19}" for k in KEYS)
    rows = [("all", metrics), *metrics.get("per_level_days", {}).items()]
    lines = [header]
    for name, m in rows:
        lines.append(f"{name:<10}{m['n']:>19}" + "".join(f"{m[k] * 100:>18.2f}%" for k in KEYS[1:]))
    return "\n".join(lines)
