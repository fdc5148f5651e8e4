"""The tiny model's results table of docs/results/tiny-cpu.md: untrained, SFT only, ReAct prompt,
SFT + GRPO and the expert, on the same test instances, mean +- std over seeds. One command
regenerates every number:

    python benchmarks/results_table.py --jobs 2          # train / evaluate what is missing, print the table
    python benchmarks/results_table.py --from-runs       # only read existing run directories
    python benchmarks/results_table.py --from-runs --out docs/results/table.md --json docs/results/table.json

Each model row is one `launch/train.py` run of the recipe (default configs/tiny_cpu_curve.yaml) per
seed, in RUNS/<row>-s<seed>, whose final evaluation (eval.json: greedy, the recipe's test
instances) gives the numbers; the command of every run is printed with the table. The SFT + GRPO
runs are the learning-curve runs (`launch/plot.py RUNS/curve-s0 ...` draws them). The expert row is
the rule-based planner on the same instances (`launch/eval.py --policy expert` scores the same plans).
A run directory that already holds eval.json is read, not redone.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import math
import shlex
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: the checkout's packages

from b2tjax.cli.script import run_main  # noqa: E402
from b2tjax.errors import UserError  # noqa: E402

RECIPE = ROOT / "configs" / "tiny_cpu_curve.yaml"
EXPERT = "Expert (upper bound)"


@dataclasses.dataclass(frozen=True)
class Row:
    """One model row: a run per seed of the recipe with these overrides ({runs}, {seed} filled in)."""

    label: str
    prefix: str  # run directory RUNS/<prefix>-s<seed>
    overrides: tuple[str, ...]
    after: str | None = None  # prefix of the row whose run of the same seed this one reads


ROWS: tuple[Row, ...] = (
    Row("Untrained (random init)", "untrained", ("mode=eval",)),
    Row("SFT only", "sft", ("mode=sft_only",)),
    Row(
        "ReAct prompt (SFT-only weights)",
        "react",
        ("mode=eval", "rollout.prompt_style=react", "model.init=ckpt:{runs}/sft-s{seed}/checkpoints"),
        after="sft",
    ),
    # The recipe's GRPO phase started from the SFT-only run of the same seed: the same weights as
    # its own SFT phase would give (the SFT phase is deterministic per seed), trained once.
    Row(
        "SFT + GRPO",
        "curve",
        ("mode=grpo", "model.init=ckpt:{runs}/sft-s{seed}/checkpoints"),
        after="sft",
    ),
)


def _percent(value: float) -> str:
    return f"{100 * value:.1f}"


def _plain(value: float) -> str:
    return f"{value:.3f}"


# (header, eval.json key, formatter): rates in percent, the reward as a number.
COLUMNS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("Delivery %", "delivery_rate", _percent),
    ("C micro %", "c_micro", _percent),
    ("C macro %", "c_macro", _percent),
    ("UPC micro %", "upc_micro", _percent),
    ("UPC macro %", "upc_macro", _percent),
    ("Final %", "final_pass_rate", _percent),
    ("Reward", "mean_reward", _plain),
    ("Action error %", "action_error_rate", _percent),
)


def run_dir(runs: Path, row: Row, seed: int) -> Path:
    return runs / f"{row.prefix}-s{seed}"


def as_typed(path: Path) -> str:
    """A path as a person types it from the checkout's root: relative when it lies inside."""
    path = path.absolute()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def train_command(row: Row, seed: int, runs: Path, recipe: Path) -> list[str]:
    """The launch/train.py command line (run from the checkout's root) of one row's run for one seed."""
    overrides = [o.format(runs=as_typed(runs), seed=seed) for o in row.overrides]
    out = as_typed(run_dir(runs, row, seed))
    return ["launch/train.py", "--config", as_typed(recipe), "--out", out, f"seed={seed}", *overrides]


def shown(command: Sequence[str]) -> str:
    return "python " + shlex.join(command)


def mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (n - 1; 0 for a single value)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def format_cell(values: Sequence[float] | None, fmt: Callable[[float], str]) -> str:
    if not values:
        return "n/a"
    mean, std = mean_std(values)
    return f"{fmt(mean)} ± {fmt(std)}" if len(values) > 1 else fmt(mean)


