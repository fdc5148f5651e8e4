"""Make a fresh machine ready to train: build DATA (as launch/make_data.py does) when it is absent.

Kept free of JAX imports: make_data forks worker processes, which must happen before JAX starts
its threads (launch/train.py calls this first). Only an absent or empty directory is built: a
directory that lacks some pieces is the user's (another seed, another scale) and is never rebuilt.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from b2tjax.cli import make_data
from b2tjax.data.marker import check_data_dir
from b2tjax.errors import UserError
from sandbox.benchmarks import DEFAULT_BENCHMARK


def ensure_data(data_dir: Path, scale: str, benchmark: str = DEFAULT_BENCHMARK, build: bool = True) -> None:
    """Run launch/make_data.py's main() for `benchmark` when DATA is absent or empty and `build`
    (a recipe's `data.build_missing`), saying so in one line; UserError when it is absent and not
    to be built, partial, or built for another benchmark (its benchmark.json)."""
    if data_dir.exists() and not data_dir.is_dir():
        raise UserError(f"data directory {data_dir} is a file")
    if data_dir.is_dir() and any(data_dir.iterdir()):
        check_data_dir(data_dir, benchmark)
        return
    if not build:
        raise UserError(missing_data(data_dir, scale, benchmark))
    print(
        f"data.data_dir {data_dir} is missing: building the {scale} {benchmark} data there "
        "(data.build_missing: true) ...",
        flush=True,
    )
    started = time.perf_counter()
    code = make_data.main(["--benchmark", benchmark, "--out", str(data_dir), "--scale", scale])
    if code:
        raise UserError(f"launch/make_data.py --out {data_dir} failed with status {code}")
    print(f"data ready ({time.perf_counter() - started:.0f}s)", flush=True)


def missing_data(data_dir: Path, scale: str, benchmark: str) -> str:
    """The one line for a data directory that is absent and not to be built."""
    state = "is empty" if data_dir.is_dir() else "does not exist"
    return (
        f"data.data_dir {data_dir} {state}; build it with python launch/make_data.py --benchmark "
        f"{benchmark} --out {data_dir} --scale {scale}, or set data.build_missing=true to build it here"
    )


def build_or_wait(
    data_dir: Path, scale: str, benchmark: str, build: bool = True, timeout_s: float = 3600.0
) -> None:
    """`ensure_data` on one process only: process 0 of a multi-process job (JAX_PROCESS_ID, read
    before JAX starts) builds; the others poll until the build is published (by one rename, so a
    complete directory is all they can see). Why not a JAX barrier: the build forks workers, which
    must happen before the JAX runtime starts its threads."""
    if os.environ.get("JAX_PROCESS_ID", "0") in ("", "0"):
        ensure_data(data_dir, scale, benchmark, build)
        return
    if not build and not (data_dir.is_dir() and any(data_dir.iterdir())):
        raise UserError(missing_data(data_dir, scale, benchmark))
    deadline = time.monotonic() + timeout_s
    while not (data_dir.is_dir() and any(data_dir.iterdir())):
        if time.monotonic() > deadline:
            raise UserError(f"process 0 did not build {data_dir} within {timeout_s:.0f}s")
        time.sleep(1.0)
    ensure_data(data_dir, scale, benchmark)  # now only checks it is complete
