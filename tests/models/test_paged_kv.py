"""The paged KV cache (models/paged_kv.py) against the contiguous one: the same cached forwards
(prefill chunks, one-token decodes, rows that sit out, a subset of rows, GQA) through scattered,
non-contiguous page tables over a pool of noise give the contiguous cache's logits, and rows whose
tables share a prefix's pages read what a copied prefix would give."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from models.kv_cache import init_cache
from models.paged_kv import PagedKVCache, copy_pages, init_paged_cache

pytestmark = pytest.mark.slow  # paged and contiguous cached forwards compiled side by side

PAGE = 4
step = nnx.jit(lambda m, tokens, num_new, cache, rows: m.forward_cached(tokens, num_new, cache, rows=rows))


def _noisy(cache, seed: int):
    """Unwritten slots / pages hold large noise: reading them would show."""
    k1, k2 = jax.random.split(jax.random.key(seed))
    return cache.replace(
        k=100 * jax.random.normal(k1, cache.k.shape), v=100 * jax.random.normal(k2, cache.v.shape)
    )


def _scattered_tables(batch: int, per_row: int, pool: int, seed: int) -> np.ndarray:
    """Every row's pages, distinct and in no order: a shuffled pool handed out row by row."""
    order = np.random.default_rng(seed).permutation(pool)[: batch * per_row]
    return order.reshape(batch, per_row).astype(np.int32)


def _both(cfg, batch, max_len, pool, seed=1):
    contiguous = _noisy(init_cache(cfg, batch, max_len), seed)
    paged = _noisy(init_paged_cache(cfg, batch, max_len, PAGE, pool), seed + 1)
    tables = _scattered_tables(batch, max_len // PAGE, pool, seed)
    return contiguous, paged.replace(pages=jnp.asarray(tables))


def test_paged_forwards_equal_contiguous_ones(model_pair):
    cfg, _, model = model_pair("tiny-untied")
    assert cfg.num_key_value_heads < cfg.num_attention_heads  # GQA
    rng = np.random.default_rng(0)
    batch, max_len = 3, 40
    contiguous, paged = _both(cfg, batch, max_len, pool=40)
    # (rows of the call, tokens per row): prefill chunks, decodes, rows sitting out, row subsets
    schedule = [([0, 1, 2], [10, 0, 7]), ([2, 0], [5, 3]), ([0, 1, 2], [1, 1, 1]), ([1], [12])]
    schedule += [([0, 1, 2], [1, 1, 1]), ([0, 2], [9, 1]), ([0, 1, 2], [1, 0, 1])]
    for rows, num_new in schedule:
        width = max(num_new)
        tokens = jnp.asarray(rng.integers(0, cfg.vocab_size, (len(rows), width), dtype=np.int32))
        args = (tokens, jnp.asarray(num_new, jnp.int32))
        rows_arg = jnp.asarray(rows, jnp.int32)
        want, contiguous = step(model, *args, contiguous, rows_arg)
        got, paged = step(model, *args, paged, rows_arg)
        for i, n in enumerate(num_new):
            np.testing.assert_allclose(np.asarray(got)[i, :n], np.asarray(want)[i, :n], rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(paged.lengths, contiguous.lengths)
    assert np.asarray(paged.lengths).tolist() == [25, 14, 16]


def test_rows_sharing_prefix_pages_read_the_shared_prefix(model_pair):
    """Row 0 prefills 10 tokens; row 1 points at row 0's two full pages and a copy of its partly
    filled third (copy on write), then both append different tokens: each equals the contiguous
    cache where row 1 prefilled the same 10 tokens itself."""
    cfg, _, model = model_pair("tiny-untied")
    rng = np.random.default_rng(3)
    contiguous, paged = _both(cfg, 2, 24, pool=16, seed=5)
    prompt = rng.integers(0, cfg.vocab_size, (1, 10), dtype=np.int32)
    ten = jnp.asarray([10], jnp.int32)
    _, contiguous = step(model, jnp.asarray(np.repeat(prompt, 2, 0)), jnp.asarray([10, 10]), contiguous, None)
    _, paged = step(model, jnp.asarray(prompt), ten, paged, jnp.asarray([0], jnp.int32))
    tables = np.asarray(paged.pages).copy()
    own_page = int(tables[1, 2])
    tables[1, :2] = tables[0, :2]  # shared full pages
    paged = paged.replace(pages=jnp.asarray(tables))
    pair = jnp.asarray([[0, tables[0, 2]]], jnp.int32), jnp.asarray([[0, own_page]], jnp.int32)
    paged = copy_pages(paged, *pair, jnp.int32(1), jnp.asarray([1], jnp.int32), ten)
    assert np.asarray(paged.lengths).tolist() == [10, 10]
    for width in (3, 1, 1):
        tokens = jnp.asarray(rng.integers(0, cfg.vocab_size, (2, width), dtype=np.int32))
        num = jnp.asarray([width, width], jnp.int32)
        want, contiguous = step(model, tokens, num, contiguous, None)
        got, paged = step(model, tokens, num, paged, None)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_copy_pages_moves_whole_pages_and_sets_lengths():
    rng = np.random.default_rng(0)
    k = rng.normal(size=(2, 2, 1, 5, PAGE, 3)).astype(np.float32)  # [L, NS, KVH, P, ps, D]
    cache = PagedKVCache(
        k=jnp.asarray(k),
        v=jnp.asarray(-k),
        lengths=jnp.zeros(3, jnp.int32),
        pages=jnp.zeros((3, 2), jnp.int32),
    )
    src = jnp.asarray([[0, 1], [1, 4], [0, 0]], jnp.int32)
    dst = jnp.asarray([[1, 2], [1, 0], [0, 3]], jnp.int32)
    out = copy_pages(
        cache, src, dst, jnp.int32(2), jnp.asarray([2, 3], jnp.int32), jnp.asarray([7, 9], jnp.int32)
    )
    want = k.copy()
    want[:, 1, :, 2], want[:, 1, :, 0] = k[:, 0, :, 1], k[:, 1, :, 4]  # the third pair is past `count`
    np.testing.assert_array_equal(np.asarray(out.k), want)
    np.testing.assert_array_equal(np.asarray(out.v), -want)
    assert np.asarray(out.lengths).tolist() == [0, 0, 7]  # row 3 = B: padding, dropped
