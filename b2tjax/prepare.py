"""Make a fresh machine ready to train: build DATA with launch/make_data.py when it is absent.

Kept free of JAX imports: make_data forks worker processes, which must happen before JAX starts
its threads (launch/train.py calls this first).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ensure_data(data_dir: Path, scale: str) -> None:
    """Run launch/make_data.py's main() unless DATA already holds the world and the instances."""
    needed = [data_dir / "world.sqlite", data_dir / "instances" / "train.jsonl", data_dir / "ground_truth" / "train.jsonl"]
    if all(p.exists() for p in needed):
        return
    print(f"building the {scale} world and benchmark in {data_dir} ...", flush=True)
    started = time.perf_counter()
    sys.path.insert(0, str(ROOT / "launch"))
    try:
        import make_data
    finally:
        sys.path.pop(0)
    code = make_data.main(["--out", str(data_dir), "--scale", scale])
    if code:
        raise RuntimeError(f"launch/make_data.py failed with status {code}")
    print(f"data ready ({time.perf_counter() - started:.0f}s)", flush=True)
