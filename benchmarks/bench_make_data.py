"""Speed benchmark: launch/make_data.py's stages at several worker counts, measured in one run.

    python benchmarks/bench_make_data.py [--scale small] [--instances N] [--workers 1 2 4]

Builds the same data directory once per worker count (a subprocess each, as a user runs it) and
prints, per stage, items per second and the speed-up against the first worker count: the world
(serial: one random stream draws the flights), the instances (generated, solved by the expert, with
their SFT prompts) and the trace-length table (every train trace encoded with the Qwen3
tokenizer). The stage times are those make_data records in DATA/build_info.json. It also checks
that every build wrote the same bytes. More workers than cores shows the ceiling.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUBS = ("instances", "sft")
STAGES = (("world", "instances"), ("instances", "instances"), ("trace_lengths", "traces"))


def build(out: Path, workers: int, args: argparse.Namespace) -> dict:
    """One make_data run: its stage seconds, wall time and item counts."""
    command = [sys.executable, str(ROOT / "launch" / "make_data.py"), "--out", str(out)]
    command += ["--scale", args.scale, "--workers", str(workers)]
    command += [] if args.instances is None else ["--instances", str(args.instances)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"make_data --workers {workers} failed:\n{done.stderr[-2000:]}")
    info = json.loads((out / "build_info.json").read_text())
    lines = {sub: sum(len(p.read_bytes().splitlines()) for p in (out / sub).glob("*.jsonl")) for sub in SUBS}
    return {
        "wall": time.perf_counter() - started,
        "stages": info["stages"],
        "items": {"instances": lines["instances"], "traces": lines["sft"]},
    }


def digest(directory: Path) -> str:
    files = sorted(p for p in directory.rglob("*") if p.is_file() and p.name != "build_info.json")
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(directory)).encode() + hashlib.sha256(p.read_bytes()).digest())
    return h.hexdigest()


def table(runs: dict[int, dict]) -> str:
    """Markdown: a row per stage and the whole build; items/s at each worker count, ratio to the first."""
    counts = list(runs)
    base = counts[0]
    head = ["stage", "items"] + [f"{w} worker{'s' * (w > 1)}: items/s (x)" for w in counts]
    rows = [head, ["---"] * len(head)]
    for stage, unit in (*STAGES, ("whole build", "instances")):
        items = runs[base]["items"][unit]
        rates = {}
        for w in counts:
            seconds = runs[w]["wall"] if stage == "whole build" else runs[w]["stages"][stage]
            rates[w] = items / max(seconds, 1e-9)
        cells = [f"{rates[w]:.1f} ({rates[w] / rates[base]:.2f}x)" for w in counts]
        rows.append([stage, f"{items} {unit}", *cells])
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", default="small")
    parser.add_argument("--instances", type=int, default=None, help="per split and difficulty")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    runs, digests = {}, {}
    with tempfile.TemporaryDirectory(prefix="bench_make_data-") as tmp:
        for workers in args.workers:
            out = Path(tmp) / f"w{workers}"
            runs[workers] = build(out, workers, args)
            digests[workers] = digest(out)
            print(f"--workers {workers}: {runs[workers]['wall']:.1f}s {runs[workers]['stages']}", flush=True)
    print(f"\nmake_data --scale {args.scale} on {os.cpu_count()} CPU cores\n")
    print(table(runs))
    same = len(set(digests.values())) == 1
    print(f"\nsame bytes for every worker count (build_info.json aside): {'yes' if same else 'NO'}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
