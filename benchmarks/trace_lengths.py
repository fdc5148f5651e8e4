"""The expert traces' token lengths and the share each recipe holds whole (not a timer).

    python launch/make_data.py --scale small --seed 11 --out /tmp/small11
    python launch/make_data.py --benchmark travelplanner --out /tmp/tp
    python benchmarks/trace_lengths.py --data b2t=/tmp/small11 --data travelplanner=/tmp/tp [--configs DIR]

Reads each data directory's trace_lengths.json (written by make_data: Qwen3 tokens of the expert
traces as SFT encodes them) and prints, as Markdown, the length distribution per difficulty, then
for every single-agent Qwen3 recipe in --configs (default configs/; another tree's configs/ gives
the figures of before) the share of its benchmark's traces that fit each length key: what
launch/plan.py and launch/train.py check (b2tjax/cli/trace_fit.py) and refuse under 90%; a recipe
with a context budget shows in the max_seq_len column the share whose episode under the budget never
ends for room ("budget 32,768: ...").

`--kv-rows` prints instead, per recipe, the rows per chip its KV budget (rollout.pool_pages)
holds: contiguous (the budget's bytes in rows of cache_len slots) vs paged at the traces' mean
and p90 live length
((prompt + total) / 2), with no sharing and with a GRPO group's shared prompt pages
(b2tjax/cli/kv_rows.py, the figures launch/plan.py prints), with the full model's KV bytes per
token and the budget's bytes per chip, computed (no compile); then the same per HiMAP recipe at
its streams' live lengths, from the scripted HiMAP expert run on the recipe's first
`--himap-instances` train instances of its benchmark's data (b2tjax/cli/himap_streams.py), with
the group's coordinator prompt and each team's executor prefix held once.
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
        _, fits = trace_fits(cfg, stats, data[cfg.benchmark])
        cells = " | ".join(
            ("budget " if f.key == "rollout.context_budget" else "") + f"{f.limit:,}: {f.share:.1%}"
            for f in fits
        )
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


def himap_recipes(configs: Path, data: dict[str, Path]) -> Iterator[tuple[Path, TrainConfig, Path]]:
    """(path, config, its benchmark's data directory) of every HiMAP Qwen3 recipe with data given."""
    for path in sorted(configs.glob("*.yaml")):
        if path.name == "base.yaml":
            continue
        cfg = load_config(path)
        if cfg.agent == "himap" and cfg.model.tokenizer == "qwen3" and cfg.benchmark in data:
            yield path, cfg, data[cfg.benchmark]


def himap_rows_table(configs: Path, data: dict[str, Path], instances: int) -> list[str]:
    """Markdown rows: each HiMAP recipe's rows per chip at its streams' live lengths, contiguous vs
    paged at the same KV bytes (no sharing, and with the group's and the teams' shared pages)."""
    from b2tjax.cli.himap_streams import himap_lengths
    from b2tjax.cli.kv_rows import GIB, contiguous_rows, himap_rows, himap_streams, himap_team

    lines = [
        "| recipe | benchmark | chips | rollout.max_seq_len | KV bytes / token | KV GiB per chip | teams "
        "(instances) | streams within max_seq_len | stream live mean / p90 | coordinator prompt, "
        "executors, executor prefix, G | rows per chip: contiguous | batch_rows per chip "
        "| paged at mean: no sharing / shared | paged at p90: no sharing / shared "
        "| step's streams per chip |",
        "|---|---|---:|---:|---:|---:|---|---:|---|---|---:|---:|---:|---:|---:|",
    ]
    cache: dict[tuple, dict] = {}
    for path, cfg, directory in himap_recipes(configs, data):
        key = (str(directory), repr(cfg.himap), cfg.rollout.max_response_chars, cfg.rollout.python_tool)
        if key not in cache:  # the recipes of one benchmark and switches share the expert's streams
            cache[key] = himap_lengths(cfg, directory, instances)
        lengths = cache[key]
        shards, slot, per_chip = _kv_budget(cfg)
        chips, r = cfg.hardware.devices, cfg.rollout
        rows = himap_rows(cfg, lengths, shards, chips)
        (mean, *at_mean), (p90, *at_p90) = rows["mean"], rows["p90"]
        prompt, executors, prefix = himap_team(lengths)
        streams = himap_streams(lengths)
        fit = sum(total <= r.max_seq_len for _, total in streams) / len(streams)
        step = r.prompts_per_step * r.group_size * (1 + executors) / chips
        lines.append(
            f"| `{path.name}` | {cfg.benchmark} | {chips} | {r.max_seq_len:,} | {slot:,} "
            f"| {per_chip / GIB:.1f} "
            f"| {len(lengths['teams'])} ({lengths['instances']}) | {fit:.0%} | {mean:,} / {p90:,} "
            f"| {prompt:,}, {executors:.2f}, {prefix:,}, {r.group_size} | {contiguous_rows(cfg, chips):g} "
            f"| {r.batch_rows / chips:g} | {at_mean[0]:g} / {at_mean[1]:g} | {at_p90[0]:g} / {at_p90[1]:g} "
            f"| {step:.1f} |"
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
    parser.add_argument(
        "--himap-instances",
        type=int,
        default=60,
        help="--kv-rows: train instances the scripted HiMAP expert solves",
    )
    args = parser.parse_args(argv)
    data = dict(item.split("=", 1) for item in args.data)
    if args.kv_rows:
        dirs = {k: Path(v) for k, v in data.items()}
        print("\n".join(kv_rows_table(args.configs, dirs)))
        print("\n" + "\n".join(himap_rows_table(args.configs, dirs, args.himap_instances)))
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
