r"""Score a benchmark's plans and print its metrics table.

    python launch/eval.py --data DATA --plans PLANS.jsonl [--split test] [--benchmark b2t]
                          [--difficulty easy medium hard] [--json OUT.json] [--details OUT.jsonl]
                          [--report REPORT.html]   # the HTML report: timelines, maps, verdicts
    python launch/eval.py --data DATA --policy expert --split test
    python launch/eval.py --data DATA --policy expert --config RECIPE [rollout.context_budget=32768 ...]
                          # the expert's episodes as the recipe's rollouts hold them (context budget)
    python launch/eval.py --data DATA --records rollouts.jsonl --split test   # launch/rollouts.py's answers
    python launch/eval.py --data DATA --policy expert --agent himap [--himap-ablation flat]   # scripted team
    python launch/eval.py --data DATA --policy model --checkpoint runs/tiny/checkpoints \
                          [--config configs/tiny_cpu.yaml]   # a trained single agent, greedy
    python launch/eval.py --data DATA --policy model --agent himap --checkpoint runs/himap_tiny/checkpoints \
                          [--config configs/himap_tiny_cpu.yaml]   # a trained HiMAP policy, greedy
    python launch/eval.py --benchmark travelplanner --queries validation.jsonl --plans submission.jsonl \
                          --split validation [--mode official|strict] [--data DATA]

PLANS.jsonl holds one JSON object per line: {"id": <instance id>, "plan": <list of days, or the
answer text>}. An instance of the split without a plan counts as undelivered (it fails every
constraint); plans for ids outside the split are reported and ignored. For TravelPlanner, a file in
the official submission format ({"idx", "query", "plan"} per line, in the order of --queries) is
scored against the official query file directly, with the official metric constants of --split
(the database: DATA/database when --data is given, else the copy shipped with the package).

A rollouts file (`--records`, what launch/rollouts.py writes: one line per stream) is scored by its
episodes' answers: a single agent's answer, or a HiMAP team's last coordinator answer. Only the
instances the file holds are scored (a partial run is not a run of undelivered plans), and the
table's header says how many of the split's those are; `--all-instances` scores the whole split,
a missing instance counting as undelivered.

Plans can also be written here: `--policy` names the plan writer (`expert`: the scripted planner
that reads the hidden truth; `model`: a checkpoint, greedy) and `--agent` the agent architecture it
runs as (`single` | `himap`), as in launch/rollouts.py and the training config. Each supported pair
is registered in `POLICIES` below: a function (benchmark, pairs, args) -> iterable of (id, answer).
A benchmark's own options (see --help with --benchmark NAME) are passed to it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from b2tjax.cli.expert_budget import BudgetFigures
from b2tjax.cli.himap_agents import HimapFigures, checkpoint_answers, expert_answers
from b2tjax.cli.model_answers import AgentFigures, single_answers
from b2tjax.cli.outputs import Paths, guard
from b2tjax.cli.plan_files import plans_from_file, plans_from_records, records_selection
from b2tjax.cli.script import (
    UserError,
    add_benchmark_options,
    add_trust_option,
    benchmark_parser,
    damaged_store,
    run_main,
    setup_logging,
    trust_from_args,
)
from b2tjax.config import TrainConfig, freeze, load_config
from b2tjax.report import ReportError, write_report
from b2tjax.report.build import answer_episodes
from sandbox.benchmarks import Benchmark, BenchmarkError, Instance, benchmark_class
from sandbox.benchmarks.travelplanner import DatabaseError
from sandbox.benchmarks.travelplanner.loader import SPLIT_SIZES, LoaderError
from sandbox.benchmarks.travelplanner.scoring import evaluate_files, score_summary
from sandbox.benchmarks.travelplanner.submission import SubmissionError
from sandbox.himap.options import ABLATIONS, HimapOptions

log = logging.getLogger("eval")


def himap_expert(
    bench: Benchmark, pairs: list[Instance], args: argparse.Namespace
) -> Iterable[tuple[str, Any]]:
    """The scripted HiMAP team (coordinator, day executors, Σ, bargaining) under --himap-ablation."""

    return expert_answers(bench, pairs, HimapOptions.ablation(args.himap_ablation), args.himap_figures)


def recipe(args: argparse.Namespace) -> TrainConfig | None:
    """The --config recipe under the key=value overrides (None without one); a bad recipe is one
    line."""
    if args.config is None:
        return None
    try:
        return freeze(load_config(args.config, args.overrides))
    except ValueError as err:
        raise UserError(str(err)) from None


def himap_checkpoint(
    bench: Benchmark, pairs: list[Instance], args: argparse.Namespace
) -> Iterable[tuple[str, Any]]:
    """A checkpoint's greedy HiMAP episodes; --config supplies the rollout: and himap: sections."""

    options, overrides = HimapOptions.ablation(args.himap_ablation), {}
    if (cfg := recipe(args)) is not None:
        options = dataclasses.replace(cfg.himap, max_response_chars=cfg.rollout.max_response_chars)
        overrides = dataclasses.asdict(cfg.rollout)  # the recipe's whole rollout: section, greedy
    return checkpoint_answers(bench, pairs, args.checkpoint, options, overrides, args.himap_figures)


