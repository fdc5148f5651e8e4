"""The benchmark registry: name -> Benchmark class, resolved lazily by import path.

    from sandbox.benchmarks import get_benchmark, BENCHMARKS
    bench = get_benchmark("b2t", "data/small")    # or "travelplanner"; options as keywords

Entries are "module:Class" strings so that importing the registry loads no benchmark, and a
benchmark whose module is absent fails only when selected, with a one-line BenchmarkError. A
built-in entry points into the benchmark's folder (sandbox/benchmarks/<name>/); a benchmark that
ships as its own package registers under the Python entry-point group `b2tjax.benchmarks`
(name = "module:Class" in its pyproject.toml), read here without importing it. A built-in name
cannot be taken by a package. How to write one: docs/guides/extend.md.
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from sandbox.benchmarks.base import (
    Benchmark,
    BenchmarkError,
    Instance,
    Prompt,
    TokenCounter,
    Verdict,
    World,
    interleave_difficulties,
)

DEFAULT_BENCHMARK = "b2t"
ENTRY_POINT_GROUP = "b2tjax.benchmarks"
BUILT_IN: dict[str, str] = {
    "b2t": "sandbox.benchmarks.b2t.benchmark:B2TBenchmark",
    "travelplanner": "sandbox.benchmarks.travelplanner.benchmark:TravelPlannerBenchmark",
}
BENCHMARKS: dict[str, str] = {
    **{ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)},
    **BUILT_IN,
}

__all__ = [
    "BENCHMARKS",
    "BUILT_IN",
    "DEFAULT_BENCHMARK",
    "ENTRY_POINT_GROUP",
    "Benchmark",
    "BenchmarkError",
    "Instance",
    "Prompt",
    "TokenCounter",
    "Verdict",
    "World",
    "as_benchmark",
    "benchmark_class",
    "get_benchmark",
    "interleave_difficulties",
]


def benchmark_class(name: str) -> type[Benchmark]:
    """The class registered as `name`; BenchmarkError for an unknown or not installed benchmark."""
    if name not in BENCHMARKS:
        raise BenchmarkError(f"unknown benchmark {name!r}; choose from {', '.join(sorted(BENCHMARKS))}")
    module_name, class_name = BENCHMARKS[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name is None or not module_name.startswith(err.name):
            raise  # a dependency of the benchmark is missing: a real bug, keep the traceback
        raise BenchmarkError(
            f"benchmark {name!r} is not available in this checkout (module {module_name} not found)"
        ) from None
    return getattr(module, class_name)


def get_benchmark(
    name: str = DEFAULT_BENCHMARK, data_dir: str | Path | None = None, **options: Any
) -> Benchmark:
    """An instance of benchmark `name` over `data_dir` with its keyword `options`."""
    return benchmark_class(name)(data_dir, **options)


def as_benchmark(obj: Any) -> Benchmark:
    """`obj` if it is a Benchmark; otherwise a B2T world (or store path / DATA dir) wrapped as the
    B2T benchmark, so that callers written before benchmarks were pluggable keep working."""
    if isinstance(obj, Benchmark):
        return obj
    return benchmark_class("b2t").over_world(obj)  # through the registry: no static B2T import
