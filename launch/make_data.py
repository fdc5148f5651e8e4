"""Build the data directory: the world store (and, in later steps, the benchmark instances).

    python launch/make_data.py --out DATA [--scale small|full] [--seed 0]
    python launch/make_data.py --out DATA --from-jsonl MY_TABLES/   # user data in the store schema

Layout of DATA is fixed by docs/ARCHITECTURE.md; the store goes to DATA/world.sqlite.
"""

import argparse
import logging
import sys
import time
from pathlib import Path

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
    return parser.parse_args(argv)


def step_world(args: argparse.Namespace) -> Path:
    """Step 1: DATA/world.sqlite, generated or loaded from user files."""
    store = args.out / "world.sqlite"
    started = time.perf_counter()
    if args.from_jsonl is not None:
        counts = build_store_from_files(args.from_jsonl, store)
    else:
        counts = build_world(store, scale=args.scale, seed=args.seed)
    log.info("world.sqlite: %s (%.1fs)", ", ".join(f"{k}={v}" for k, v in counts.items()),
             time.perf_counter() - started)
    return store


def step_instances(args: argparse.Namespace, store: Path) -> None:
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
    build_benchmark(store, args.out, scale=args.scale, seed=args.seed, language=args.language,
                    workers=args.workers, use_expert=not args.no_expert, log=log.info,
                    prompt_builder=prompt_builder)
    log.info("instances: done (%.1fs)", time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    """Build DATA step by step: the store first, then (unless --world-only) the benchmark."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    store = step_world(args)
    if not args.world_only:
        step_instances(args, store)
    return 0


if __name__ == "__main__":
    sys.exit(main())
