"""Sampler pieces against NumPy: top-k/top-p filtering, sampling frequencies, the log-prob convention."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from models.logits import token_logprobs
from rollout.sampling import _filter_top_p_top_k, sample_tokens


def _numpy_keep(logits: np.ndarray, top_p: float, top_k: int) -> np.ndarray:
    """Reference nucleus/top-k set: the smallest prefix of tokens by probability whose mass reaches
    top_p, intersected with the k most likely."""
    order = np.argsort(-logits)
    probs = np.exp(logits[order] - logits.max())
    probs /= probs.sum()
    keep = np.zeros_like(logits, bool)
    mass = 0.0
    for rank, token in enumerate(order):
        if (top_k and rank >= top_k) or (rank > 0 and mass >= top_p):
            break
        keep[token] = True
        mass += probs[rank]
    return keep


@pytest.mark.parametrize("top_p,top_k", [(1.0, 0), (0.5, 0), (0.9, 0), (1.0, 3), (0.8, 5), (0.05, 0)])
def test_filter_matches_numpy(top_p, top_k):
    logits = np.random.default_rng(0).normal(size=(6, 40)).astype(np.float32) * 2
    out = np.asarray(_filter_top_p_top_k(jnp.asarray(logits), jnp.full(6, top_p), jnp.full(6, top_k)))
    for row in range(6):
        assert np.array_equal(np.isfinite(out[row]), _numpy_keep(logits[row], top_p, top_k))


def test_sampling_frequencies_follow_tempered_truncated_distribution():
    logits = np.array([2.0, 1.5, 1.0, 0.2, -1.0, 0.9], np.float32)
    n, temperature, top_k = 40000, 0.7, 3
    keys = jax.random.split(jax.random.key(0), n)
    ids, lps = sample_tokens(
        jnp.tile(jnp.asarray(logits), (n, 1)),
        keys,
        jnp.full(n, temperature),
        jnp.ones(n),
        jnp.full(n, top_k, jnp.int32),
    )
    freq = np.bincount(np.asarray(ids), minlength=6) / n
    expected = np.exp(logits / temperature)
    expected[np.argsort(-logits)[top_k:]] = 0.0
    expected /= expected.sum()
    assert np.max(np.abs(freq - expected)) < 0.01
    # recorded log-probs are the *unfiltered* tempered ones (the convention the trainer shares)
    full = jax.nn.log_softmax(jnp.asarray(logits) / temperature)
    np.testing.assert_allclose(np.asarray(lps), np.asarray(full)[np.asarray(ids)], atol=1e-6)


def test_greedy_rows_take_argmax_and_report_untempered_logprobs():
    logits = jnp.asarray(np.random.default_rng(1).normal(size=(4, 30)), jnp.float32)
    keys = jax.random.split(jax.random.key(0), 4)
    ids, lps = sample_tokens(logits, keys, jnp.zeros(4), jnp.ones(4), jnp.zeros(4, jnp.int32))
    assert np.array_equal(np.asarray(ids), np.argmax(np.asarray(logits), -1))
    np.testing.assert_allclose(np.asarray(lps), np.asarray(token_logprobs(logits, ids, 1.0)), atol=1e-6)


def test_token_logprobs_temperature():
    logits = jnp.asarray([[1.0, 2.0, 3.0]])
    got = token_logprobs(logits, jnp.asarray([2]), 2.0)
    expected = 1.5 - np.log(np.exp(0.5) + np.exp(1.0) + np.exp(1.5))
    assert abs(float(got[0]) - expected) < 1e-6
