"""Speed benchmark: launch/make_data.py's stages at several worker counts, measured in one run.

    python benchmarks/bench_make_data.py [--scale small] [--instances N] [--workers 1 2 4] [--repeats 1]

Builds the same data directory once per worker count (a subprocess each, as a user runs it) and
prints, per stage, items per second and the speed-up against the first worker count: the world
(serial: one random stream draws the flights), the instances (generated, solved by the expert, with
their SFT prompts) and the trace-length table (every train trace encoded with the Qwen3
tokenizer). The stage times are those make_data records in DATA/build_info.json; with --repeats,
the worker counts take turns and each stage keeps its best time (a shared machine's load comes in
bursts). It also checks that every build wrote the same bytes. More workers than cores shows the
ceiling.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
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


def best(a: dict, b: dict) -> dict:
    """Each stage's shorter time of two builds (the item counts are the same)."""
    stages = {k: min(a["stages"][k], b["stages"][k]) for k in a["stages"]}
    return {"wall": min(a["wall"], b["wall"]), "stages": stages, "items": a["items"]}


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
    parser.add_argument("--repeats", type=int, default=1, help="builds per worker count; best kept")
    args = parser.parse_args()
    runs: dict[int, dict] = {}
    digests = set()
    with tempfile.TemporaryDirectory(prefix="bench_make_data-") as tmp:
        for repeat in range(args.repeats):
            for workers in args.workers:
                out = Path(tmp) / f"w{workers}-{repeat}"
                run = build(out, workers, args)
                digests.add(digest(out))
                shutil.rmtree(out)
                print(f"--workers {workers}: {run['wall']:.1f}s {run['stages']}", flush=True)
                runs[workers] = best(runs[workers], run) if workers in runs else run
    print(f"\nmake_data --scale {args.scale} on {os.cpu_count()} CPU cores\n")
    print(table(runs))
    same = len(digests) == 1
    print(f"\nsame bytes for every worker count (build_info.json aside): {'yes' if same else 'NO'}")
    if not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
