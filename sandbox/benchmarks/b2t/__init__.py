"""Behavior2Trip (B2T) as a benchmark: world store, nine tools, instances, 32-check evaluator,
reward, metrics, expert planner, prompt and HiMAP domain (see README.md in this package).

Public names are resolved lazily, so importing one part (say the world store) loads no other.
"""

from sandbox.lazy import lazy_exports

_EXPORTS = {
    "open_world": "sandbox.benchmarks.b2t.world.store",
    "World": "sandbox.benchmarks.b2t.world.store",
    "read_plan": "sandbox.benchmarks.b2t.plan",
    "evaluate_plan": "sandbox.benchmarks.b2t.evaluator",
    "compute_reward": "sandbox.benchmarks.b2t.reward",
    "B2TBenchmark": "sandbox.benchmarks.b2t.benchmark",
    "B2TTools": "sandbox.benchmarks.b2t.tools.registry",
    "tool_schemas": "sandbox.benchmarks.b2t.tools.registry",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
