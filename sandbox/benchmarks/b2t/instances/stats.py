"""Table 2-style statistics of a benchmark: per split and difficulty, the paper's five means."""

from typing import Any

from sandbox.benchmarks.b2t.instances.profiles import DIFFICULTIES, constrained_categories

# Paper Table 2 (train / test) for side-by-side printing.
PAPER_TABLE2 = {
    "train": {
        "easy": (14.5, 1.0, 10.3, 4.9, 2.2),
        "medium": (38.2, 2.4, 27.2, 4.9, 2.1),
        "hard": (66.7, 4.0, 47.8, 5.0, 2.3),
    },
    "test": {
        "easy": (14.2, 1.0, 10.1, 4.9, 2.2),
        "medium": (37.6, 2.3, 26.9, 4.9, 2.2),
        "hard": (67.2, 4.0, 48.0, 5.0, 2.2),
    },
}
STAT_KEYS = ("actions", "preferences", "pois", "trip_days", "companions")


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 2) if values else 0.0


def split_stats(visible: list[dict[str, Any]], hidden: list[dict[str, Any]]) -> dict[str, Any]:
    """{difficulty: {samples, actions, preferences, pois, trip_days, companions}} of one split."""
    truth = {h["id"]: h for h in hidden}
    out: dict[str, Any] = {}
    for difficulty in DIFFICULTIES:
        rows = [v for v in visible if v["difficulty"] == difficulty]
        if not rows:
            continue
        gts = [truth[v["id"]] for v in rows]
        out[difficulty] = {
            "samples": len(rows),
            "actions": _mean([len(v["trajectory"]) for v in rows]),
            "preferences": _mean([len(constrained_categories(g["profile"])) for g in gts]),
            "pois": _mean([len({e["poi_id"] for e in v["trajectory"]}) for v in rows]),
            "trip_days": _mean([g["query"]["days"] for g in gts]),
            "companions": _mean([g["query"]["people"] for g in gts]),
        }
    return out


def format_table(stats: dict[str, dict[str, Any]]) -> str:
    """A text table like the paper's Table 2, with the paper's values in brackets."""
    columns = [(split, d) for split in stats for d in DIFFICULTIES if d in stats[split]]
    header = f"{'Statistic':<14}" + "".join(f"{split}-{d[0].upper()}".ljust(16) for split, d in columns)
    lines = [header, "-" * len(header)]
    labels = {
        "samples": "Samples",
        "actions": "Actions",
        "preferences": "Preferences",
        "pois": "POIs",
        "trip_days": "Trip days",
        "companions": "Companions",
    }
    for key in ("samples",) + STAT_KEYS:
        cells = []
        for split, d in columns:
            value = stats[split][d][key]
            paper = PAPER_TABLE2.get(split, {}).get(d)
            ref = f"({paper[STAT_KEYS.index(key)]:g})" if paper and key != "samples" else ""
            cells.append(f"{value:g}{ref}".ljust(16))
        lines.append(f"{labels[key]:<14}" + "".join(cells))
    lines.append("(paper Table 2 values in brackets)")
    return "\n".join(lines)
