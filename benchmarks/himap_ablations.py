"""The scripted HiMAP team under each ablation against the single-agent expert, on one B2T split:
constraints passed, final pass, rounds, rejections and fallback days (docs/results/himap.md).

    python benchmarks/himap_ablations.py [--data data/small] [--split test]

Host-only, no model: the scripted experts' plans judged by the benchmark's evaluator.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
from pathlib import Path

MODES = ("full", "serial", "flat", "no_bargaining", "no_early_detection", "no_sigma")


def _codes(counts: collections.Counter) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"


def main(argv: list[str] | None = None) -> int:
    from sandbox.benchmarks import get_benchmark
    from sandbox.benchmarks.b2t.expert import Expert
    from sandbox.himap.options import HimapOptions
    from sandbox.himap.scripted import solve

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=Path("data/small"))
    p.add_argument("--split", default="test")
    args = p.parse_args(argv)
    bench = get_benchmark("b2t", args.data)
    pairs = bench.load_split(args.split)

    def judged(answer: str | None, visible: dict, truth: dict) -> tuple[int, bool]:
        if answer is None:
            return 0, False
        verdict = bench.evaluate(answer, visible, truth)
        return sum(r.passed for r in verdict.results), verdict.all_passed

    total = sum(len(bench.evaluate("[]", v, t).results) for v, t in pairs)
    lines = [
        f"| run | constraints (of {total}) | final pass | mean rounds | executor rejections | "
        "Σ rejections | fallback days |",
        "|---|---|---|---|---|---|---|",
    ]
    expert = Expert(bench.world)
    single = [judged(expert.solve(v, t).answer, v, t) for v, t in pairs]
    lines.append(
        f"| single-agent expert | {sum(c for c, _ in single)} | {sum(f for _, f in single)}/{len(pairs)} "
        "| - | - | - | - |"
    )
    for mode in MODES:
        passed, final, rounds, fallback = 0, 0, [], 0
        rejections: collections.Counter = collections.Counter()
        sigma: collections.Counter = collections.Counter()
        for visible, truth in pairs:
            run = solve(bench, visible, truth, HimapOptions.ablation(mode))
            c, f = judged(run.answer, visible, truth)
            passed, final = passed + c, final + f
            rejections.update(run.figures.rejections)
            sigma.update(run.figures.sigma_rejections)
            rounds.append(run.figures.rounds)
            fallback += run.figures.fallback_days
        lines.append(
            f"| {mode} | {passed} | {final}/{len(pairs)} | {statistics.fmean(rounds):.2f} | "
            f"{_codes(rejections)} | {_codes(sigma)} | {fallback} |"
        )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
