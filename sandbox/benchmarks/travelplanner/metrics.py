"""TravelPlanner metrics, computed as the official evaluation script computes them.

Over N queries (N is the official split size for train/validation/test):
- Delivery rate: plans present and non-empty / N.
- Commonsense micro: passed commonsense checks / (8 N); macro: plans passing all 8 / N.
- Hard micro: passed hard checks / the official constant for the split (105 / 420 / 2,290; for other
  query sets the same count the script derives: every query's budget, medium queries' house rule,
  cuisine and room type, hard queries' four constraints, when present). Note the official quirk: a
  transportation constraint of a MEDIUM query is not in the denominator, but its passes are counted.
- Hard macro: plans with the gate passed and no failed hard check / N.
- Final pass rate: plans passing all commonsense and every applicable hard check / N.
Plus a per level x days breakdown and a text table.
"""

from collections import defaultdict
from typing import Any

from sandbox.benchmarks.travelplanner.evaluator import COMMONSENSE_NAMES, HARD_NAMES, Evaluation
from sandbox.benchmarks.travelplanner.loader import SPLIT_SIZES

HARD_DENOMINATORS = {"train": 105, "validation": 420, "test": 2290}
METRIC_NAMES = (
    "delivery_rate",
    "commonsense_micro",
    "commonsense_macro",
    "hard_micro",
    "hard_macro",
    "final_pass_rate",
)
_SHORT = {
    "delivery_rate": "delivery",
    "commonsense_micro": "cs micro",
    "commonsense_macro": "cs macro",
    "hard_micro": "hard micro",
    "hard_macro": "hard macro",
    "final_pass_rate": "final pass",
}
# Which hard checks a query of each level contributes to the official denominator.
_COUNTED_HARD = {
    "easy": ("valid_cost",),
    "medium": ("valid_cost", "valid_room_rule", "valid_cuisine", "valid_room_type"),
    "hard": HARD_NAMES,
}
_CONSTRAINT_OF = {
    "valid_room_rule": "house rule",
    "valid_cuisine": "cuisine",
    "valid_room_type": "room type",
    "valid_transportation": "transportation",
}


def present_hard(query: dict[str, Any], names: tuple[str, ...] = HARD_NAMES) -> int:
    """How many of these hard checks apply to the query (the budget always does)."""
    return sum(
        1
        for name in names
        if name == "valid_cost" or query["local_constraint"][_CONSTRAINT_OF[name]] is not None
    )


def applicable_hard(query: dict[str, Any]) -> int:
    """How many hard checks of this query the official denominator counts (by its level; a query
    without a known level counts every applicable check)."""
    return present_hard(query, _COUNTED_HARD.get(query.get("level"), HARD_NAMES))


def _counts(
    queries: list[dict[str, Any]], results: list[Evaluation], official: bool = True
) -> dict[str, int]:
    counts = defaultdict(int)
    for query, result in zip(queries, results, strict=True):
        counts["n"] += 1
        counts["applicable_hard"] += applicable_hard(query) if official else present_hard(query)
        if not result.delivered:
            continue
        counts["delivered"] += 1
        counts["commonsense_passed"] += sum(v is True for v in result.commonsense.values())
        counts["hard_passed"] += sum(v is True for v in (result.hard or {}).values())
        counts["commonsense_macro"] += result.commonsense_pass
        counts["hard_macro"] += result.hard_pass
        counts["final"] += result.final_pass
    return counts


def _rates(counts: dict[str, int], n: int, hard_total: int) -> dict[str, float]:
    def ratio(a: int, b: int) -> float:
        return a / b if b else 0.0

    return {
        "delivery_rate": ratio(counts["delivered"], n),
        "commonsense_micro": ratio(counts["commonsense_passed"], len(COMMONSENSE_NAMES) * n),
        "commonsense_macro": ratio(counts["commonsense_macro"], n),
        "hard_micro": ratio(counts["hard_passed"], hard_total),
        "hard_macro": ratio(counts["hard_macro"], n),
        "final_pass_rate": ratio(counts["final"], n),
    }


def compute_metrics(
    queries: list[dict[str, Any]], results: list[Evaluation], split: str | None = None
) -> dict[str, float]:
    """The six official rates; `split` fixes N and the hard denominator to the official constants."""
    counts = _counts(queries, results)
    n = SPLIT_SIZES[split] if split else counts["n"]
    hard_total = HARD_DENOMINATORS[split] if split else counts["applicable_hard"]
    return _rates(counts, n, hard_total)


def breakdown(queries: list[dict[str, Any]], results: list[Evaluation]) -> dict[tuple[str, int], dict]:
    """Per (level, days): the six rates over that group, plus per-check pass counts {"n", "passed":
    {check: count}}. The group's hard micro rate divides by every applicable hard check (not the
    official level rule, which would put a medium group's transportation passes over 100%)."""
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for index, query in enumerate(queries):
        groups[(query.get("level") or "easy", query["days"])].append(index)
    table = {}
    for key in sorted(groups, key=lambda k: (("easy", "medium", "hard").index(k[0]), k[1])):
        qs = [queries[i] for i in groups[key]]
        rs = [results[i] for i in groups[key]]
        counts = _counts(qs, rs, official=False)
        passed = {name: sum(r.commonsense.get(name) is True for r in rs) for name in COMMONSENSE_NAMES}
        passed.update({name: sum((r.hard or {}).get(name) is True for r in rs) for name in HARD_NAMES})
        table[key] = {
            **_rates(counts, counts["n"], counts["applicable_hard"]),
            "n": counts["n"],
            "passed": passed,
        }
    return table


def format_table(metrics: dict[str, float], groups: dict[tuple[str, int], dict] | None = None) -> str:
    """Metrics as percentages, then one line per level x days group."""
    lines = [f"{name:<20} {100 * metrics[name]:6.2f}%" for name in METRIC_NAMES]
    if groups:
        head = "level   days    n " + " ".join(f"{_SHORT[n]:>11}" for n in METRIC_NAMES)
        lines += ["", head]
        for (level, days), row in groups.items():
            rates = " ".join(f"{100 * row[n]:10.1f}%" for n in METRIC_NAMES)
            lines.append(f"{level:<7} {days:>4} {row['n']:>4} {rates}")
    return "\n".join(lines)