def format_table(rows: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> str:
    """Markdown table: one line per (label, per-seed metrics dicts), mean ± std of each column over the
    seeds; a column a row's runs did not record shows n/a."""
    lines = [
        "| | " + " | ".join(h for h, _, _ in COLUMNS) + " |",
        "|---|" + "---:|" * len(COLUMNS),
    ]
    for label, per_seed in rows:
        cells = []
        for _, key, fmt in COLUMNS:
            values = [float(m[key]) for m in per_seed if isinstance(m.get(key), (int, float))]
            cells.append(format_cell(values if len(values) == len(per_seed) else None, fmt))
        lines.append(f"| {label} (n={len(per_seed)}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# Training-rollout metrics (the recipe's sampling temperature, metrics.jsonl) at the start and end of GRPO.
CURVE_KEYS = ("reward", "action_error_rate", "truncated_rate", "r_format", "delivery")


def curve_ends(rows: Sequence[dict[str, Any]], window: int | None = None) -> dict[str, tuple[float, float]]:
    """key -> (mean over the first `window` GRPO steps, mean over the last `window`; default: the
    two halves of the run) of a run's metrics.jsonl rows; keys the run did not log are left out."""
    grpo = [r for r in rows if r.get("phase") == "grpo"]
    window = window or max(len(grpo) // 2, 1)
    ends = {}
    for key in CURVE_KEYS:
        values = [float(r[key]) for r in grpo if isinstance(r.get(key), (int, float))]
        if values:
            ends[key] = (statistics.fmean(values[:window]), statistics.fmean(values[-window:]))
    return ends


def error_counts(rows: Sequence[dict[str, Any]]) -> tuple[tuple[int, int], tuple[int, int]]:
    """((episodes with an action error, episodes) in the first half of the GRPO steps, the same in
    the second half) of a run's metrics.jsonl rows."""
    grpo = [r for r in rows if r.get("phase") == "grpo" and "episodes" in r]
    half = len(grpo) // 2

    def count(part: Sequence[dict[str, Any]]) -> tuple[int, int]:
        errors = sum(round(r["action_error_rate"] * r["episodes"]) for r in part)
        return errors, sum(round(r["episodes"]) for r in part)

    return count(grpo[:half]), count(grpo[half:])


def two_proportion_test(first: tuple[int, int], second: tuple[int, int]) -> tuple[float, float]:
    """(z, two-sided p) of the pooled two-proportion z-test that `second`'s rate equals `first`'s
    (positive z: the second rate is lower)."""
    (k1, n1), (k2, n2) = first, second
    pooled = (k1 + k2) / (n1 + n2)
    spread = math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n2))
    if spread == 0:
        return 0.0, 1.0
    z = (k1 / n1 - k2 / n2) / spread
    return z, math.erfc(abs(z) / math.sqrt(2))


def format_error_change(per_seed: dict[int, Sequence[dict[str, Any]]]) -> str:
    """One line: action errors of the training episodes, first vs second half of GRPO, pooled over seeds."""
    counts = [error_counts(rows) for rows in per_seed.values()]
    first = (sum(c[0][0] for c in counts), sum(c[0][1] for c in counts))
    second = (sum(c[1][0] for c in counts), sum(c[1][1] for c in counts))
    if not first[1] or not second[1]:
        return "Pooled action errors: no GRPO steps logged."
    z, p = two_proportion_test(first, second)
    return (
        f"Pooled over seeds, training episodes with an action error: {first[0]}/{first[1]} in the "
        f"first half of GRPO, {second[0]}/{second[1]} in the second (two-proportion z = {z:.2f}, "
        f"two-sided p = {p:.3g})."
    )


def format_curves(per_seed: dict[int, dict[str, tuple[float, float]]]) -> str:
    """Markdown table: per seed, each curve metric as `first -> last`."""
    lines = [
        "| seed | " + " | ".join(CURVE_KEYS) + " |",
        "|---|" + "---|" * len(CURVE_KEYS),
    ]
    for seed, ends in per_seed.items():
        cells = [f"{ends[k][0]:.3f} → {ends[k][1]:.3f}" if k in ends else "n/a" for k in CURVE_KEYS]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def read_eval(path: Path) -> dict[str, Any] | None:
    """A run's eval.json, or None when the run has not finished."""
    file = path / "eval.json"
    if not file.is_file():
        return None
    try:
        return json.loads(file.read_text())
    except ValueError:
        raise UserError(f"{file}: not JSON (delete the run directory to redo it)") from None


def _train(command: list[str], log: Path) -> None:
    out = ROOT / command[command.index("--out") + 1]  # absolute stays absolute
    resume = ["--resume"] if out.exists() else []  # a killed run continues from its checkpoint
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"running: {shown(command)}  (log {log})", flush=True)
    with log.open("w") as handle:
        code = subprocess.run(
            [sys.executable, *command, "--no-progress", *resume],
            cwd=ROOT,
            stdout=handle,
            stderr=subprocess.STDOUT,
        ).returncode
    if code:
        raise UserError(f"{shown(command)} failed with status {code}; see {log}")


