"""`launch/make_data.py --benchmark travelplanner --out DATA`: the TravelPlanner training data.

Writes (layout in benchmark.py) the database copy, the train split = the 45 official training
queries + generated ones, a dev split of generated queries from another random stream (what
training evaluates on by default: the benchmark's `eval_split`), their reference information, and
the expert's SFT traces of the train split, framed by the two-stage agent prompt. Only expert plans
that pass all
13 checks under `official` become traces; a generated query the expert cannot solve is dropped
(counted in stats.json). Validation and test
queries are never read here.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox.benchmarks.travelplanner.database import FILE_NAMES, PACKAGE_DATA_DIR, Database
from sandbox.benchmarks.travelplanner.evaluator import evaluate
from sandbox.benchmarks.travelplanner.expert import TravelPlannerExpert
from sandbox.benchmarks.travelplanner.generator import generate_queries
from sandbox.benchmarks.travelplanner.loader import LoaderError
from sandbox.benchmarks.travelplanner.prompt import build_prompt
from sandbox.benchmarks.travelplanner.reference import reference_info
from sandbox.benchmarks.travelplanner.tools import TravelPlannerWorld
from sandbox.benchmarks.travelplanner.training import load_training

DEFAULT_SOURCE = PACKAGE_DATA_DIR  # shipped with the package
GENERATED = {"small": 60, "full": 3000}
DEV = {"small": 12, "full": 300}  # generated held-out queries for evaluation during training


class PrepareError(ValueError):
    """A user-facing problem with the make_data options or source files (one line)."""


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tp-data",
        type=Path,
        default=DEFAULT_SOURCE,
        help="TravelPlanner data: database/, train_ref_info.jsonl, std_travelplanner.jsonl, "
        "structured/ (default: the copy shipped in sandbox/benchmarks/travelplanner/data)",
    )
    parser.add_argument(
        "--generated",
        type=int,
        default=None,
        help=f"generated training queries (default by --scale: {GENERATED})",
    )
    parser.add_argument("--no-expert", action="store_true", help="skip the expert's SFT traces")


def _write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def _copy_database(source: Path, out_dir: Path) -> Database:
    target = out_dir / "database"
    target.mkdir(parents=True, exist_ok=True)
    for name in FILE_NAMES.values():
        if (source / name).exists():
            shutil.copyfile(source / name, target / name)
    return Database.from_dir(target)


class _Split:
    """The three row lists of one split, written side by side."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.visible: list[dict[str, Any]] = []
        self.truth: list[dict[str, Any]] = []
        self.refs: list[dict[str, Any]] = []

    def add(
        self, ident: str, query: dict[str, Any], cities: list[str], info: dict[str, Any], source: str
    ) -> None:
        self.visible.append(
            {
                "id": ident,
                "split": self.name,
                "difficulty": query["level"],
                "query": query["query"],
                "days": query["days"],
                "source": source,
            }
        )
        self.truth.append({"id": ident, "query": query, "cities": cities})
        self.refs.append({"id": ident, "reference_info": info})

    def drop(self, ids: set[str]) -> None:
        keep = [i for i, v in enumerate(self.visible) if v["id"] not in ids]
        self.visible, self.truth, self.refs = (
            [rows[i] for i in keep] for rows in (self.visible, self.truth, self.refs)
        )

    def write(self, out_dir: Path) -> None:
        folders = (("instances", self.visible), ("ground_truth", self.truth), ("reference", self.refs))
        for folder, rows in folders:
            _write_jsonl(out_dir / folder / f"{self.name}.jsonl", rows)


def build_splits(
    db: Database, source: Path, n_generated: int, n_dev: int, seed: int
) -> tuple[_Split, _Split]:
    """train: the 45 official queries, then generated ones; dev: generated from another random stream."""
    train, dev = _Split("train"), _Split("dev")
    for example in load_training(source):
        train.add(
            f"train-{example.index:02d}",
            example.query,
            example.reference_cities,
            example.reference_info,
            "official",
        )
    for split, n, prefix in ((train, n_generated, "gen"), (dev, n_dev, "dev")):
        for i, generated in enumerate(generate_queries(db, n, seed=seed, stream=split.name)):
            split.add(
                f"{prefix}-{i:05d}",
                generated.query,
                generated.cities,
                reference_info(db, generated.query, generated.cities),
                "generated",
            )
    return train, dev


def expert_traces(db: Database, visible: list[dict], truth: list[dict]) -> tuple[list[dict], set[str]]:
    """SFT traces of the expert plans that pass every check; and the ids it could not solve."""
    world = TravelPlannerWorld(db)
    expert = TravelPlannerExpert(world)
    traces, failed = [], set()
    for v, t in zip(visible, truth):
        result = expert.solve(v, t)
        if not result.ok or not evaluate(t["query"], result.plan, db).final_pass:
            failed.add(v["id"])
            continue
        prompt = build_prompt(v["query"], world.tool_schemas())
        traces.append({"id": v["id"], "messages": prompt.messages + result.turns, "tools": prompt.tools})
    return traces, failed


def train_counts(visible: list[dict], requested: int) -> str:
    """'104 queries (45 official + 59 generated of 60 requested)': what was made, not what was asked
    (the generator skips a slot it finds no plannable query for)."""
    generated = sum(v["source"] == "generated" for v in visible)
    official = len(visible) - generated
    skipped = "" if generated == requested else f" of {requested} requested"
    return f"{len(visible)} queries ({official} official + {generated} generated{skipped})"


def make_data(out_dir: Path, args: argparse.Namespace, log: Callable[[str], None]) -> None:
    source = Path(args.tp_data)
    if not (source / "database").is_dir():
        raise PrepareError(
            f"no TravelPlanner data at {source} (expected database/ and the training files); "
            "--tp-data takes a folder laid out like sandbox/benchmarks/travelplanner/data"
        )
    n_generated = args.generated if args.generated is not None else GENERATED.get(args.scale)
    if n_generated is None or n_generated < 0:
        raise PrepareError(
            f"unknown --scale {args.scale!r} for travelplanner; choose from "
            f"{sorted(GENERATED)} "
            "or give --generated N"
        )
    started = time.perf_counter()
    db = _copy_database(source / "database", out_dir)
    try:
        train, dev = build_splits(db, source, n_generated, DEV.get(args.scale, 0), args.seed)
    except LoaderError as err:
        raise PrepareError(str(err)) from None
    log(
        f"train split: {train_counts(train.visible, n_generated)}, dev split: {len(dev.visible)} "
        f"({time.perf_counter() - started:.1f}s)"
    )
    stats: dict[str, Any] = {}
    if not args.no_expert:
        traces, failed = expert_traces(db, train.visible + dev.visible, train.truth + dev.truth)
        train.drop({i for i in failed if not i.startswith("train-")})  # the official 45 always stay
        dev.drop(failed)
        dev_ids = {v["id"] for v in dev.visible}
        _write_jsonl(out_dir / "sft" / "train.jsonl", [t for t in traces if t["id"] not in dev_ids])
        stats["expert"] = {"solved": len(traces), "failed": sorted(failed)}
        log(f"expert: {len(traces)} solved, {len(failed)} unsolved ({time.perf_counter() - started:.1f}s)")
    for split in (train, dev):
        split.write(out_dir)
        groups = Counter(f"{v['source']}:{v['difficulty']}-{v['days']}" for v in split.visible)
        stats[split.name] = dict(sorted(groups.items()))
    (out_dir / "stats.json").write_text(json.dumps(stats, indent=1) + "\n", encoding="utf-8")
