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

log = logging.getLogger("make_data")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="data directory to write")
    parser.add_argument("--scale", default="small", choices=sorted(SCALES), help="world size (default small)")
    parser.add_argument("--seed", default=0, type=int, help="generator seed (default 0)")
    parser.add_argument("--from-jsonl", type=Path, default=None, metavar="DIR",
                        help="build the store from DIR/<table>.jsonl or .csv files instead of generating it")
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


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    step_world(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