def ensure_runs(runs: Path, seeds: Sequence[int], recipe: Path, jobs: int, from_runs: bool) -> None:
    """Train / evaluate the runs without eval.json (rows another row reads first), `jobs` at a time."""
    missing = [(row, s) for row in ROWS for s in seeds if read_eval(run_dir(runs, row, s)) is None]
    if missing and from_runs:
        row, seed = missing[0]
        raise UserError(
            f"{len(missing)} run(s) have no eval.json, e.g. {run_dir(runs, row, seed)}; make it with "
            f"`{shown(train_command(row, seed, runs, recipe))}` or drop --from-runs"
        )
    for wave in ([m for m in missing if m[0].after is None], [m for m in missing if m[0].after is not None]):
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(jobs, 1)) as pool:
            futures = [
                pool.submit(_train, train_command(row, s, runs, recipe), runs / f"{row.prefix}-s{s}.log")
                for row, s in wave
            ]
            for future in futures:
                future.result()


def expert_metrics(recipe: Path) -> dict[str, Any]:
    """The expert on the recipe's evaluation instances: pass rates, reward and action error rate."""
    from b2tjax.config import load_config
    from b2tjax.tasks.benchmark import select_pairs
    from sandbox.benchmarks import get_benchmark
    from sandbox.benchmarks.b2t.expert import Expert

    cfg = load_config(recipe)
    bench = get_benchmark(cfg.benchmark, Path(cfg.data.data_dir))
    pairs = select_pairs(
        bench, cfg.data.eval_split or bench.eval_split, cfg.data.difficulties, cfg.data.eval_instances
    )
    expert = Expert(bench.world)
    solved = [expert.solve(visible, truth) for visible, truth in pairs]
    verdicts = [bench.evaluate(s.answer, v, t) for s, (v, t) in zip(solved, pairs)]
    rewards = [bench.reward(v, s.any_error) for v, s in zip(verdicts, solved)]
    metrics = bench.metrics(verdicts)
    metrics["mean_reward"] = statistics.fmean(r.total for r in rewards)
    metrics["action_error_rate"] = statistics.fmean(float(s.any_error) for s in solved)
    return metrics


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=Path, default=Path("runs"), help="where the run directories live")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds (default 0 1 2)")
    parser.add_argument(
        "--recipe", type=Path, default=RECIPE, help="training recipe (default tiny_cpu_curve)"
    )
    parser.add_argument("--from-runs", action="store_true", help="only read runs; never train")
    parser.add_argument("--jobs", type=int, default=1, help="runs at once (one per core; default 1)")
    parser.add_argument("--out", type=Path, help="also write the markdown (table + commands) here")
    parser.add_argument("--json", type=Path, help="also write every run's numbers here")
    return parser.parse_args(argv)


def render(runs: Path, seeds: Sequence[int], recipe: Path, evals: dict, expert: dict) -> str:
    """The evaluation table, the GRPO runs' training curves at both ends, the command of every run."""
    from b2tjax.report.plotting import load_run

    rows = [(row.label, [evals[row.prefix][s] for s in seeds]) for row in ROWS] + [(EXPERT, [expert])]
    curve_row = next(row for row in ROWS if row.prefix == "curve")
    logs = {s: load_run(run_dir(runs, curve_row, s)) for s in seeds}
    curves = {s: curve_ends(rows) for s, rows in logs.items()}
    commands = [f"    {shown(train_command(row, s, runs, recipe))}" for row in ROWS for s in seeds]
    return "\n".join(
        [
            format_table(rows),
            "",
            f"Mean ± sample std over seeds {', '.join(map(str, seeds))}; the expert is deterministic (n=1).",
            "",
            "SFT + GRPO training rollouts (sampled): mean over the first half of the GRPO steps → "
            "mean over the second half, per seed (RUN/metrics.jsonl):",
            "",
            format_curves(curves),
            "",
            format_error_change(logs),
            "",
            "Runs (each row's numbers are RUN/eval.json):",
            "",
            *commands,
        ]
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    runs, recipe = args.runs.absolute(), args.recipe.absolute()
    if not recipe.is_file():
        raise UserError(f"--recipe {args.recipe} does not exist")
    ensure_runs(runs, args.seeds, recipe, args.jobs, args.from_runs)
    evals = {row.prefix: {s: read_eval(run_dir(runs, row, s)) for s in args.seeds} for row in ROWS}
    expert = expert_metrics(recipe)
    text = render(runs, args.seeds, recipe, evals, expert)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        numbers = {row.prefix: {str(s): evals[row.prefix][s] for s in args.seeds} for row in ROWS}
        args.json.write_text(json.dumps({**numbers, "expert": expert}, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
