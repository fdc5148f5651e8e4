"""Build the data directory: the world store and the benchmark instances.

    python launch/make_data.py --out DATA [--scale small|full] [--seed 0] [--force]
    python launch/make_data.py --out DATA --from-jsonl MY_TABLES/   # user data in the store schema

Layout of DATA is fixed by docs/ARCHITECTURE.md; the store goes to DATA/world.sqlite. A non-empty
--out is replaced only with --force. The build writes into a hidden temporary sibling of --out and
renames it at the end, so an interrupted build never leaves a half-written DATA. The same seed and
scale give the same bytes in every file except DATA/build_info.json (timings of this build).
"""

import argparse
import json
import logging
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from b2tjax.cli import UserError, run_main
from sandbox.world.generator import build_world
from sandbox.world.loader import build_store_from_files
from sandbox.world.scales import SCALES
from sandbox.instances.build import build_benchmark

log = logging.getLogger("make_data")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Options: where to write, and whether the store is generated or loaded from user files."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="data directory to write")
    parser.add_argument("--scale", default="small", choices=sorted(SCALES), help="world size (default small)")
    parser.add_argument("--seed", default=0, type=int, help="generator seed (default 0)")
    parser.add_argument("--from-jsonl", type=Path, default=None, metavar="DIR",
                        help="build the store from DIR/<table>.jsonl or .csv files instead of generating it")
    parser.add_argument("--language", default="en", choices=("en", "zh"), help="instruction language")
    parser.add_argument("--workers", default=2, type=int, help="processes for instances (default 2)")
    parser.add_argument("--world-only", action="store_true", help="write world.sqlite only (no instances)")
    parser.add_argument("--no-expert", action="store_true",
                        help="skip expert validation and SFT traces (instances are not checked solvable)")
    parser.add_argument("--instances", type=int, default=None, metavar="N",
                        help="instances per split and difficulty (default: the scale's)")
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out")
    args = parser.parse_args(argv)
    if args.instances is not None and args.instances < 1:
        parser.error("--instances must be >= 1")
    return args


def step_world(args: argparse.Namespace, out: Path, timings: dict[str, float]) -> Path:
    """Step 1: DATA/world.sqlite, generated or loaded from user files."""
    store = out / "world.sqlite"
    started = time.perf_counter()
    if args.from_jsonl is not None:
        counts = build_store_from_files(args.from_jsonl, store)
    else:
        counts = build_world(store, scale=args.scale, seed=args.seed)
    timings["world"] = round(time.perf_counter() - started, 1)
    log.info("world.sqlite: %s (%.1fs)", ", ".join(f"{k}={v}" for k, v in counts.items()), timings["world"])
    return store


def step_instances(args: argparse.Namespace, store: Path, out: Path, timings: dict[str, float]) -> None:
    """Step 2: instances/, ground_truth/, stats.json and (expert) sft/train.jsonl."""
    prompt_builder = None
    if not args.no_expert:
        # The agent's own prompt frames the SFT traces. launch/rollout.py would shadow the
        # `rollout` package, so this script's folder is off the import path for this import.
        here = Path(__file__).resolve().parent
        saved = list(sys.path)
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
        try:
            from rollout.prompt import build_prompt
        finally:
            sys.path[:] = saved
        prompt_builder = build_prompt
    started = time.perf_counter()
    sizes = None if args.instances is None else {"train": args.instances, "test": args.instances}
    result = build_benchmark(store, out, scale=args.scale, seed=args.seed, language=args.language,
                             workers=args.workers, use_expert=not args.no_expert, log=log.info,
                             prompt_builder=prompt_builder, sizes=sizes)
    timings.update(result["timings"])
    log.info("instances: done (%.1fs)", time.perf_counter() - started)


def staging_dir(out: Path, force: bool) -> Path:
    """Check --out (before any work) and create the temporary sibling the build writes into."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file, expected a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UserError(f"--out {out} is not empty; pass --force to replace it")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    except OSError as err:
        raise UserError(f"--out {out} cannot be created ({(err.strerror or str(err)).lower()})") from None
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)  # mkdtemp's 0700 would otherwise become DATA's mode
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
    """Build DATA step by step: the store first, then (unless --world-only) the benchmark."""
    if args.from_jsonl is not None and not args.from_jsonl.is_dir():
        raise UserError(f"--from-jsonl {args.from_jsonl} is not a directory")
    staging = staging_dir(args.out, args.force)
    timings: dict[str, float] = {}
    try:
        store = step_world(args, staging, timings)
        if not args.world_only:
            step_instances(args, store, staging, timings)
        info = {"note": "timings of this build; the only file that differs between two builds of a seed",
                "seconds": timings}
        (staging / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
        publish(staging, args.out)
    except sqlite3.OperationalError as err:  # SQLite reports a full disk in its own words
        raise UserError(f"writing {args.out / 'world.sqlite'} failed: {err}") from None
    except OSError as err:
        if err.filename is not None:
            raise
        raise UserError(f"writing {args.out} failed: {(err.strerror or str(err)).lower()}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # gone already after a successful publish
    log.info("wrote %s", args.out)
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    return run_main(lambda a: build(parse_args(a)), argv)


if __name__ == "__main__":
    sys.exit(main())