def single_checkpoint(
    bench: Benchmark, pairs: list[Instance], args: argparse.Namespace
) -> Iterable[tuple[str, Any]]:
    """A checkpoint's greedy single-agent episodes; --config supplies the rollout: section."""

    cfg = recipe(args)
    overrides = dataclasses.asdict(cfg.rollout) if cfg is not None else {}  # the whole section, greedy
    return single_answers(bench, pairs, args.checkpoint, overrides, args.agent_figures)


def single_expert(
    bench: Benchmark, pairs: list[Instance], args: argparse.Namespace
) -> Iterable[tuple[str, Any]]:
    """The scripted expert through the real tools; with a recipe, each episode laid out as the
    recipe's rollouts hold it (its tokenizer, prompt and context budget: b2tjax/cli/expert_budget.py)."""
    from b2tjax.cli.expert_budget import expert_under_budget
    from b2tjax.run.task_build import load_or_train_tokenizer  # JAX: on demand

    cfg = recipe(args)
    if cfg is None:
        return bench.expert_answers(pairs)
    tokenizer = load_or_train_tokenizer(cfg, args.data, bench)
    return expert_under_budget(bench, pairs, cfg.rollout, tokenizer, args.budget_figures)


Writer = Callable[[Benchmark, list[Instance], argparse.Namespace], Iterable[tuple[str, Any]]]
# Plan writers: (policy, agent architecture) -> (benchmark, pairs, args) -> iterable of (id, answer).
POLICIES: dict[tuple[str, str], Writer] = {
    ("expert", "single"): single_expert,
    ("expert", "himap"): himap_expert,
    ("model", "single"): single_checkpoint,
    ("model", "himap"): himap_checkpoint,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Options: the plans come either from a file (--plans) or from a plan writer (--policy, run as
    --agent); the chosen benchmark adds its own options (known only once --benchmark is read)."""
    parser, name = benchmark_parser(argv, "of the plans", description=__doc__)
    _add_sources(parser)
    _add_policy_options(parser)
    parser.add_argument("--split", default="test", help="split to score (default test)")
    parser.add_argument(
        "--difficulty", nargs="+", choices=("easy", "medium", "hard"), help="only these difficulty levels"
    )
    parser.add_argument("--json", type=Path, help="also write the metrics to this JSON file")
    parser.add_argument("--details", type=Path, help="write every plan's verdict (JSONL)")
    parser.add_argument(
        "--report", type=Path, help="write the HTML report of every plan (docs/results/README.md shows one)"
    )
    add_trust_option(parser)
    add_benchmark_options(parser, name)
    args = parser.parse_args(argv)
    _check_combinations(parser, args)
    return args


def _add_sources(parser: argparse.ArgumentParser) -> None:
    """Where the plans come from: a plans file, a plan writer, or a rollouts file."""
    parser.add_argument(
        "--data",
        type=Path,
        help="the benchmark's data directory (launch/make_data.py); "
        "required except for a TravelPlanner official submission file",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--plans", type=Path, help="JSONL file of {id, plan} objects")
    source.add_argument(
        "--policy",
        choices=sorted({policy for policy, _ in POLICIES}),
        help="plan writer: expert (the scripted planner) | model (--checkpoint, greedy)",
    )
    source.add_argument(
        "--records",
        type=Path,
        help="a rollouts file (launch/rollouts.py --out): each episode's answer is its plan",
    )
    parser.add_argument(
        "--all-instances",
        action="store_true",
        help="--records: score every instance of the split (those the file lacks are undelivered)",
    )


def _add_policy_options(parser: argparse.ArgumentParser) -> None:
    """How a --policy writes its plans: the agent it runs as, its checkpoint and recipe, the ablation."""
    parser.add_argument(
        "--agent",
        choices=("single", "himap"),
        default="single",
        help="agent architecture the --policy runs as: one agent | a HiMAP team (default single)",
    )
    parser.add_argument(
        "--checkpoint", type=Path, help="--policy model: the model (run checkpoints/ or HF dir)"
    )
    parser.add_argument(
        "--config",
        type=Path,
        help="--policy model: recipe whose rollout:/himap: sections apply; --policy expert (single): "
        "the recipe whose tokenizer, prompt and rollout.context_budget its episodes are measured under",
    )
    parser.add_argument(
        "overrides", nargs="*", metavar="key=value", help="overrides of the --config recipe's keys"
    )
    parser.add_argument(
        "--himap-ablation",
        choices=ABLATIONS,
        default="full",
        help="--agent himap: the full system or one of the paper's Table-7 ablations (default full)",
    )


def _check_combinations(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Options that only make sense together (argparse's one-line error otherwise)."""
    if args.data is None and not is_official_submission(args):
        parser.error("the following arguments are required: --data")
    if (args.policy == "model") != (args.checkpoint is not None):
        parser.error("--policy model needs --checkpoint DIR, and --checkpoint is only for --policy model")
    if args.overrides and args.config is None:
        parser.error("key=value overrides need --config RECIPE")
    if (
        args.config is not None
        and args.policy != "model"
        and (args.policy, args.agent) != ("expert", "single")
    ):
        parser.error("--config is only for --policy model and the single-agent --policy expert")
    if args.all_instances and args.records is None:
        parser.error("--all-instances is only for --records")


def is_official_submission(args: argparse.Namespace) -> bool:
    """TravelPlanner plans in the official submission format ({"idx", "query", "plan"} lines, matched
    to --queries by position) rather than {"id", "plan"} lines."""
    if args.benchmark != "travelplanner" or getattr(args, "queries", None) is None or args.plans is None:
        return False
    try:
        with args.plans.open(encoding="utf-8") as handle:
            first = next((line for line in handle if line.strip()), "{}")
        row = json.loads(first)
    except (OSError, ValueError):
        return False  # the generic reader reports the problem with its line number
    return isinstance(row, dict) and "idx" in row and "id" not in row


def score_official_submission(args: argparse.Namespace) -> int:
    """Score an official TravelPlanner submission file against the official query file, with the
    official metric constants of --split (train / validation / test)."""

    split = args.split if args.split in SPLIT_SIZES else None
    database = args.data / "database" if args.data is not None else None
    try:
        score = evaluate_files(args.queries, args.plans, split=split, mode=args.mode, database=database)
    except (LoaderError, SubmissionError, DatabaseError) as err:
        raise SystemExit(f"error: {err}") from None
    print(score.table())
    raised = sum(e.official_raises for e in score.evaluations)
    if raised:
        log.warning("the official harness would raise on %d plan(s); they count as failed", raised)
    write_outputs(args, score_summary(score), score.evaluations)
    return 0


def load_pairs(bench: Benchmark, split: str, difficulties: list[str] | None) -> list[Instance]:
    """The split's instances, optionally of some difficulty levels only."""
    pairs = bench.load_split(split)
    return [p for p in pairs if difficulties is None or p.visible.get("difficulty") in difficulties]


def score(bench: Benchmark, pairs: list[Instance], plans: dict[str, Any]) -> list:
    """Judge every instance's plan (missing plans are undelivered), logging progress."""
    results, started = [], time.perf_counter()
    for k, inst in enumerate(pairs, start=1):
        results.append(bench.evaluate(plans.get(inst.id), inst.visible, inst.truth))
        if k % 500 == 0 or k == len(pairs):
            elapsed = time.perf_counter() - started
            rate = k / max(elapsed, 1e-9)
            log.info(
                "scored %d/%d plans (%.0f plans/s, ETA %.0fs)", k, len(pairs), rate, (len(pairs) - k) / rate
            )
    return results


def write_outputs(args: argparse.Namespace, metrics: dict, results: list) -> None:
    """The optional --json metrics file and --details verdicts file."""
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    if args.details:
        args.details.parent.mkdir(parents=True, exist_ok=True)
        with args.details.open("w", encoding="utf-8") as handle:
            for result in results:
                handle.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")


# what the one output guard (b2tjax/outputs.py) checks; tests try every output on every input
PATHS = Paths(
    outputs=("--json", "--details", "--report"),
    inputs=("--plans", "--records", "--queries", "--config", "--checkpoint"),
    data=("--data",),
)


def check_inputs_and_outputs(args: argparse.Namespace) -> None:
    """Fail before the (possibly long) scoring when a path given on the command line cannot work."""
    if args.data is not None and not args.data.is_dir():
        raise UserError(f"--data {args.data} is not a directory")
    for option, path in (("--plans", args.plans), ("--records", args.records)):
        if path is not None and not path.is_file():
            problem = "is a directory" if path.is_dir() else "does not exist"
            raise UserError(f"{option} {path} {problem}")
    guard(args, PATHS)


def main(argv: list[str] | None = None) -> int:
    """Score one split's plans, print the metrics table and write the optional JSON outputs."""
    setup_logging()
    args = parse_args(argv)
    trust_from_args(args)
    check_inputs_and_outputs(args)
    if is_official_submission(args):
        return score_official_submission(args)
    try:
        cls = benchmark_class(args.benchmark)
        bench = cls(args.data, **cls.options_from_args(args))
        pairs = load_pairs(bench, args.split, args.difficulty)
        if not pairs:
            raise UserError(f"no instances in split {args.split!r} for the chosen difficulty")
        if args.policy:
            args.himap_figures = HimapFigures(views={} if args.report else None)
            args.agent_figures = AgentFigures()
            args.budget_figures = BudgetFigures()
            plans = dict(POLICIES[args.policy, args.agent](bench, pairs, args))
        elif args.records:
            plans = plans_from_records(args.records, pairs)
            pairs, header = records_selection(args, pairs, plans)
        else:
            plans = plans_from_file(args.plans, pairs)
        results = score(bench, pairs, plans)
    except BenchmarkError as err:
        raise UserError(str(err)) from None
    except sqlite3.DatabaseError as err:  # a store is read lazily: damage shows at the first query
        raise damaged_store(args.data, err) from None
    metrics = bench.metrics(results)
    table = bench.format_metrics(metrics)
    if args.records:
        table = header + "\n" + table
    print(table)
    if args.policy and args.agent == "himap":
        print(args.himap_figures.summary())
        metrics["himap"] = [f.to_dict() for f in args.himap_figures.episodes]
    if args.policy == "model" and args.agent == "single":
        print(args.agent_figures.summary())
        metrics["episodes"] = args.agent_figures.episodes
    if args.policy == "expert" and args.budget_figures.episodes:
        print(args.budget_figures.summary())
        metrics.update(args.budget_figures.metrics())
        metrics["episodes"] = args.budget_figures.episodes
    write_outputs(args, metrics, results)
    if args.report:
        write_html_report(args, bench, pairs, plans, results, table)
    return 0


def write_html_report(
    args: argparse.Namespace,
    bench: Benchmark,
    pairs: list[Instance],
    plans: dict[str, Any],
    results: list,
    table: str,
) -> None:
    """The --report page: every plan's timeline, map and verdicts (HiMAP agents: the team's lanes)."""

    if args.policy:
        agent = args.policy + (" (HiMAP team)" if args.agent == "himap" else "")
    else:
        agent = (args.plans or args.records).name
    views = args.himap_figures.views if args.policy else None
    episodes = answer_episodes(bench, pairs, plans, results, agent=agent, himap=views)
    title = f"{bench.name} {args.split}: {agent}"
    try:
        write_report(args.report, episodes, title=title, metrics_text=table)
    except ReportError as err:
        raise UserError(str(err)) from None
    log.info("wrote the report %s (%d episodes)", args.report, len(episodes))


if __name__ == "__main__":
    sys.exit(run_main(main))
