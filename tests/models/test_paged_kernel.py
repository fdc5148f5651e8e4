"""The Pallas paged-attention decode kernel (models/paged_kernel.py, in Pallas TPU interpret mode on
this CPU machine) against the gather path (models/paged_kv.py `paged_attention_reference`): the
same decode attention over scattered page tables of a noisy pool, rows of mixed lengths (mid-page,
on a page boundary, one page), GQA of 4 query heads per KV head, rows sharing a prompt's pages, in
fp32 and bf16, and under shard_map on a 4-device CPU mesh (pool shards over fsdp, KV heads over
tensor); and a greedy decode through the cached model with the kernel forced gives the gather
path's tokens and log-probs.

Tolerances (the kernel's arithmetic is not the gather path's: it scales q before the product, and
sums in other orders): the kernel loads K/V as bf16, so the fp32 cases use a bf16 pool (both paths
then read the same keys and values) with fp32 queries and arithmetic: within 1e-5 absolute and
2e-6 relative (measured: at most 4.5e-6 on outputs up to 3.6, ~10 fp32 ulps). bf16 queries: the
gather path rounds its probabilities to bf16 before the value product and the kernel does not:
within 1e-2 (measured: one bf16 ulp, 7.8e-3 at 2 to 4). The greedy decode through two layers: the
same tokens, log-probs within 3e-5 absolute (measured 1.1e-5 on log-probs near -4: 3e-6 relative,
the attention's few ulps carried through the layers)."""

from __future__ import annotations

import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from models.config import get_config
from models.kv_cache import CachedCall
from models.paged_kernel import compute_block, paged_decode_attention, resolve_paged_attention
from models.paged_kv import PAGE_AXES, init_paged_cache, paged_attention_reference
from models.qwen3 import Qwen3ForCausalLM
from models.settings import ModelRuntime
from models.sharding import logical_to_spec, make_mesh

pytestmark = pytest.mark.slow  # the kernel interpreted: seconds per call

PAGE = 8
KVH, GROUPS, D = 2, 4, 128
LAYERS, PAGES_PER_ROW, POOL = 2, 4, 20


def _decode_call(lengths: list[int], tables: np.ndarray) -> CachedCall:
    """A one-token decode whose new tokens sit at slot lengths[r] - 1 (already written)."""
    filled = jnp.asarray(lengths, jnp.int32)
    positions = (filled - 1)[:, None]
    return CachedCall(
        positions=positions, filled=filled, slots=positions, rows=None, pages=jnp.asarray(tables)
    )


