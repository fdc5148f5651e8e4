"""GRPO loss and gradient against an independent NumPy computation.

The policy is a linear softmax model (logits = x @ W) so the gradient with respect to W can be
written out by hand in NumPy: dL/dW = sum_t x_t (onehot_t - softmax_t) * dL/dlogp_t.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from b2tjax.step import loss as grpo
from b2tjax.step.logprobs import hidden_logprobs

B, T, H, V = 4, 7, 5, 11
CLIP_LOW, CLIP_HIGH, BETA, FIXED_LEN = 0.2, 0.28, 0.05, 10


def _batch():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(B, T, H)).astype(np.float32)
    w = rng.normal(size=(H, V)).astype(np.float32) * 0.5
    targets = rng.integers(0, V, size=(B, T)).astype(np.int32)
    logits = x @ w
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    lp_now = np.take_along_axis(logp, targets[..., None], -1)[..., 0]
    # Old log-probs far enough from the current ones that some ratios leave [1-eps_low, 1+eps_high].
    old = lp_now + rng.normal(scale=0.4, size=(B, T)).astype(np.float32)
    ref = lp_now + rng.normal(scale=0.3, size=(B, T)).astype(np.float32)
    adv = np.array([1.3, -0.7, 0.4, -1.1], np.float32)
    mask = np.ones((B, T), np.float32)
    mask[0, :2] = 0  # prompt tokens
    mask[1, 4:] = 0  # environment response
    mask[2, 1:3] = 0
    mask[3, 0] = 0
    return x, w, targets, old, ref, adv, mask


def _numpy_loss_and_grad(x, w, targets, old, ref, adv, mask, mode):
    logits = x @ w
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    lp = np.log(np.take_along_axis(probs, targets[..., None], -1)[..., 0])
    ratio = np.exp(lp - old)
    a = adv[:, None]
    unclipped = ratio * a
    clipped = np.clip(ratio, 1 - CLIP_LOW, 1 + CLIP_HIGH) * a
    use_clipped = clipped < unclipped
    obj = np.where(use_clipped, clipped, unclipped)
    kl = np.exp(ref - lp) - (ref - lp) - 1
    per_token = -obj + BETA * kl
    # d per_token / d lp: the unclipped branch gives -A r; the clipped branch is constant in lp
    # (its ratio is clamped) unless the ratio is inside the interval, where both branches agree.
    d_tok = np.where(use_clipped, 0.0, -a * ratio) + BETA * (1 - np.exp(ref - lp))
    n_seq = (mask.sum(1) > 0).sum()
    if mode == "seq_mean_token_mean":
        weights = mask / mask.sum(1, keepdims=True) / n_seq
    elif mode == "token_mean":
        weights = mask / mask.sum()
    else:
        weights = mask / (n_seq * FIXED_LEN)
    loss = (per_token * weights).sum()
    d_lp = d_tok * weights
    onehot = np.eye(V)[targets]
    d_logits = d_lp[..., None] * (onehot - probs)
    grad_w = np.einsum("bth,btv->hv", x, d_logits)
    return loss, grad_w, use_clipped & (mask > 0)


@pytest.mark.parametrize("mode", grpo.AGGREGATION_MODES)
def test_loss_and_gradient_match_numpy(mode):
    x, w, targets, old, ref, adv, mask = _batch()
    want_loss, want_grad, clipped = _numpy_loss_and_grad(x, w, targets, old, ref, adv, mask, mode)
    # The hand-made batch must exercise clipping on both signs of the advantage.
    assert clipped[adv > 0].any() and clipped[adv < 0].any()
    assert (~clipped & (mask > 0)).any()

    def loss_fn(w):
        lp, _ = hidden_logprobs(jnp.asarray(x), w, jnp.asarray(targets), chunk_size=3)
        norm = grpo.batch_normaliser(jnp.asarray(mask), FIXED_LEN)
        loss, _ = grpo.grpo_loss(
            lp,
            jnp.asarray(old),
            jnp.asarray(adv),
            jnp.asarray(mask),
            norm,
            mode=mode,
            clip_low=CLIP_LOW,
            clip_high=CLIP_HIGH,
            ref_logprobs=jnp.asarray(ref),
            beta=BETA,
        )
        return loss

    loss, grad = jax.value_and_grad(loss_fn)(jnp.asarray(w))
    np.testing.assert_allclose(float(loss), want_loss, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(np.asarray(grad), want_grad, rtol=1e-4, atol=1e-6)


def test_clip_fraction_and_kl_statistics():
    x, w, targets, old, ref, adv, mask = _batch()
    _, _, clipped = _numpy_loss_and_grad(x, w, targets, old, ref, adv, mask, "token_mean")
    lp, _ = hidden_logprobs(jnp.asarray(x), jnp.asarray(w), jnp.asarray(targets))
    norm = grpo.batch_normaliser(jnp.asarray(mask), FIXED_LEN)
    _, stats = grpo.grpo_loss(
        lp,
        jnp.asarray(old),
        jnp.asarray(adv),
        jnp.asarray(mask),
        norm,
        mode="token_mean",
        clip_low=CLIP_LOW,
        clip_high=CLIP_HIGH,
        ref_logprobs=jnp.asarray(ref),
        beta=BETA,
    )
    np.testing.assert_allclose(float(stats["clip_frac"]), clipped.sum() / mask.sum(), rtol=1e-6)


def test_micro_batches_sum_to_one_batch_loss():
    x, w, targets, old, ref, adv, mask = _batch()
    norm = grpo.batch_normaliser(jnp.asarray(mask), FIXED_LEN)
    lp, _ = hidden_logprobs(jnp.asarray(x), jnp.asarray(w), jnp.asarray(targets))
    for mode in grpo.AGGREGATION_MODES:
        kw = dict(mode=mode, clip_low=CLIP_LOW, clip_high=CLIP_HIGH, beta=BETA)
        full, _ = grpo.grpo_loss(lp, old, adv, mask, norm, ref_logprobs=ref, **kw)
        parts = [
            grpo.grpo_loss(
                lp[i : i + 1],
                old[i : i + 1],
                adv[i : i + 1],
                mask[i : i + 1],
                norm,
                ref_logprobs=ref[i : i + 1],
                **kw,
            )[0]
            for i in range(B)
        ]
        np.testing.assert_allclose(float(sum(parts)), float(full), rtol=1e-6)
        # The naive mean of per-micro-batch means differs for token_mean (unequal token counts).
        if mode == "token_mean":
            local = [
                grpo.grpo_loss(
                    lp[i : i + 1],
                    old[i : i + 1],
                    adv[i : i + 1],
                    mask[i : i + 1],
                    grpo.batch_normaliser(mask[i : i + 1], FIXED_LEN),
                    ref_logprobs=ref[i : i + 1],
                    **kw,
                )[0]
                for i in range(B)
            ]
            assert abs(float(np.mean(local)) - float(full)) > 1e-4


def test_beta_zero_ignores_reference():
    x, w, targets, old, ref, adv, mask = _batch()
    lp, _ = hidden_logprobs(jnp.asarray(x), jnp.asarray(w), jnp.asarray(targets))
    norm = grpo.batch_normaliser(jnp.asarray(mask), FIXED_LEN)
    kw = dict(mode="token_mean", clip_low=CLIP_LOW, clip_high=CLIP_HIGH)
    with_ref, _ = grpo.grpo_loss(lp, old, adv, mask, norm, ref_logprobs=ref, beta=0.0, **kw)
    without, _ = grpo.grpo_loss(lp, old, adv, mask, norm, ref_logprobs=None, beta=0.0, **kw)
    assert float(with_ref) == float(without)


@pytest.mark.parametrize("scale_by_std", [True, False])
def test_group_advantages(scale_by_std):
    rewards = np.array([1.0, 0.0, 0.5, 0.5, 2.0, 2.0, 2.0, 2.0, -1.0, 0.0, 0.0, 3.0], np.float32)
    got = np.asarray(grpo.group_advantages(jnp.asarray(rewards), 4, eps=1e-6, scale_by_std=scale_by_std))
    want = []
    for g in rewards.reshape(3, 4):
        centred = g - g.mean()
        want.extend(centred / (g.std() + 1e-6) if scale_by_std else centred)
    np.testing.assert_allclose(got, np.array(want), rtol=1e-5, atol=1e-6)
    assert np.all(got[4:8] == 0)  # a group with equal rewards teaches nothing
    with pytest.raises(ValueError):
        grpo.group_advantages(jnp.asarray(rewards[:10]), 4)


@pytest.mark.parametrize("chunk", [3, 128])  # a scan of rematerialised chunks; one direct chunk
def test_entropy_matches_numpy(chunk):
    """The logged entropy, -sum p log p of the tempered distribution over the valid vocabulary."""
    x, w, targets, *_ = _batch()
    temperature, valid = 0.7, V - 2
    _, ent = hidden_logprobs(
        jnp.asarray(x),
        jnp.asarray(w),
        jnp.asarray(targets % valid),
        temperature=temperature,
        chunk_size=chunk,
        valid_vocab=valid,
    )
    logits = (x @ w)[..., :valid] / temperature
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(np.asarray(ent), -(p * np.log(p)).sum(-1), rtol=1e-5, atol=1e-6)
