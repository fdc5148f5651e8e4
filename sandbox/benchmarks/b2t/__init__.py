"""Behavior2Trip (B2T) as a benchmark: world store, nine tools, instances, 32-check evaluator,
reward, metrics, expert planner, prompt and HiMAP domain (see README.md in this package).

Public names are resolved lazily, so importing one part (say the world store) loads no other.
"""

import importlib
from typing import Any

_EXPORTS = {
    "open_world": "sandbox.benchmarks.b2t.world.store",
    "World": "sandbox.benchmarks.b2t.world.store",
    "read_plan": "sandbox.benchmarks.b2t.plan",
    "evaluate_plan": "sandbox.benchmarks.b2t.evaluator",
    "compute_reward": "sandbox.benchmarks.b2t.reward",
    "B2TBenchmark": "sandbox.benchmarks.b2t.benchmark",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'sandbox.benchmarks.b2t' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
