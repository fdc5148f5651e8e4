"""The expert traces' token lengths and the share each recipe holds whole (issue 34; not a timer).

    python launch/make_data.py --scale small --seed 11 --out /tmp/small11
    python launch/make_data.py --benchmark travelplanner --out /tmp/tp
    python benchmarks/trace_lengths.py --data b2t=/tmp/small11 --data travelplanner=/tmp/tp [--configs DIR]

Reads each data directory's trace_lengths.json (written by make_data: Qwen3 tokens of the expert
traces as SFT encodes them) and prints, as Markdown, the length distribution per difficulty, then
for every single-agent Qwen3 recipe in --configs (default configs/; another tree's configs/ gives
the figures of before) the share of its benchmark's traces that fit each length key: what
launch/plan.py and launch/train.py check (b2tjax/cli/trace_fit.py) and refuse under 90%.

`--kv-rows` prints instead, per recipe, the rows per chip its KV budget (rollout.pool_pages)
holds: contiguous (batch_rows / chips) vs paged at the traces' mean and p90 live length
((prompt + total) / 2), with no sharing and with a GRPO group's shared prompt pages
(b2tjax/cli/kv_rows.py, the figures launch/plan.py prints), with the full model's KV bytes per
token and the budget's bytes per chip, computed (no compile).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from b2tjax.cli.trace_fit import trace_fits
from b2tjax.config import TrainConfig, load_config
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


def single_agent_recipes(
    configs: Path, data: dict[str, Path]
) -> Iterator[tuple[Path, TrainConfig, dict | None]]:
    """(path, config, its benchmark's trace lengths or None) of every single-agent Qwen3 travel recipe."""
    for path in sorted(configs.glob("*.yaml")):
        if path.name == "base.yaml":
            continue
        cfg = load_config(path)
        if cfg.task != "travel" or cfg.agent != "single" or cfg.model.tokenizer != "qwen3":
            continue
        yield path, cfg, read_lengths(data[cfg.benchmark]) if cfg.benchmark in data else None


def recipe_rows(configs: Path, data: dict[str, Path]) -> list[str]:
    """Markdown rows: each recipe's length keys and the share of its benchmark's traces they hold."""
    lines = [
        "| recipe | benchmark | rollout.max_seq_len | rollout.max_prompt_tokens | rollout.max_turn_tokens "
        "| sft.max_seq_len |",
        "|---|---|---|---|---|---|",
    ]
    for path, cfg, stats in single_agent_recipes(configs, data):
        if stats is None:
            lines.append(f"| `{path.name}` | {cfg.benchmark} | no data given |  |  |  |")
            continue
        _, fits = trace_fits(cfg, stats)
        cells = " | ".join(f"{f.limit:,}: {f.share:.1%}" for f in fits)
        lines.append(f"| `{path.name}` | {cfg.benchmark} | {cells} |")
    return lines


def kv_rows_table(configs: Path, data: dict[str, Path]) -> list[str]:
    """Markdown rows: each recipe's rows per chip, contiguous vs paged at the same KV bytes (no
    sharing, and with the group's shared prompt pages)."""
    from b2tjax.cli.kv_rows import GIB, contiguous_rows, mean_prompt, paged_rows

    lines = [
        "| recipe | benchmark | chips | rollout.max_seq_len | KV bytes / token | KV GiB per chip "
        "| live mean / p90 | prompt mean, G | rows per chip: contiguous | batch_rows per chip "
        "| paged at mean: no sharing / shared prompt | paged at p90: no sharing / shared prompt |",
        "|---|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|",
    ]
    for path, cfg, stats in single_agent_recipes(configs, data):
        if stats is None:
            continue
        shards, slot, per_chip = _kv_budget(cfg)
        chips = cfg.hardware.devices
        rows = paged_rows(cfg, stats, shards, chips)
        (mean, *at_mean), (p90, *at_p90) = rows["mean"], rows["p90"]
        lines.append(
            f"| `{path.name}` | {cfg.benchmark} | {chips} | {cfg.rollout.max_seq_len:,} "
            f"| {slot:,} | {per_chip / GIB:.1f} | {mean:,} / {p90:,} "
            f"| {mean_prompt(cfg, stats):,}, {cfg.rollout.group_size} "
            f"| {contiguous_rows(cfg, chips):g} | {cfg.rollout.batch_rows / chips:g} "
            f"| {at_mean[0]:g} / {at_mean[1]:g} | {at_p90[0]:g} / {at_p90[1]:g} |"
        )
    return lines


def _kv_budget(cfg: TrainConfig) -> tuple[int, int, float]:
    """(row shards, the full model's KV bytes per token, the pool's bytes per chip), computed."""
    import math

    from b2tjax.cli.kv_rows import budget_pages
    from b2tjax.plan.memory_plan import plan_model_config
    from rollout.placement import kv_bytes_per_slot

    chips, m = cfg.hardware.devices, cfg.mesh
    fsdp = m.fsdp if m.fsdp > 0 else chips // (m.data * m.tensor)
    shards = math.gcd(cfg.rollout.batch_rows, m.data * fsdp)  # as memory_plan.analytic_sizes
    model = plan_model_config(cfg)
    slot = kv_bytes_per_slot(model, cfg.cache_dtype)
    heads = math.gcd(model.num_key_value_heads, m.tensor)
    return shards, slot, budget_pages(cfg) * cfg.rollout.page_size * slot / (shards * heads)


def main(argv: list[str] | None = None) -> int:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--data", action="append", required=True, metavar="BENCHMARK=DIR")
    parser.add_argument("--configs", type=Path, default=Path(__file__).resolve().parents[1] / "configs")
    parser.add_argument("--kv-rows", action="store_true", help="print the rows-per-chip table only")
    args = parser.parse_args(argv)
    data = dict(item.split("=", 1) for item in args.data)
    if args.kv_rows:
        print("\n".join(kv_rows_table(args.configs, {k: Path(v) for k, v in data.items()})))
        return 0
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
