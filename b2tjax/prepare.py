"""Make a fresh machine ready to train: build DATA with launch/make_data.py when it is absent.

Kept free of JAX imports: make_data forks worker processes, which must happen before JAX starts
its threads (launch/train.py calls this first).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from sandbox.benchmarks import DEFAULT_BENCHMARK, benchmark_class

ROOT = Path(__file__).resolve().parents[1]


def ensure_data(data_dir: Path, scale: str, benchmark: str = DEFAULT_BENCHMARK) -> None:
    """Run launch/make_data.py's main() for `benchmark` unless DATA already holds what it needs."""
    if benchmark_class(benchmark).data_ready(data_dir):
        return
    print(f"building the {scale} {benchmark} data in {data_dir} ...", flush=True)
    started = time.perf_counter()
    sys.path.insert(0, str(ROOT / "launch"))
    try:
        import make_data
    finally:
        sys.path.pop(0)
    code = make_data.main(["--benchmark", benchmark, "--out", str(data_dir), "--scale", scale])
    if code:
        raise RuntimeError(f"launch/make_data.py failed with status {code}")
    print(f"data ready ({time.perf_counter() - started:.0f}s)", flush=True)
