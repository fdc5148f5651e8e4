"""KV-cache forward (prefill / chunk append / decode, mixed per-row lengths) against the full forward,
and greedy generation against transformers' generate."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from models.greedy import greedy_generate
from models.kv_cache import KVCache, init_cache

cached_step = nnx.jit(lambda m, tokens, num_new, cache: m.forward_cached(tokens, num_new, cache))
full_forward = nnx.jit(lambda m, ids: m(ids))


def _garbage_cache(cfg, batch: int, max_len: int, seed: int) -> KVCache:
    """An 'empty' cache whose unwritten slots hold large noise: attending to them would show."""
    empty = init_cache(cfg, batch, max_len)
    k1, k2 = jax.random.split(jax.random.key(seed))
    return empty.replace(
        k=100 * jax.random.normal(k1, empty.k.shape), v=100 * jax.random.normal(k2, empty.v.shape)
    )


@pytest.mark.slow
def test_prefill_append_decode_equal_full_forward(model_pair):
    cfg, _, model = model_pair("tiny-untied")
    rng = np.random.default_rng(0)
    batch, total, max_len, chunk = 3, 34, 40, 12
    seqs = rng.integers(0, cfg.vocab_size, (batch, total), dtype=np.int32)
    expected = np.asarray(full_forward(model, jnp.asarray(seqs)))
    # Per call: tokens appended to each row. Prefill with an empty row, chunk appends onto rows
    # with context, one-token decodes, and mixes with rows that sit out (0).
    schedule = [[10, 0, 7], [5, 12, 3], [1, 1, 1], [1, 1, 1], [0, 1, 12], [12, 0, 1], [1, 1, 0], [1, 1, 1]]
    cache = _garbage_cache(cfg, batch, max_len, seed=1)
    lengths = np.zeros(batch, np.int64)
    for num_new in schedule:
        width = 1 if max(num_new) == 1 else chunk
        # Padding past num_new is random tokens: it must not leak into the cache or other rows.
        tokens = rng.integers(0, cfg.vocab_size, (batch, width), dtype=np.int32)
        for b, n in enumerate(num_new):
            tokens[b, :n] = seqs[b, lengths[b] : lengths[b] + n]
        before = cache
        logits, cache = cached_step(model, jnp.asarray(tokens), jnp.asarray(num_new, jnp.int32), cache)
        logits = np.asarray(logits)
        for b, n in enumerate(num_new):
            np.testing.assert_allclose(
                logits[b, :n],
                expected[b, lengths[b] : lengths[b] + n],
                atol=1e-4,
                err_msg=f"row {b} step {num_new}",
            )
            if n == 0:  # untouched row
                np.testing.assert_array_equal(cache.k[:, b], before.k[:, b])
        lengths += num_new
        np.testing.assert_array_equal(cache.lengths, lengths)
    assert lengths.tolist() == [31, 17, 26]


def test_append_past_cache_end_is_dropped(model_pair):
    cfg, _, model = model_pair("tiny")
    seqs = np.random.default_rng(1).integers(0, cfg.vocab_size, (2, 10), dtype=np.int32)
    expected = np.asarray(full_forward(model, jnp.asarray(seqs)))
    cache = init_cache(cfg, 2, 8)
    logits, cache = cached_step(model, jnp.asarray(seqs), jnp.asarray([10, 5], jnp.int32), cache)
    assert cache.lengths.tolist() == [8, 5]  # row 0 saturates instead of wrapping or crashing
    np.testing.assert_allclose(np.asarray(logits)[0, :8], expected[0, :8], atol=1e-4)
    np.testing.assert_allclose(np.asarray(logits)[1, :5], expected[1, :5], atol=1e-4)


def test_last_only_returns_each_rows_next_token_logits(model_pair):
    cfg, _, model = model_pair("tiny")
    tokens = jnp.asarray(np.random.default_rng(3).integers(0, cfg.vocab_size, (3, 8), dtype=np.int32))
    num_new = jnp.asarray([8, 3, 1], jnp.int32)
    step = nnx.jit(lambda m, t, n, c: m.forward_cached(t, n, c, last_only=True))
    last, cache = step(model, tokens, num_new, init_cache(cfg, 3, 16))
    full, _ = cached_step(model, tokens, num_new, init_cache(cfg, 3, 16))
    assert last.shape == (3, cfg.vocab_size) and cache.lengths.tolist() == [8, 3, 1]
    np.testing.assert_allclose(last, np.asarray(full)[[0, 1, 2], [7, 2, 0]], atol=1e-5)


def test_greedy_generation_matches_transformers_generate(model_pair):
    cfg, hf, model = model_pair("tiny")
    rng = np.random.default_rng(2)
    prompt_lens = [9, 16]
    prompts = rng.integers(0, cfg.vocab_size, (2, 16), dtype=np.int32)
    ours = np.asarray(greedy_generate(model, jnp.asarray(prompts), jnp.asarray(prompt_lens), 32))
    assert ours.shape == (2, 32)
    for b, n in enumerate(prompt_lens):
        with torch.no_grad():
            out = hf.generate(
                torch.from_numpy(prompts[b : b + 1, :n]).long(),
                max_new_tokens=32,
                min_new_tokens=32,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=0,
            )
        np.testing.assert_array_equal(ours[b], out[0, n:].numpy())
    assert len(set(ours[0].tolist())) > 3  # not a degenerate constant continuation
