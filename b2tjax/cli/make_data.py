"""Build a benchmark's data directory safely: refuse to replace user data, never leave half of one.

The body of `launch/make_data.py` (and of `b2tjax.cli.prepare.ensure_data`, which builds DATA for a
training run on a fresh machine). Kept free of JAX imports: benchmarks fork worker processes here,
which must happen before JAX starts its threads.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import logging
import os
import shutil
import sqlite3
import time
from pathlib import Path

from b2tjax.cli.outputs import Paths, guard, named_paths
from b2tjax.cli.script import add_benchmark_options, benchmark_parser, run_main, setup_logging
from b2tjax.data.marker import write_marker
from b2tjax.errors import UserError
from b2tjax.sft.lengths import record_lengths
from sandbox.benchmarks import BenchmarkError, benchmark_class
from sandbox.chunked import CHUNKS_DIR

USAGE = """\
    python launch/make_data.py --out DATA [--scale small|full] [--seed 0] [--force]
    python launch/make_data.py --out DATA --from-jsonl MY_TABLES/   # user data in the store schema
    python launch/make_data.py --benchmark travelplanner --out DATA ...   # its own options: --help

Layout of DATA is fixed by docs/ARCHITECTURE.md; each benchmark's `make_data` writes it. A non-empty
--out is replaced only with --force. The build writes into a hidden sibling of --out named after its
options (.DATA.building-KEY) and renames it at the end, so an interrupted build never leaves a
half-written DATA; the same command run again continues it, keeping the finished work. The same
seed and scale give the same bytes, for any --workers and after any interruption, in every file
except DATA/build_info.json (timings of this build). DATA/benchmark.json names the benchmark, so
`launch/eval.py --data DATA` needs no --benchmark.
"""


log = logging.getLogger("make_data")


# the one output guard's view of the options (b2tjax/outputs.py); the benchmarks' source options
PATHS = Paths(outputs=("--out",), inputs=("--from-jsonl", "--tp-data"), dirs=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Common options, then those of the chosen benchmark (known only once --benchmark is read)."""
    parser, name = benchmark_parser(
        argv, "to build", reads_data=False, prog="make_data.py", description=USAGE
    )
    parser.add_argument("--out", required=True, type=Path, help="data directory to write")
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out")
    parser.add_argument("--scale", default="small", help="data size, e.g. small|full (default small)")
    parser.add_argument("--seed", default=0, type=int, help="generator seed (default 0)")
    parser.add_argument("--workers", default=2, type=int, help="processes for each stage (default 2)")
    add_benchmark_options(parser, name, data=True)
    return parser.parse_args(argv)


# what changes neither the bytes nor the work of a build: the same key means the same build
NOT_IN_KEY = ("out", "force", "workers")


def build_key(args: argparse.Namespace) -> str:
    """A short hash of the options that decide the output: a rerun with the same ones continues."""
    options = {k: str(v) for k, v in sorted(vars(args).items()) if k not in NOT_IN_KEY}
    return hashlib.sha256(json.dumps(options).encode()).hexdigest()[:12]


def staging_dir(out: Path, force: bool, key: str) -> Path:
    """Check --out (before any work) and give the sibling the build writes into: an unfinished
    build of the same options is continued; one of other options is removed."""
    if out.is_symlink():  # replacing it would rename the link, not the directory it points to
        raise UserError(f"--out {out} is a symbolic link; give the directory itself ({out.resolve()})")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, expected a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UserError(f"--out {out} is not empty; pass --force to replace it")
    staging = out.parent / f".{out.name}.building-{key}"
    for other in out.parent.glob(f".{glob.escape(out.name)}.building-*"):
        if other != staging:
            log.info("removing an unfinished build of other options: %s", other)
            shutil.rmtree(other, ignore_errors=True)
    if staging.is_dir():
        log.info("continuing the unfinished build in %s (same options; its finished work is kept)", staging)
        return staging
    umask = os.umask(0)
    os.umask(umask)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging.mkdir(mode=0o777 & ~umask)  # DATA's mode, as a directory made by the user
    except OSError as err:
        raise UserError(f"--out {out} cannot be created ({(err.strerror or str(err)).lower()})") from None
    return staging


def publish(staging: Path, out: Path) -> None:
    """Put the finished build at `out`; a replaced directory is removed only after the rename."""
    replaced = None
    if out.exists():
        replaced = out.parent / f".{out.name}.replaced-{os.getpid()}"
        out.rename(replaced)
    staging.rename(out)
    if replaced is not None:
        shutil.rmtree(replaced)


def build(args: argparse.Namespace) -> int:
    """The benchmark's make_data into a staging directory, published by one rename when complete.
    An interrupted or failed build keeps its staging directory for the same command to continue;
    one refused for its options (a user error) removes it."""
    guard(args, PATHS)
    for option, source in named_paths(args, PATHS.inputs, {}):  # and no input inside what is replaced
        if source is not None and args.out.resolve() in (
            Path(source).resolve(),
            *Path(source).resolve().parents,
        ):
            raise UserError(f"{option} {source} lies in --out {args.out}, which the build replaces")
    if args.workers < 1:
        raise UserError(f"--workers must be >= 1, got {args.workers}")
    staging = staging_dir(args.out, args.force, build_key(args))
    keep = True
    try:
        write_stages(staging, args)
        shutil.rmtree(staging / CHUNKS_DIR, ignore_errors=True)
        publish(staging, args.out)
    except (BenchmarkError, UserError) as err:
        keep = False
        raise UserError(str(err)) from None
    except sqlite3.OperationalError as err:  # SQLite reports a full disk in its own words
        raise UserError(f"writing {args.out} failed: {err}") from None
    except OSError as err:
        if err.filename is not None:
            raise
        raise UserError(f"writing {args.out} failed: {(err.strerror or str(err)).lower()}") from None
    except KeyboardInterrupt:
        raise UserError("interrupted") from None
    finally:
        if not keep:
            shutil.rmtree(staging, ignore_errors=True)
        elif staging.exists():
            log.warning("the finished work is kept in %s: the same command continues the build", staging)
    log.info("wrote %s", args.out)
    return 0


def write_stages(staging: Path, args: argparse.Namespace) -> None:
    """The benchmark's data, its marker, the trace-length table and build_info.json (timings)."""
    started = time.perf_counter()
    stages = benchmark_class(args.benchmark).make_data(staging, args, log.info) or {}
    write_marker(staging, args.benchmark)  # eval / rollouts / train read it from --data
    built = time.perf_counter()
    record_lengths(staging, args.benchmark, log.info, args.workers)  # plan / train check it
    info = {
        "note": "timings of this build; the only file that differs between two builds of a seed",
        "seconds": round(time.perf_counter() - started, 1),
        "trace_lengths_seconds": round(time.perf_counter() - built, 1),
        "stages": {**stages, "trace_lengths": round(time.perf_counter() - built, 1)},
        "workers": args.workers,
    }
    (staging / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    """Build DATA with the chosen benchmark's make_data; a user mistake is a one-line error."""
    setup_logging()
    return run_main(lambda a: build(parse_args(a)), argv)
