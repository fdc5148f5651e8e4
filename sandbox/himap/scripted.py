"""The scripted HiMAP expert on one benchmark instance: the benchmark's domain and policies, driven
through the real protocol (sandbox/himap/expert.py)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from sandbox.himap.expert import HimapExpertResult, drive
from sandbox.himap.options import HimapOptions
from sandbox.himap.protocol import HimapSession


def solve(
    benchmark: Any,
    visible: dict[str, Any],
    truth: dict[str, Any],
    options: HimapOptions | None = None,
    knobs: Any = None,
) -> HimapExpertResult:
    """The scripted HiMAP expert on one instance of `benchmark` (with its hidden `truth`)."""
    session = HimapSession(benchmark.himap_domain(visible), options)
    return drive(session, benchmark.himap_expert(visible, truth, knobs))


def expert_traces(
    benchmark: Any,
    pairs: Iterable[tuple[dict[str, Any], dict[str, Any]]],
    options: HimapOptions | None = None,
) -> Iterator[dict[str, Any]]:
    """Role-split SFT examples of the scripted expert ({"id", "messages", "tools", "role", "day",
    "round", "stream"}), from the instances whose merged plan passes every check of the benchmark
    (a warm start should not imitate failures)."""
    for visible, truth in pairs:
        result = solve(benchmark, visible, truth, options)
        if result.answer is None or not benchmark.evaluate(result.answer, visible, truth).all_passed:
            continue
        for trace in result.traces:
            yield {"id": visible["id"], **trace}
