"""The paged KV cache's rollout decode compiles for a TPU slice with the Pallas paged-attention kernel
(models/paged_kernel.py), by libtpu on this CPU machine: the Qwen3-0.6B TPU recipe (v5p-8, 4 chips,
rows and pages over fsdp) with 2 of its layers, lowered by the library
functions launch/plan.py runs (b2tjax/plan/memory_plan.py `rollout_lowered`); with
rollout.paged_attention=gather the same program lowers without the kernel."""

from __future__ import annotations

import jax
import pytest

from tests.b2tjax.test_memory_plan import ROOT

pytestmark = pytest.mark.slow  # compiles for TPU with libtpu

pytest.importorskip("libtpu", reason="libtpu is not installed (pip install -e .[test] brings it)")

RECIPE = ROOT / "configs" / "qwen3_0.6b_tpu.yaml"


def _lowered_decode(*overrides: str):
    """(the recipe's lowered paged decode for its slice, its pool, the target) at 2 layers."""
    from b2tjax.config import load_config
    from b2tjax.plan.memory_plan import PlanContext, rollout_lowered
    from b2tjax.plan.targets import parse_target, target_mesh

    cfg = load_config(RECIPE, ["model.overrides={num_hidden_layers: 2}", *overrides])
    target = parse_target(cfg.hardware.target, cfg.hardware.devices, cfg.hardware.hbm_gib)
    mesh = target_mesh(target, cfg.mesh.data, cfg.mesh.fsdp, cfg.mesh.tensor)
    assert mesh.devices.flat[0].platform == "tpu"
    lowered, cache = rollout_lowered(PlanContext.build(cfg, mesh), ("rollout_decode",))
    return lowered["rollout_decode"], cache, target


def test_paged_attention_gather_lowers_without_the_kernel():
    """rollout.paged_attention=gather: the same TPU decode reads its pages by the gather path."""
    gather, _, _ = _lowered_decode("rollout.paged_attention=gather")
    assert "tpu_custom_call" not in gather.as_text()


def test_paged_decode_compiles_for_tpu_with_the_pallas_kernel():
    lowered, cache, target = _lowered_decode()  # rollout.paged_attention: auto
    assert cache.k.dtype == jax.numpy.bfloat16  # the recipe's cache: "auto" takes the kernel
    assert "tpu_custom_call" in lowered.as_text()
    compiled = lowered.compile()
    text = compiled.as_text()
    # the Mosaic kernel, once per KV head in the (scanned) layer body
    assert text.count('custom_call_target="tpu_custom_call"') == 8
    assert "jit(paged_attention)/pallas_call" in text
    # It reads the donated pool in place (a free reshape, no per-layer slice, which would be half
    # the chip's pool here): the temporaries stay below 5% of the per-chip pool (measured: 49 MiB
    # of a 4 GiB pool).
    pool = 2 * cache.k.size * cache.k.dtype.itemsize / target.chips
    stats = compiled.memory_analysis()
    assert stats.temp_size_in_bytes < 0.05 * pool, (stats.temp_size_in_bytes, pool)
