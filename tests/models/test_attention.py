"""Attention implementations and the block-wise cached path against independent references:
jax.nn.dot_product_attention ("xla") vs our reference path and transformers (values and gradients,
fp32 and bf16), and cache attention read in many small blocks vs the uncached forward."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from models.kv_cache import init_cache
from models.qwen3 import Qwen3ForCausalLM
from models.settings import ModelRuntime


def _twin(ours: Qwen3ForCausalLM, **kwargs) -> Qwen3ForCausalLM:
    """A model with `ours`' weights and other construction options."""
    other = Qwen3ForCausalLM(ours.config, rngs=nnx.Rngs(0), runtime=ModelRuntime(**kwargs))
    nnx.update(other, nnx.state(ours, nnx.Param))
    return other


def _loss(ids):
    def loss(model):
        logp = jax.nn.log_softmax(model(ids[:, :-1]))
        return -jnp.take_along_axis(logp, ids[:, 1:, None], -1).mean()

    return loss


@pytest.mark.slow
def test_fused_api_matches_reference_and_transformers(model_pair):
    cfg, hf, ours = model_pair("tiny-untied")
    fused = _twin(ours, attention="xla")
    reference = _twin(ours, attention="reference", attention_block=8)  # blocked queries, too
    assert fused.layers.attn.impl == "xla" and reference.layers.attn.impl == "reference"
    ids = jnp.asarray(np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 33), dtype=np.int32))
    with torch.no_grad():
        expected = hf(torch.from_numpy(np.asarray(ids)).long()).logits.float().numpy()
    forward = nnx.jit(lambda m, x: m(x))
    np.testing.assert_array_less(np.abs(np.asarray(forward(fused, ids)) - expected).max(), 1e-4)
    l0, g0 = nnx.jit(nnx.value_and_grad(_loss(ids)))(reference)
    l1, g1 = nnx.jit(nnx.value_and_grad(_loss(ids)))(fused)
    np.testing.assert_allclose(l0, l1, rtol=1e-6)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6), g0, g1)


def test_fused_api_in_bf16_stays_close_to_fp32(model_pair):
    """bf16 compute with either implementation: logits within bf16 error of the fp32 model, and the
    two implementations closer to each other than to it (fp32 scores and softmax in both)."""
    cfg, _, ours = model_pair("tiny")
    ids = jnp.asarray(np.random.default_rng(1).integers(0, cfg.vocab_size, (2, 64), dtype=np.int32))
    forward = nnx.jit(lambda m, x: m(x))
    exact = np.asarray(forward(ours, ids))
    got = {
        impl: np.asarray(forward(_twin(ours, attention=impl, dtype=jnp.bfloat16), ids))
        for impl in ("reference", "xla")
    }
    scale = np.abs(exact).max()
    for impl, logits in got.items():
        assert logits.dtype == np.float32
        assert np.abs(logits - exact).max() / scale < 0.05, impl
    assert np.abs(got["xla"] - got["reference"]).max() / scale < 0.03


def test_unknown_attention_is_rejected(model_pair):
    cfg, _, _ = model_pair("tiny")
    with pytest.raises(ValueError, match="attention implementation"):
        Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(0), runtime=ModelRuntime(attention="flash"))


def test_cache_read_in_small_blocks_equals_full_forward(model_pair):
    """cache_block 8 over 44 slots: several blocks, a last block clamped to the cache end, rows of
    different lengths; appended chunks and single-token decodes give the uncached logits."""
    cfg, _, ours = model_pair("tiny")
    blocked = _twin(ours, cache_block=8)
    rng = np.random.default_rng(2)
    seqs = rng.integers(0, cfg.vocab_size, (2, 40), dtype=np.int32)
    expected = np.asarray(nnx.jit(lambda m, x: m(x))(ours, jnp.asarray(seqs)))
    step = nnx.jit(lambda m, t, n, c: m.forward_cached(t, n, c))
    cache = init_cache(cfg, 2, 44)
    logits, cache = step(blocked, jnp.asarray(seqs[:, :30]), jnp.asarray([30, 13], jnp.int32), cache)
    np.testing.assert_allclose(np.asarray(logits)[0], expected[0, :30], atol=1e-4)
    np.testing.assert_allclose(np.asarray(logits)[1, :13], expected[1, :13], atol=1e-4)
    lengths = [30, 13]
    for _ in range(10):
        tokens = np.stack([seqs[b, lengths[b] : lengths[b] + 1] for b in range(2)])
        logits, cache = step(blocked, jnp.asarray(tokens), jnp.ones(2, jnp.int32), cache)
        for b in range(2):
            np.testing.assert_allclose(np.asarray(logits)[b, 0], expected[b, lengths[b]], atol=1e-4)
            lengths[b] += 1
    assert cache.lengths.tolist() == lengths


