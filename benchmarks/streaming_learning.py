"""Learning under streaming rollouts, over seeds: not a speed benchmark.

The multi-turn tool-learning recipe (tests/lookup_fixtures.py: SFT on the protocol, then 20 GRPO
steps x 128 episodes, lr 3e-3, 4 epochs per batch) from each seed, synchronous and streaming. One
seed is one sample of a noisy outcome, so a mode is judged by how many seeds meet the synchronous
test's bar (tests/b2tjax/test_tool_learning.py): sampled success >= 0.9 over the last 3 steps and
greedy success >= 0.9.

  sync      rollout.max_staleness=0
  S1, S2    rollout.max_staleness=1 / 2 (the lookup session holds every step in flight)
  S1+during rollout.max_staleness=1 rollout.decode_during_update=true, co-located (the split
            placement's records): every token of every step after the first is one update old

Each run appends one JSON line to `--results`; a run already there (same seed, mode, overrides) is
not run again, so the table can be grown seed by seed. About a minute per run on 2 CPU cores.

    python benchmarks/streaming_learning.py --seeds 0 1 2 3 [--modes sync S1 S2 S1+during]
        [--set grpo.beta=0.02 ...] [--results streaming_learning.jsonl]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MODES = {
    "sync": ["rollout.max_staleness=0"],
    "S1": ["rollout.max_staleness=1"],
    "S2": ["rollout.max_staleness=2"],
    "S1+during": ["rollout.max_staleness=1", "rollout.decode_during_update=true"],
}
STEPS = 20  # the GRPO steps of its recorded runs (the suite's learning tests train fewer)
BAR = 0.9  # the synchronous test's: last-3 sampled success and greedy success


def run_one(seed: int, mode: str, extra: list[str]) -> dict:
    """One SFT + GRPO run of the lookup recipe; its per-step success and greedy success."""
    sys.path.insert(0, str(ROOT))
    from b2tjax.tasks.toy_tools import LookupConfig, LookupTask
    from tests.lookup_fixtures import NUM_VALUES, train_lookup

    overrides = [f"steps={STEPS}", *MODES[mode], *extra]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        task = LookupTask(LookupConfig(num_values=NUM_VALUES))
        rows, result = train_lookup(Path(out), task, seed, overrides)
    success = [row["success"] for row in rows]
    return {
        "seed": seed,
        "mode": mode,
        "extra": extra,
        "success": [round(s, 3) for s in success],
        "last3": round(float(np.mean(success[-3:])), 3),
        "greedy": float(result.eval_metrics["success"]),
        "secs": round(time.perf_counter() - t0),
    }


def met(run: dict) -> bool:
    return run["last3"] >= BAR and run["greedy"] >= BAR


def table(runs: list[dict], seeds: list[int]) -> str:
    """One line per (mode, overrides): seeds meeting the bar, and each seed's last-3 / greedy."""
    groups: dict[tuple, dict[int, dict]] = {}
    for run in runs:
        if run["seed"] in seeds:
            groups.setdefault((run["mode"], " ".join(run["extra"])), {})[run["seed"]] = run
    lines = [f"bar: last-3 sampled success >= {BAR} and greedy >= {BAR}; per seed: last-3 / greedy"]
    lines.append(f"{'mode':<34} {'met':>5}  " + "  ".join(f"seed {s:<8}" for s in seeds))
    for (mode, extra), by_seed in sorted(groups.items(), key=lambda g: (list(MODES).index(g[0][0]), g[0][1])):
        cells = []
        for s in seeds:
            run = by_seed.get(s)
            cells.append(
                "-" if run is None else f"{run['last3']:.2f}/{run['greedy']:.2f}{'' if met(run) else '*'}"
            )
        count = f"{sum(met(r) for r in by_seed.values())}/{len(by_seed)}"
        lines.append(
            f"{(mode + ' ' + extra).strip():<34} {count:>5}  " + "  ".join(f"{c:<13}" for c in cells)
        )
    lines.append("* = below the bar")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    parser.add_argument("--set", dest="extra", nargs="*", default=[], help="more config overrides")
    parser.add_argument("--results", type=Path, default=Path("streaming_learning.jsonl"))
    args = parser.parse_args()
    done = (
        [json.loads(line) for line in args.results.read_text().splitlines()] if args.results.exists() else []
    )
    for mode in args.modes:
        for seed in args.seeds:
            if any(r["seed"] == seed and r["mode"] == mode and r["extra"] == args.extra for r in done):
                continue
            print(f"running {mode} seed {seed} {' '.join(args.extra)}", flush=True)
            run = run_one(seed, mode, args.extra)
            done.append(run)
            with args.results.open("a") as f:
                f.write(json.dumps(run) + "\n")
    print(table([r for r in done if r["mode"] in args.modes], args.seeds))


if __name__ == "__main__":
    main()
