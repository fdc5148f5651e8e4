"""Speed benchmark: how long sealing a checkpoint step takes (its checksum manifest: every file's
size and SHA-256), with one hashing thread and with the checkpointer's pool, on a step written by
the real RunCheckpointer (f32 parameters plus Adam's two moments).

    python benchmarks/bench_seal.py [--mib 100]      # the table in docs/results/checkpoint-sealing.md

The page cache is warm after the save, so this is the hashing cost; on shared storage the read
bandwidth bounds it (docs/results/checkpoint-sealing.md estimates an 8B step from both).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp

from b2tjax.run.checkpoint import RunCheckpointer
from b2tjax.run.resume import ResumePoint
from b2tjax.step.train_step import TrainState
from models import checksums


def write_step(directory: Path, mib: int) -> Path:
    """One saved step of `mib` MiB of f32 parameters in 8 arrays, plus two moments of each."""
    n = mib * 2**20 // 4 // 8
    key = jax.random.key(0)
    params = {f"layer{i}": jax.random.normal(jax.random.fold_in(key, i), (n,)) for i in range(8)}
    opt = {"mu": jax.tree.map(lambda x: x * 0.1, params), "nu": jax.tree.map(lambda x: x * x, params)}
    ckpt = RunCheckpointer(directory, every_steps=1, keep=2, async_save=False)
    ckpt.save(1, TrainState(params, opt, jnp.array(1), jnp.array(0)), ResumePoint("grpo", 1), {}, force=True)
    ckpt.close()
    return directory / "1"


def best_seal(step: Path, workers: int, repeats: int = 3) -> float:
    checksums._WORKERS = workers
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        checksums.write_manifest(step)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mib", type=int, default=100, help="MiB of f32 parameters (the step is ~3x)")
    args = parser.parse_args()
    pool = checksums._WORKERS
    with tempfile.TemporaryDirectory() as tmp:
        step = write_step(Path(tmp) / "checkpoints", args.mib)
        files = [p for p in step.rglob("*") if p.is_file()]
        total = sum(p.stat().st_size for p in files) / 2**20
        print(f"step: {len(files)} files, {total:.0f} MiB")
        seconds = {workers: best_seal(step, workers) for workers in sorted({1, pool})}
        print("threads  seal s  MiB/s  vs 1 thread")
        for workers, took in seconds.items():
            print(f"{workers:7d}  {took:6.2f}  {total / took:5.0f}  {seconds[1] / took:10.2f}x")


if __name__ == "__main__":
    main()
