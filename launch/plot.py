"""Draw learning curves of training runs into one PNG: reward, pass rates, action error rate and the
sampler-vs-trainer log-prob gap, one line per run directory (read from RUN_DIR/metrics.jsonl).

    python launch/plot.py runs/tiny --out curves.png
    python launch/plot.py runs/seed0 runs/seed1 runs/seed2 --labels s0 s1 s2 --out curves.png

Needs matplotlib: pip install -e ".[plot]". The notebook draws the same figure with
`b2tjax.report.plotting.plot_runs`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from b2tjax.cli.outputs import check_outputs
from b2tjax.errors import UserError
from b2tjax.report.plotting import PlotError, plot_runs


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="training run directories")
    parser.add_argument(
        "--out", type=Path, default=Path("curves.png"), help="PNG to write (default curves.png)"
    )
    parser.add_argument("--labels", nargs="+", help="one legend label per run (default: directory names)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        check_outputs([("--out", args.out)], inputs=[("RUN_DIR", d) for d in args.run_dirs])
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        plot_runs(args.run_dirs, args.out, labels=args.labels)
    except PlotError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # e.g. the --out directory does not exist
        print(f"error: cannot write {args.out}: {err.strerror or err}", file=sys.stderr)
        return 2
    print(f"wrote {args.out} ({len(args.run_dirs)} run{'s' if len(args.run_dirs) > 1 else ''})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
