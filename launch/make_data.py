"""Build a benchmark's data directory; the options are in `b2tjax/cli/make_data.py` (or `--help`)."""

import sys

from b2tjax.cli.make_data import main

if __name__ == "__main__":
    sys.exit(main())
