"""The splash kernel compiled for a TPU slice by libtpu on this CPU machine (no TPU needed): packed
rows' attention, forward and backward, sharded over a v5e-4 slice under shard_map, and what it
saves against the reference path's fp32 score blocks in the compiler's own memory analysis."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from models.layers import grouped_attention
from models.splash import splash_attention

pytestmark = pytest.mark.slow  # two TPU compiles
pytest.importorskip("libtpu", reason="libtpu is not installed (pip install -e .[test] brings it)")

ROWS, T, HEADS, KV_HEADS, D = 4, 8192, 16, 8, 128  # Qwen3-0.6B's heads; one row per chip


def _compiled(attention, mesh):
    rows = NamedSharding(mesh, P(("data", "fsdp"), None, None, None))
    sds = jax.ShapeDtypeStruct
    q = sds((ROWS, T, HEADS, D), jnp.bfloat16, sharding=rows)
    k = sds((ROWS, T, KV_HEADS, D), jnp.bfloat16, sharding=rows)
    seg = sds((ROWS, T), jnp.int32, sharding=NamedSharding(mesh, P(("data", "fsdp"))))

    def loss(q, k, v, seg):
        return attention(q, k, v, seg).astype(jnp.float32).sum()

    step = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    with jax.set_mesh(mesh):
        lowered = step.lower(q, k, k, seg)
    return lowered.as_text(), lowered.compile().memory_analysis()


def test_splash_compiles_for_a_tpu_slice_and_keeps_no_score_blocks():
    from b2tjax.plan.targets import parse_target, target_mesh

    mesh = target_mesh(parse_target("v5e-4"), 1, -1, 1)
    text, splash = _compiled(lambda q, k, v, s: splash_attention(q, k, v, s), mesh)
    assert "tpu_custom_call" in text  # the Mosaic kernel itself, not an interpreted loop
    _, reference = _compiled(lambda q, k, v, s: grouped_attention(q, k, v, 1024, None, s), mesh)
    score_block = 1 * HEADS * 1024 * T * 4  # one row per chip: fp32 [heads, 1024, T]
    assert reference.temp_size_in_bytes > score_block
    assert splash.temp_size_in_bytes < 0.5 * score_block, (splash.temp_size_in_bytes, score_block)
