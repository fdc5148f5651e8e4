"""Build a benchmark's data directory; the options are in `b2tjax/cli/make_data.py` (or `--help`)."""

import sys

from b2tjax.cli.make_data import PATHS, main  # noqa: F401 - PATHS: what the output guard checks

if __name__ == "__main__":
    sys.exit(main())
