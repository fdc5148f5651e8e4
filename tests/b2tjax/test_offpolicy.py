"""The decoupled objective of streaming GRPO (b2tjax/grpo/offpolicy.py + grpo.grpo_loss): a loss
computed by hand on a small batch, the synchronous loss unchanged without weights, and the
staleness histogram; the packed update's weights are the padded one's, metrics bit for bit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from b2tjax.config.schema import GRPOConfig
from b2tjax.grpo import packed
from b2tjax.grpo.offpolicy import importance_weights, ratio_anchor, staleness_metrics
from b2tjax.step import loss as grpo
from rollout.record import EpisodeRecord


def _loss(lp, old, adv, mask, is_weights=None):
    norm = grpo.batch_normaliser(mask, 8)
    value, _ = grpo.grpo_loss(
        lp,
        old,
        adv,
        mask,
        norm,
        mode="seq_mean_token_mean",
        clip_low=0.2,
        clip_high=0.28,
        is_weights=is_weights,
    )
    return value


def test_decoupled_loss_by_hand():
    """Token 1: r = e^0.2 (inside the clip), w = e^0.3; token 2: r = e^0.5 clipped to 1.28,
    w = e^1 truncated to the cap 2. Loss = -(w1 r1 + 2 * 1.28) / 2 with A = 1, one sequence."""
    mask = jnp.asarray([[0.0, 1.0, 1.0]])
    lp = jnp.asarray([[0.0, -1.0, -0.5]])
    proximal = np.asarray([[0.0, -1.2, -1.0]])
    behaviour = np.asarray([[0.0, -1.5, -2.0]])
    weights, metrics = importance_weights(proximal, behaviour, np.asarray(mask), cap=2.0)
    np.testing.assert_allclose(weights, [[1.0, np.exp(0.3), 2.0]], rtol=1e-6)
    assert metrics["is_weight_mean"] == pytest.approx((np.exp(0.3) + 2.0) / 2, rel=1e-6)
    assert metrics["is_weight_max"] == pytest.approx(np.e, rel=1e-6)
    assert metrics["is_capped_share"] == 0.5
    got = _loss(lp, jnp.asarray(proximal), jnp.asarray([1.0]), mask, jnp.asarray(weights))
    expected = -(np.exp(0.3) * np.exp(0.2) + 2.0 * 1.28) / 2
    assert float(got) == pytest.approx(expected, rel=1e-6)


def test_without_weights_the_loss_and_gradient_are_the_synchronous_ones():
    """Unit weights (every token on-policy) give exactly the loss and gradient of no weights."""
    key = jax.random.split(jax.random.key(0), 3)
    lp = -jax.random.uniform(key[0], (3, 5))
    old = lp + 0.1 * jax.random.normal(key[1], (3, 5))
    mask = (jax.random.uniform(key[2], (3, 5)) > 0.3).astype(jnp.float32)
    adv = jnp.asarray([1.0, -0.5, 0.25])
    plain = jax.value_and_grad(lambda x: _loss(x, old, adv, mask))(lp)
    ones = jax.value_and_grad(lambda x: _loss(x, old, adv, mask, jnp.ones_like(lp)))(lp)
    assert float(plain[0]) == float(ones[0])
    np.testing.assert_array_equal(np.asarray(plain[1]), np.asarray(ones[1]))


def _record(versions):
    return EpisodeRecord("r", ids=list(range(len(versions))), versions=versions)


def test_staleness_histogram_and_bound():
    records = [_record([-1, 3, 3]), _record([-1, 2, 3]), _record([-1, 1, 2, 3]), _record([-1, -1])]
    metrics = staleness_metrics(records, policy_version=3, max_staleness=2)
    assert metrics == {
        "staleness/0": 0.5,  # the first record and the one that sampled nothing
        "staleness/1": 0.25,
        "staleness/2": 0.25,
        "staleness_mean": 0.75,
        "staleness_max": 2.0,
    }
    with pytest.raises(ValueError, match="3 updates old"):
        staleness_metrics([_record([-1, 0])], policy_version=3, max_staleness=2)


def test_packed_records_weigh_the_padded_rows_tokens():
    """Per-record arrays (packed) against the same records padded to rows: the same old log-probs
    and weights token for token, and the same metrics exactly (the same tokens, in the same order)."""
    rng = np.random.default_rng(0)
    lengths = [7, 3, 12, 5]
    sampled = [(rng.uniform(size=n) > 0.4).astype(np.float32) for n in lengths]
    trainer = [rng.normal(-2.0, 1.0, n).astype(np.float32) for n in lengths]
    sampler = [(t + rng.normal(-0.3, 0.8, len(t))).astype(np.float32) * s for t, s in zip(trainer, sampled)]
    pad = lambda rows: np.stack([np.pad(r, (0, 16 - len(r))) for r in [*rows, []]]).astype(np.float32)  # noqa: E731
    grpo_cfg = GRPOConfig(is_cap=2.0)
    old, weights, metrics = ratio_anchor(grpo_cfg, True, pad(trainer), pad(sampler), pad(sampled))
    fields = {"sampler_lp": sampler, "sampled": sampled}
    packed_metrics = packed._anchor(fields, trainer, grpo_cfg, streamed=True)
    assert packed_metrics == metrics and 0 < metrics["is_capped_share"] < 1
    for i, n in enumerate(lengths):
        np.testing.assert_array_equal(fields["old_lp"][i], old[i, :n])
        np.testing.assert_array_equal(fields["is_w"][i], weights[i, :n])
