"""Which HiMAP domain and scripted expert a benchmark has (by the benchmark's registry name)."""

from __future__ import annotations

from typing import Any

from sandbox.himap.domain import HimapDomain


def domain_for(benchmark: Any, visible: dict[str, Any]) -> HimapDomain:
    """The HiMAP domain of one visible instance of `benchmark` (a sandbox Benchmark)."""
    name = getattr(benchmark, "name", None)
    if name == "b2t":
        from sandbox.himap.b2t_domain import B2TDomain

        return B2TDomain(visible, benchmark.world_for(visible))
    if name == "travelplanner":
        from sandbox.himap.travelplanner_domain import TravelPlannerDomain

        return TravelPlannerDomain(visible, benchmark)
    raise ValueError(f"HiMAP has no domain for benchmark {name!r} (available: b2t, travelplanner)")


def expert_policies(benchmark: Any, visible: dict[str, Any], truth: dict[str, Any], knobs: Any = None) -> Any:
    """The scripted HiMAP expert's role policies for one instance (see sandbox.himap.expert.drive)."""
    name = getattr(benchmark, "name", None)
    if name == "b2t":
        from sandbox.himap.b2t_expert import B2TExpertPolicies

        return B2TExpertPolicies(visible, truth, knobs)
    if name == "travelplanner":
        from sandbox.himap.travelplanner_expert import TravelPlannerExpertPolicies
        from sandbox.himap.travelplanner_pricing import TravelPlannerPricing

        pricing = TravelPlannerPricing(truth["query"], benchmark.db, benchmark.eval_mode)
        return TravelPlannerExpertPolicies(visible, truth, pricing)
    raise ValueError(f"HiMAP has no scripted expert for benchmark {name!r} (available: b2t, travelplanner)")
