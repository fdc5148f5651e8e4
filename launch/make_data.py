"""Build a benchmark's data directory (for B2T: the world store, instances, ground truth, SFT traces).

    python launch/make_data.py --out DATA [--scale small|full] [--seed 0]
    python launch/make_data.py --out DATA --from-jsonl MY_TABLES/   # user data in the store schema
    python launch/make_data.py --benchmark travelplanner --out DATA ...   # its own options: --help

Layout of DATA is fixed by docs/ARCHITECTURE.md; each benchmark's `make_data` writes it.
"""

import argparse
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if __name__ == "__main__":  # as a script: this checkout's packages first, and launch/ off the path
    # (launch/rollout.py would shadow the `rollout` package)
    sys.path[:] = [str(ROOT)] + [p for p in sys.path
                                 if Path(p or ".").resolve() not in (ROOT, ROOT / "launch")]

from sandbox.benchmarks import BENCHMARKS, DEFAULT_BENCHMARK, BenchmarkError, benchmark_class  # noqa: E402

log = logging.getLogger("make_data")


def add_benchmark_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--benchmark", default=DEFAULT_BENCHMARK, choices=sorted(BENCHMARKS),
                        help=f"benchmark to build (default {DEFAULT_BENCHMARK})")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Common options, then those of the chosen benchmark (known only once --benchmark is read)."""
    first = argparse.ArgumentParser(add_help=False)
    add_benchmark_argument(first)
    name = first.parse_known_args(argv)[0].benchmark
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_benchmark_argument(parser)
    parser.add_argument("--out", required=True, type=Path, help="data directory to write")
    parser.add_argument("--scale", default="small", help="data size, e.g. small|full (default small)")
    parser.add_argument("--seed", default=0, type=int, help="generator seed (default 0)")
    parser.add_argument("--workers", default=2, type=int, help="processes for instances (default 2)")
    try:
        benchmark_class(name).add_data_arguments(parser)
    except BenchmarkError as err:
        parser.error(str(err))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Build DATA with the chosen benchmark's make_data; a user mistake is a one-line error."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        benchmark_class(args.benchmark).make_data(args.out, args, log.info)
    except BenchmarkError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