def _case(dtype: jnp.dtype, seed: int):
    rng = np.random.default_rng(seed)
    # rows: mid-page (13), on a page boundary (16), one token (1), the whole row (32), and two
    # rows of a group sharing the first two pages of their prompt then holding pages of their own
    lengths = [13, 16, 1, 32, 19, 21]
    order = rng.permutation(POOL).astype(np.int32)
    tables = np.full((len(lengths), PAGES_PER_ROW), POOL, np.int32)  # unallocated: P
    used = 0
    for r, n in enumerate(lengths[:4]):
        held = -(-n // PAGE)
        tables[r, :held] = order[used : used + held]
        used += held
    tables[4, :2] = tables[5, :2] = order[used : used + 2]  # the shared prompt pages
    tables[4, 2], tables[5, 2] = order[used + 2], order[used + 3]
    shape = (LAYERS, 1, KVH, POOL, PAGE, D)
    k = jnp.asarray(3 * rng.normal(size=shape), jnp.bfloat16)
    v = jnp.asarray(rng.normal(size=shape), jnp.bfloat16)
    q = jnp.asarray(rng.normal(size=(len(lengths), 1, KVH * GROUPS, D)), dtype)
    return q, k, v, _decode_call(lengths, tables)


@pytest.mark.parametrize(("dtype", "tol"), [(jnp.float32, (2e-6, 1e-5)), (jnp.bfloat16, (1e-2, 1e-2))])
def test_kernel_decode_attention_equals_the_gather_path(dtype, tol):
    q, k, v, call = _case(dtype, seed=0)
    for layer in range(LAYERS):
        layer = jnp.int32(layer)
        want = jax.jit(paged_attention_reference, static_argnums=(5,))(q, k, v, layer, call, 2 * PAGE)
        got = jax.jit(paged_decode_attention, static_argnums=(5, 6))(q, k, v, layer, call, 2 * PAGE, True)
        assert got.dtype == want.dtype == dtype
        want, got = np.asarray(want, np.float32), np.asarray(got, np.float32)
        np.testing.assert_allclose(got, want, rtol=tol[0], atol=tol[1], err_msg=f"layer {layer}")


def test_resolution_and_compute_block():
    assert resolve_paged_attention("auto", "tpu", jnp.bfloat16) == "kernel"
    assert resolve_paged_attention("auto", "tpu", jnp.float32) == "gather"  # the kernel rounds K/V
    assert resolve_paged_attention("auto", "cpu", jnp.bfloat16) == "gather"
    assert resolve_paged_attention("kernel", "cpu", jnp.float32) == "kernel"
    with pytest.raises(ValueError, match="unknown paged attention"):
        resolve_paged_attention("flash", "tpu", jnp.bfloat16)
    assert compute_block(512, 16, 12) == 12  # the key block covers the row
    assert compute_block(128, 16, 12) == 6  # 8 pages a key block: the largest divisor of 12 within
    assert compute_block(64, 16, 7) == 1


def _greedy(model: Qwen3ForCausalLM, prompts: np.ndarray, lens: np.ndarray, steps: int, tables: np.ndarray):
    """Prefill the prompts into a bf16 paged cache, then `steps` greedy one-token decodes:
    (tokens [B, steps], their log-probs [B, steps])."""
    b = prompts.shape[0]
    cache = init_paged_cache(model.config, b, tables.shape[1] * PAGE, PAGE, POOL, jnp.bfloat16)
    cache = cache.replace(pages=jnp.asarray(tables))
    graphdef, state = nnx.split(model)

    @jax.jit
    def run(state, prompts, lens, cache):
        model = nnx.merge(graphdef, state)
        logits, cache = model.forward_cached(prompts, lens, cache, last_only=True)

        def step(carry, _):
            logits, cache = carry
            tok = jnp.argmax(logits, axis=-1).astype(jnp.int32)
            lp = jax.nn.log_softmax(logits, axis=-1)[jnp.arange(b), tok]
            logits, cache = model.forward_cached(tok[:, None], jnp.ones(b, jnp.int32), cache, last_only=True)
            return (logits, cache), (tok, lp)

        _, (toks, lps) = jax.lax.scan(step, (logits, cache), None, length=steps)
        return toks.T, lps.T

    return run(state, jnp.asarray(prompts), jnp.asarray(lens), cache)


def test_greedy_decode_with_the_kernel_matches_the_gather_path():
    cfg = dataclasses.replace(get_config("tiny"), head_dim=D, num_attention_heads=8, initializer_range=0.1)
    assert cfg.num_attention_heads // cfg.num_key_value_heads == GROUPS
    models = {
        impl: Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(3), runtime=ModelRuntime(paged_attention=impl))
        for impl in ("gather", "kernel")
    }
    rng = np.random.default_rng(1)
    lens = np.asarray([7, 16, 3], np.int32)  # decodes cross page boundaries at 8, 16 and 24
    prompts = rng.integers(0, cfg.vocab_size, (3, 16), dtype=np.int32)
    tables = rng.permutation(POOL)[:12].reshape(3, 4).astype(np.int32)
    want_ids, want_lp = _greedy(models["gather"], prompts, lens, 10, tables)
    got_ids, got_lp = _greedy(models["kernel"], prompts, lens, 10, tables)
    np.testing.assert_array_equal(np.asarray(got_ids), np.asarray(want_ids))
    np.testing.assert_allclose(np.asarray(got_lp), np.asarray(want_lp), rtol=0, atol=3e-5)


def _sharded_error() -> float:
    """Max |kernel - gather| of a decode on a (data 1, fsdp 2, tensor 2) mesh: 4 rows in 2 pool
    shards of 6 pages (tables of local page numbers, 6 = unallocated), 2 KV heads over tensor."""
    mesh = make_mesh(data=1, fsdp=2, tensor=2)
    rng = np.random.default_rng(0)
    shape = (LAYERS, 2, KVH, 6, PAGE, D)
    k, v = (jnp.asarray(rng.normal(size=shape), jnp.bfloat16) for _ in range(2))
    q = jnp.asarray(rng.normal(size=(4, 1, KVH * GROUPS, D)), jnp.float32)
    tables = np.asarray([[0, 6, 6], [3, 1, 6], [2, 5, 6], [4, 0, 1]], np.int32)
    call = _decode_call([5, 16, 9, 24], tables)
    layer = jnp.int32(1)
    want = jax.jit(paged_attention_reference, static_argnums=(5,))(q, k, v, layer, call, 2 * PAGE)
    pools = jax.sharding.NamedSharding(mesh, logical_to_spec(PAGE_AXES, shape, dict(mesh.shape)))
    assert pools.spec[1:3] == (("data", "fsdp"), "tensor")
    k, v = jax.device_put(k, pools), jax.device_put(v, pools)
    with jax.set_mesh(mesh):
        got = jax.jit(paged_decode_attention, static_argnums=(5, 6))(q, k, v, layer, call, 2 * PAGE, True)
    return float(np.max(np.abs(np.asarray(got) - np.asarray(want))))


def test_kernel_under_shard_map_equals_the_gather_path():
    from tests.subprocess_env import script_json  # the test runs from the repository root

    assert script_json(__file__, devices=4)["error"] <= 2e-6


if __name__ == "__main__":
    print(json.dumps({"error": _sharded_error()}))