def test_append_to_selected_rows_leaves_the_others(model_pair):
    """forward_cached(rows=...) extends only the named cache rows, in the order given."""
    cfg, _, ours = model_pair("tiny")
    seqs = np.random.default_rng(3).integers(0, cfg.vocab_size, (3, 12), dtype=np.int32)
    expected = np.asarray(nnx.jit(lambda m, x: m(x))(ours, jnp.asarray(seqs)))
    full = nnx.jit(lambda m, t, n, c: m.forward_cached(t, n, c))
    some = nnx.jit(lambda m, t, n, c, r: m.forward_cached(t, n, c, rows=r))
    _, cache = full(ours, jnp.asarray(seqs[:, :5]), jnp.full(3, 5, jnp.int32), init_cache(cfg, 3, 16))
    before = cache
    # rows 2 then 0 (reversed order); row 1 sits out
    logits, cache = some(
        ours,
        jnp.asarray(seqs[[2, 0], 5:12]),
        jnp.asarray([7, 4], jnp.int32),
        cache,
        jnp.asarray([2, 0], jnp.int32),
    )
    np.testing.assert_allclose(np.asarray(logits)[0], expected[2, 5:12], atol=1e-4)
    np.testing.assert_allclose(np.asarray(logits)[1, :4], expected[0, 5:9], atol=1e-4)
    assert cache.lengths.tolist() == [9, 5, 12]
    np.testing.assert_array_equal(cache.k[:, 1], before.k[:, 1])
    # past the new slots: untouched
    np.testing.assert_array_equal(cache.k[:, 0, :, 9:], before.k[:, 0, :, 9:])


@pytest.mark.slow
def test_sliding_window_matches_transformers_in_every_path(model_pair):
    """A 6-token window (HF Qwen3 use_sliding_window, max_window_layers=0) over 33 tokens: the
    reference and fused paths give transformers' logits and the same gradients, the cached path
    (prefill, then decodes reading 4-slot blocks, the blocks below the window skipped) the same
    logits, and the window changes the logits (full attention differs)."""
    cfg, hf, ours = model_pair("tiny-untied", sliding_window=6)
    assert hf.config.layer_types == ["sliding_attention"] * cfg.num_hidden_layers
    ids = jnp.asarray(np.random.default_rng(4).integers(0, cfg.vocab_size, (2, 33), dtype=np.int32))
    with torch.no_grad():
        expected = hf(torch.from_numpy(np.asarray(ids)).long()).logits.float().numpy()
    forward = nnx.jit(lambda m, x: m(x))
    reference = _twin(ours, attention="reference", attention_block=11)
    fused = _twin(ours, attention="xla")
    for model in (reference, fused):
        np.testing.assert_array_less(np.abs(np.asarray(forward(model, ids)) - expected).max(), 1e-4)
    l0, g0 = nnx.jit(nnx.value_and_grad(_loss(ids)))(reference)
    l1, g1 = nnx.jit(nnx.value_and_grad(_loss(ids)))(fused)
    np.testing.assert_allclose(l0, l1, rtol=1e-6)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6), g0, g1)

    full_cfg, _, full = model_pair("tiny-untied")
    assert full_cfg.sliding_window is None
    assert np.abs(np.asarray(forward(full, ids)) - expected)[:, 6:].max() > 1e-2  # outside the window
    np.testing.assert_allclose(np.asarray(forward(full, ids))[:, :6], expected[:, :6], atol=1e-4)

    blocked = _twin(ours, cache_block=4)
    step = nnx.jit(lambda m, t, n, c: m.forward_cached(t, n, c))
    logits, cache = step(blocked, ids[:, :20], jnp.asarray([20, 9], jnp.int32), init_cache(cfg, 2, 36))
    np.testing.assert_allclose(np.asarray(logits)[0], expected[0, :20], atol=1e-4)
    np.testing.assert_allclose(np.asarray(logits)[1, :9], expected[1, :9], atol=1e-4)
    lengths = [20, 9]
    for _ in range(12):
        tokens = np.stack([np.asarray(ids)[b, lengths[b] : lengths[b] + 1] for b in range(2)])
        logits, cache = step(blocked, jnp.asarray(tokens), jnp.ones(2, jnp.int32), cache)
        for b in range(2):
            np.testing.assert_allclose(np.asarray(logits)[b, 0], expected[b, lengths[b]], atol=1e-4)
            lengths[b] += 1
