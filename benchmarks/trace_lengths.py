"""The expert traces' token lengths and the share each recipe holds whole (issue 34; not a timer).

    python launch/make_data.py --scale small --seed 11 --out /tmp/small11
    python launch/make_data.py --benchmark travelplanner --out /tmp/tp
    python benchmarks/trace_lengths.py --data b2t=/tmp/small11 --data travelplanner=/tmp/tp [--configs DIR]

Reads each data directory's trace_lengths.json (written by make_data: Qwen3 tokens of the expert
traces as SFT encodes them) and prints, as Markdown, the length distribution per difficulty, then
for every single-agent Qwen3 recipe in --configs (default configs/; another tree's configs/ gives
the figures of before) the share of its benchmark's traces that fit each length key: what
launch/plan.py and launch/train.py check (b2tjax/cli/trace_fit.py) and refuse under 90%.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from b2tjax.cli.trace_fit import trace_fits
from b2tjax.config import load_config
from b2tjax.sft.lengths import PARTS, read_lengths


def distribution(name: str, stats: dict) -> list[str]:
    """Markdown rows: per split and difficulty, each part's mean / p50 / p90 / p99 / max."""
    lines = [
        f"{name} ({stats['tokenizer']} tokens):",
        "",
        "| split | difficulty | traces | " + " | ".join(PARTS) + " |",
        "|---|---|---:|" + "---:|" * len(PARTS),
    ]
    for split, groups in stats["splits"].items():
        for level, group in groups.items():
            cells = [
                f"{g['mean']:,.0f} / {g['p50']:,} / {g['p90']:,} / {g['p99']:,} / {g['max']:,}"
                for g in (group[part] for part in PARTS)
            ]
            lines.append(f"| {split} | {level} | {group['traces']} | " + " | ".join(cells) + " |")
    return lines + ["", "(each cell: mean / p50 / p90 / p99 / max)", ""]


def recipe_rows(configs: Path, data: dict[str, Path]) -> list[str]:
    """Markdown rows: each recipe's length keys and the share of its benchmark's traces they hold."""
    lines = [
        "| recipe | benchmark | rollout.max_seq_len | rollout.max_prompt_tokens | rollout.max_turn_tokens "
        "| sft.max_seq_len |",
        "|---|---|---|---|---|---|",
    ]
    for path in sorted(configs.glob("*.yaml")):
        if path.name == "base.yaml":
            continue
        cfg = load_config(path)
        if cfg.task != "travel" or cfg.agent != "single" or cfg.model.tokenizer != "qwen3":
            continue
        stats = read_lengths(data[cfg.benchmark]) if cfg.benchmark in data else None
        if stats is None:
            lines.append(f"| `{path.name}` | {cfg.benchmark} | no data given |  |  |  |")
            continue
        _, fits = trace_fits(cfg, stats)
        cells = " | ".join(f"{f.limit:,}: {f.share:.1%}" for f in fits)
        lines.append(f"| `{path.name}` | {cfg.benchmark} | {cells} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--data", action="append", required=True, metavar="BENCHMARK=DIR")
    parser.add_argument("--configs", type=Path, default=Path(__file__).resolve().parents[1] / "configs")
    args = parser.parse_args(argv)
    data = dict(item.split("=", 1) for item in args.data)
    out = []
    for name, directory in data.items():
        stats = read_lengths(directory)
        if stats is None:
            print(f"error: {directory} has no trace_lengths.json (launch/make_data.py)", file=sys.stderr)
            return 2
        out += distribution(f"{name}: {directory}", stats)
    out += recipe_rows(args.configs, {k: Path(v) for k, v in data.items()})
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
