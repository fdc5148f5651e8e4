"""Score travel plans on the 32 constraints and print the benchmark metrics.

    python launch/eval.py --data DATA --plans PLANS.jsonl [--split test]
                          [--difficulty easy medium hard] [--json OUT.json] [--details OUT.jsonl]

PLANS.jsonl holds one JSON object per line: {"id": <instance id>, "plan": <list of days, or the
answer text>}. An instance of the split without a plan counts as undelivered (it fails every
constraint); plans for ids outside the split are reported and ignored.

Plans can also come from an agent (`--agent NAME`) registered in `AGENTS` below: a function
(instances, data_dir, args) -> iterable of (id, answer).
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from b2tjax.cli import UserError, check_output_file, run_main
from sandbox.evaluator import evaluate_plan
from sandbox.jsonl import read_jsonl_objects
from sandbox.metrics import compute_metrics, format_table

log = logging.getLogger("eval")

Pair = tuple[dict, dict]  # (visible instance, ground truth)
# Agents that produce plans: name -> (pairs, data_dir, args) -> iterable of (id, answer).
AGENTS: dict[str, Callable[[list[Pair], Path, argparse.Namespace], Iterable[tuple[str, Any]]]] = {}
NO_PLAN = "no plan was given for this instance"


def _expert_agent(pairs: list[Pair], data: Path, args: argparse.Namespace) -> Iterable[tuple[str, Any]]:
    """The expert planner (sandbox/expert): solves each instance through the real tools."""
    from sandbox.expert import expert_answers
    return expert_answers(pairs, data / "world.sqlite")


AGENTS["expert"] = _expert_agent


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Options: the plans come either from a file (--plans) or from a registered agent (--agent)."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, type=Path, help="data directory (world.sqlite, "
                        "instances/, ground_truth/)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--plans", type=Path, help="JSONL file of {id, plan} objects")
    source.add_argument("--agent", choices=sorted(AGENTS), help="agent that writes the plans")
    parser.add_argument("--split", default="test", help="split to score (default test)")
    parser.add_argument("--difficulty", nargs="+", choices=("easy", "medium", "hard"),
                        help="only these difficulty levels")
    parser.add_argument("--json", type=Path, help="also write the metrics to this JSON file")
    parser.add_argument("--details", type=Path, help="write every plan's 32 results (JSONL)")
    return parser.parse_args(argv)


def _read_jsonl(path: Path) -> list[dict]:
    """The file's objects; a bad line or one without a string 'id' ends the run with its line."""
    rows = []
    for number, row in read_jsonl_objects(path, UserError):
        if not isinstance(row.get("id"), str):
            raise UserError(f"{path}:{number}: expected an object with a string 'id'")
        rows.append(row)
    return rows


def load_pairs(data: Path, split: str, difficulties: list[str] | None) -> list[Pair]:
    """The split's (instance, ground truth) pairs, optionally of some difficulty levels only."""
    visible_path = data / "instances" / f"{split}.jsonl"
    truth_path = data / "ground_truth" / f"{split}.jsonl"
    for path in (visible_path, truth_path, data / "world.sqlite"):
        if not path.exists():
            raise UserError(f"missing {path} (build it with launch/make_data.py)")
    truth = {row["id"]: row for row in _read_jsonl(truth_path)}
    pairs = []
    for instance in _read_jsonl(visible_path):
        if instance["id"] not in truth:
            raise UserError(f"{truth_path}: no ground truth for {instance['id']!r}")
        if difficulties is None or instance.get("difficulty") in difficulties:
            pairs.append((instance, truth[instance["id"]]))
    return pairs


def plans_from_file(path: Path, pairs: list[Pair]) -> dict[str, Any]:
    """id -> plan for the selected instances; plans for other ids are counted and ignored.
    An id with two plans is an error: which one to score is the user's choice, not ours."""
    wanted = {instance["id"] for instance, _ in pairs}
    plans, unknown, seen = {}, 0, collections.Counter()
    rows = _read_jsonl(path)
    if not rows:
        log.warning("%s holds no plans: every instance counts as undelivered", path)
    for row in rows:
        seen[row["id"]] += 1
        if row["id"] in wanted:
            plans[row["id"]] = row.get("plan")
        else:
            unknown += 1
    duplicates = sorted(i for i, n in seen.items() if n > 1)
    if duplicates:
        shown = ", ".join(duplicates[:5]) + (", ..." if len(duplicates) > 5 else "")
        raise UserError(f"{path}: {len(duplicates)} id(s) have more than one plan: {shown}")
    if unknown:
        log.warning("%d plan(s) in %s are for instances outside the selection; ignored",
                    unknown, path)
    return plans


def score(pairs: list[Pair], plans: dict[str, Any], world: Path) -> list:
    """Evaluate every instance's plan (missing plans are undelivered), logging progress."""
    results, started = [], time.perf_counter()
    for k, (instance, truth) in enumerate(pairs, start=1):
        answer = plans.get(instance["id"], NO_PLAN)
        results.append(evaluate_plan(answer, instance, truth, world))
        if k % 500 == 0 or k == len(pairs):
            elapsed = time.perf_counter() - started
            rate = k / max(elapsed, 1e-9)
            log.info("scored %d/%d plans (%.0f plans/s, ETA %.0fs)", k, len(pairs), rate,
                     (len(pairs) - k) / rate)
    return results


def check_inputs_and_outputs(args: argparse.Namespace) -> None:
    """Fail before the (possibly long) scoring when a path given on the command line cannot work."""
    if not args.data.is_dir():
        raise UserError(f"--data {args.data} is not a directory")
    if args.plans is not None and not args.plans.is_file():
        problem = "is a directory" if args.plans.is_dir() else "does not exist"
        raise UserError(f"--plans {args.plans} {problem}")
    for option, path in (("--json", args.json), ("--details", args.details)):
        if path is not None:
            check_output_file(path, option)


def main(argv: list[str] | None = None) -> int:
    """Score one split's plans, print the metrics table and write the optional JSON outputs."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args = parse_args(argv)
    check_inputs_and_outputs(args)
    pairs = load_pairs(args.data, args.split, args.difficulty)
    if not pairs:
        raise UserError(f"no instances in split {args.split!r} for the chosen difficulty")
    store = args.data / "world.sqlite"
    try:  # the store is read lazily: damage shows at the first query, as an SQLite error
        if args.agent:
            plans = dict(AGENTS[args.agent](pairs, args.data, args))
        else:
            plans = plans_from_file(args.plans, pairs)
        results = score(pairs, plans, store)
    except sqlite3.DatabaseError as err:
        raise UserError(f"{store} is damaged ({err}); rebuild it with launch/make_data.py") from None
    metrics = compute_metrics(results)
    print(format_table(metrics))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
    if args.details:
        args.details.parent.mkdir(parents=True, exist_ok=True)
        with args.details.open("w", encoding="utf-8") as handle:
            for result in results:
                handle.write(json.dumps(result.to_dict(), ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
