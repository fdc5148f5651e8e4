"""Speed benchmark: plans scored per second by the 32-constraint evaluator on one core (goal: >= 500 plans/s).

    python benchmarks/bench_eval.py [--seconds 3]

Scores a 3-day plan (18 local activities + 2 trains) against the hand-made mini world of
sandbox/benchmarks/b2t/evaluator/example.py, as `<answer>` text (what the RL loop passes: read +
evaluate) and as
parsed JSON, cold (first plan after opening the store) and warm. The reference in the same run is
`json.loads` of the same answer: the least any evaluator must do. A mixed set (valid plan plus
variants with broken rules, as rollouts produce) is scored too.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from sandbox.benchmarks.b2t.evaluator import evaluate_plan
from sandbox.benchmarks.b2t.evaluator.example import GROUND_TRUTH, INSTANCE, valid_plan
from sandbox.benchmarks.b2t.evaluator.example_store import build_mini_world
from sandbox.benchmarks.b2t.evaluator.lookup import index_for
from sandbox.benchmarks.b2t.plan import read_plan


def pin_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        core = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {core})
        return f"pinned to core {core}"
    return "not pinned"


def rate(fn, items: list, seconds: float) -> float:
    """Calls per CPU-second of fn over items (cycled) for about `seconds` of CPU time.

    CPU time of this process, not wall time: on a shared machine other processes' load would
    otherwise be counted against the evaluator."""
    done, started = 0, time.process_time()
    while time.process_time() - started < seconds:
        for item in items:
            fn(item)
        done += len(items)
    return done / (time.process_time() - started)


def variants() -> list[str]:
    """The valid plan and a few broken ones, as answer texts."""
    plans = [valid_plan() for _ in range(6)]
    plans[1][1]["activities"][3]["name"] = "Imaginary Noodle House"
    plans[2][0]["activities"][0]["number"] = "G9999"
    plans[3][2]["activities"].pop(0)
    plans[4][1]["weather"]["condition"] = "Snowy"
    plans[5].pop()  # missing day: undelivered
    return ["<think>ok</think><answer>" + json.dumps(p) + "</answer>" for p in plans]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    args = parser.parse_args(argv)
    pinned = pin_one_core()
    with tempfile.TemporaryDirectory() as tmp:
        world = build_mini_world(Path(tmp) / "world.sqlite")
        text = variants()[0]
        body = text[text.index("<answer>") + 8 : text.index("</answer>")]
        parsed = json.loads(body)
        started = time.perf_counter()
        assert evaluate_plan(text, INSTANCE, GROUND_TRUTH, world).all_passed
        cold_ms = 1000 * (time.perf_counter() - started)
        index_for(world)
        rows = [
            ("json.loads (reference)", rate(json.loads, [body], args.seconds)),
            ("read_plan (text)", rate(read_plan, [text], args.seconds)),
            (
                "evaluate (text)",
                rate(lambda t: evaluate_plan(t, INSTANCE, GROUND_TRUTH, world), [text], args.seconds),
            ),
            (
                "evaluate (parsed JSON)",
                rate(lambda p: evaluate_plan(p, INSTANCE, GROUND_TRUTH, world), [parsed], args.seconds),
            ),
            (
                "evaluate (mixed set, text)",
                rate(lambda t: evaluate_plan(t, INSTANCE, GROUND_TRUTH, world), variants(), args.seconds),
            ),
        ]
    reference = rows[0][1]
    print(f"bench_eval: one 3-day plan, 20 activities; {pinned}; first plan (cold store) {cold_ms:.1f} ms")
    print(f"{'measurement':<28} {'plans/cpu-s':>11} {'ms/plan':>9} {'x json.loads':>13}")
    for name, per_second in rows:
        print(f"{name:<28} {per_second:>11.0f} {1000 / per_second:>9.3f} {reference / per_second:>13.1f}")
    goal = rows[2][1]
    print(f"goal >= 500 plans/s (evaluate, text): {'met' if goal >= 500 else 'NOT met'} ({goal:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
