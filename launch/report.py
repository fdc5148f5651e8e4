r"""Write the HTML evaluation report of rollout records: one self-contained page (no network) with the
split's metrics, per-constraint pass rates, optional training curves and, per episode, the request,
the day timelines and map, every check's verdict and the whole conversation (HiMAP: one lane per
day executor).

    python launch/report.py --data DATA --rollouts rollouts.jsonl --out report.html \
        [--benchmark b2t] [--split test] [--run runs/tiny] [--logprobs] [--title TEXT]
    python launch/eval.py --data DATA --plans PLANS.jsonl --report report.html    # plans, no turns
    python launch/eval.py --data DATA --policy expert --report report.html        # a policy's plans

ROLLOUTS.jsonl is what launch/rollouts.py writes (single agents or `--agent himap` teams); each line
names the tokenizer its ids decode with (`--tokenizer` overrides it). `--run` adds the training
curves of `launch/plot.py`; `--logprobs` shades each sampled token by its log-probability.
A training run writes OUT/report.html of its final evaluation itself (launch/train.py).
"""

from __future__ import annotations

import argparse
import logging
import sqlite3
import sys
from pathlib import Path
from typing import Any

from b2tjax.cli.outputs import Paths, guard
from b2tjax.cli.script import (
    UserError,
    add_benchmark_options,
    benchmark_parser,
    damaged_store,
    run_main,
)
from b2tjax.report import ReportError, write_report
from b2tjax.report.build import record_episodes
from b2tjax.report.records import id_beyond, record_problem
from models.tokenizer import load_tokenizer
from rollout.record import EpisodeRecord
from sandbox.benchmarks import BenchmarkError, benchmark_class
from sandbox.jsonl import read_jsonl_objects

log = logging.getLogger("report")


PATHS = Paths(  # the one output guard's view of the options (b2tjax/outputs.py)
    outputs=("--out",), inputs=("--rollouts", "--run", "--tokenizer", "--queries"), data=("--data",)
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser, name = benchmark_parser(argv, "of the rollouts", description=__doc__)
    parser.add_argument("--data", type=Path, required=True, help="the benchmark's data directory")
    parser.add_argument("--rollouts", type=Path, required=True, help="launch/rollouts.py output (JSONL)")
    parser.add_argument("--out", type=Path, required=True, help="the HTML file to write")
    parser.add_argument("--split", default="test", help="the split the rollouts ran on (default test)")
    parser.add_argument("--tokenizer", help="decode the ids with this tokenizer (default: the records')")
    parser.add_argument("--run", type=Path, nargs="+", default=[], help="training run(s) whose curves to add")
    parser.add_argument("--logprobs", action="store_true", help="shade sampled tokens by log-probability")
    parser.add_argument("--title", help="the page's title (default: benchmark, split and file name)")
    add_benchmark_options(parser, name)
    return parser.parse_args(argv)


def read_records(path: Path) -> tuple[list, list[int]]:
    """The EpisodeRecords of a rollouts file and their line numbers; a line that is not a usable
    record (b2tjax.report.records.record_problem) is a one-line error naming it."""

    if not path.is_file():
        raise UserError(f"--rollouts {path} does not exist")
    records, lines = [], []
    for number, row in read_jsonl_objects(path, UserError):
        problem = record_problem(row)
        if problem is not None:
            plans = "ids" not in row
            hint = "; for a plans file use launch/eval.py --plans FILE --report OUT" if plans else ""
            raise UserError(f"{path}:{number}: {problem}{hint}")
        records.append(EpisodeRecord.from_json(row))
        lines.append(number)
    if not records:
        raise UserError(f"{path} holds no records")
    return records, lines


def open_tokenizer(spec: str, records: list, lines: list[int], path: Path) -> Any:
    """The tokenizer the ids decode with; one line when it cannot be loaded or lacks some id."""

    try:
        tokenizer = load_tokenizer(spec)
    except Exception as err:  # noqa: BLE001 - a user's path: tokenizers/sentencepiece raise many types
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise UserError(f"cannot load the tokenizer {spec!r}: {message}") from None
    beyond = id_beyond(records, tokenizer.vocab_size)
    if beyond is not None:
        index, top = beyond
        raise UserError(
            f"{path}:{lines[index]}: id {top} is beyond the tokenizer {spec!r} ({tokenizer.vocab_size} ids); "
            "pass the tokenizer the rollouts were made with (--tokenizer)"
        )
    return tokenizer


def main(argv: list[str] | None = None) -> int:
    """Judge every episode of the rollouts file and write the page."""

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args = parse_args(argv)
    guard(args, PATHS)
    records, lines = read_records(args.rollouts)
    spec = args.tokenizer or records[0].tokenizer
    if not spec or not isinstance(spec, str):
        raise UserError(f"{args.rollouts} does not name its tokenizer: pass --tokenizer")
    other = next((k for k, r in enumerate(records) if r.tokenizer != records[0].tokenizer), None)
    if other is not None and not args.tokenizer:  # one page decodes with one tokenizer
        raise UserError(
            f"{args.rollouts}:{lines[other]}: names tokenizer {records[other].tokenizer!r}, "
            f"line {lines[0]} {records[0].tokenizer!r}; report one tokenizer's rollouts at a time"
        )
    tokenizer = open_tokenizer(spec, records, lines, args.rollouts)
    try:
        cls = benchmark_class(args.benchmark)
        bench = cls(args.data, **cls.options_from_args(args))
        pairs = bench.load_split(args.split)
        episodes, verdicts = record_episodes(
            bench, pairs, records, tokenizer, agent=args.rollouts.stem, shading=args.logprobs
        )
        table = bench.format_metrics(bench.metrics(verdicts))
        title = args.title or f"{bench.name} {args.split}: {args.rollouts.name}"
        write_report(args.out, episodes, title=title, metrics_text=table, run_dirs=args.run)
    except (BenchmarkError, ReportError) as err:
        raise UserError(str(err)) from None
    except sqlite3.DatabaseError as err:
        raise damaged_store(args.data, err) from None
    print(table)
    log.info("wrote %s (%d episodes)", args.out, len(episodes))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
