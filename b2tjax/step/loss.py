"""GRPO math: group-normalised advantages, the clipped token objective, k3 KL and loss aggregation.

Everything here is a pure function on arrays so it can run inside `jax.jit` and be checked against
NumPy. Shapes: B rows, T tokens; `mask` is 1.0 on tokens the policy is trained on. A row is one
sequence, or with `segment_ids` (packed rows, b2tjax.step.packing) several: segment k >= 1 of a
row is one sequence, and every per-sequence count below is over a segment's own tokens.

Aggregation is written as `sum(token_loss * weight) / global_normaliser`, where the normaliser is
computed once over the whole (mini-)batch and handed to every micro-batch. Summing micro-batch
losses (and gradients) therefore gives exactly the one-batch value, never a mean of means.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from b2tjax.grpo.modes import AGGREGATION_MODES, AggregationMode


def group_advantages(
    rewards: jax.Array, group_size: int, eps: float = 1e-6, scale_by_std: bool = True
) -> jax.Array:
    """Advantage of each rollout relative to the other rollouts of its prompt.

    `rewards` is [P * G] with the G rollouts of a prompt contiguous. A = r - mean(group), divided by
    (std(group) + eps) unless `scale_by_std` is False (the "no_std" variant). std is the population
    std (ddof=0). Groups where every reward is equal get advantage 0.
    """
    rewards = jnp.asarray(rewards, jnp.float32)
    if rewards.ndim != 1 or rewards.shape[0] % group_size != 0:
        raise ValueError(
            f"rewards must be 1-D with a multiple of group_size={group_size} entries, got {rewards.shape}"
        )
    groups = rewards.reshape(-1, group_size)
    centred = groups - groups.mean(axis=1, keepdims=True)
    if scale_by_std:
        centred = centred / (groups.std(axis=1, keepdims=True) + eps)
    # The float32 mean of equal rewards such as 0.4 can miss them by an ulp, which 1/(std + eps)
    # would blow up to a few percent of an advantage: an all-equal group is exactly 0 instead.
    all_equal = groups.max(axis=1, keepdims=True) == groups.min(axis=1, keepdims=True)
    return jnp.where(all_equal, 0.0, centred).reshape(-1)


class TokenTerms(NamedTuple):
    """Per-token pieces of the GRPO objective, all [B, T] float32."""

    loss: jax.Array  # policy-gradient loss + beta * KL, to be aggregated
    ratio: jax.Array  # pi_theta / pi_old
    clipped: jax.Array  # 1.0 where the clipped branch was the active (smaller) one
    kl: jax.Array  # k3 estimate of KL(pi_theta || pi_ref); zeros when no reference


def token_terms(
    logprobs: jax.Array,
    old_logprobs: jax.Array,
    advantages: jax.Array,
    clip_low: float,
    clip_high: float,
    ref_logprobs: jax.Array | None = None,
    beta: float = 0.0,
    is_weights: jax.Array | None = None,
) -> TokenTerms:
    """Clipped surrogate (DAPO-style separate low/high epsilons) plus beta * k3 KL, per token.

    loss_t = -min(r_t A, clip(r_t, 1 - clip_low, 1 + clip_high) A) + beta * (exp(q) - q - 1),
    with r_t = exp(logp - old_logp), q = ref_logp - logp. `advantages` is [B] (one per row) or
    [B, T] (packed rows: each token its sequence's).
    `is_weights` [B, T] (streaming only, b2tjax/grpo/offpolicy.py): the decoupled objective's
    truncated importance weights, constants multiplying the policy-gradient term; `old_logprobs`
    is then the proximal policy's.
    """
    logprobs = logprobs.astype(jnp.float32)
    ratio = jnp.exp(logprobs - old_logprobs.astype(jnp.float32))
    adv = advantages.astype(jnp.float32)
    adv = adv if adv.ndim == logprobs.ndim else adv[..., None]
    unclipped = ratio * adv
    clipped_ratio = jnp.clip(ratio, 1.0 - clip_low, 1.0 + clip_high)
    clipped_obj = clipped_ratio * adv
    objective = jnp.minimum(unclipped, clipped_obj)
    is_clipped = (clipped_obj < unclipped).astype(jnp.float32)
    loss = -objective if is_weights is None else -objective * is_weights.astype(jnp.float32)
    if ref_logprobs is not None and beta != 0.0:
        q = ref_logprobs.astype(jnp.float32) - logprobs
        kl = jnp.exp(q) - q - 1.0
        loss = loss + beta * kl
    else:
        kl = jnp.zeros_like(logprobs)
    return TokenTerms(loss=loss, ratio=ratio, clipped=is_clipped, kl=kl)


class Normaliser(NamedTuple):
    """Whole-batch counts every micro-batch divides by (scalars, float32)."""

    num_seqs: jax.Array  # sequences with at least one trained token
    num_tokens: jax.Array  # trained tokens
    fixed_length: jax.Array  # the constant of "fixed_length" (tokens per sequence budget)


def _segment_sums(mask: jax.Array, segment_ids: jax.Array, num_segments: int) -> jax.Array:
    """[rows, num_segments] trained tokens of each segment (rows: every leading axis flattened)."""
    flat_mask = mask.reshape(-1, mask.shape[-1])
    flat_ids = segment_ids.reshape(-1, mask.shape[-1])
    rows = jnp.arange(flat_mask.shape[0])[:, None]
    return jnp.zeros((flat_mask.shape[0], num_segments), jnp.float32).at[rows, flat_ids].add(flat_mask)


def sequence_tokens(mask: jax.Array, segment_ids: jax.Array | None, num_segments: int = 0) -> jax.Array:
    """Trained tokens of each token's sequence, [.., B, T] float32 (or [.., B, 1]): its row's, or
    with `segment_ids` its segment's. `num_segments` (static) bounds the ids: the row width + 1.
    Counted by adding 1.0s, exact like the row sums of unpacked rows."""
    mask = mask.astype(jnp.float32)
    if segment_ids is None:
        return mask.sum(axis=-1, keepdims=True)
    sums = _segment_sums(mask, segment_ids, num_segments)
    flat_ids = segment_ids.reshape(-1, mask.shape[-1])
    return jnp.take_along_axis(sums, flat_ids, axis=1).reshape(mask.shape)


def batch_normaliser(mask: jax.Array, fixed_length: int, segment_ids: jax.Array | None = None) -> Normaliser:
    """Counts over the full batch; `mask` may have any leading micro-batch axes before [.., B, T];
    `segment_ids` (the same shape) for packed rows, whose sequences are their segments.

    Why one whole-batch normaliser, computed before the micro-batches run: the gradient of a
    mini-batch must not depend on how it is split for memory. If each micro-batch divided by its
    own counts, summing their gradients would weight a token by 1/(tokens in its micro-batch), so
    short and long episodes would count differently depending on which rows happened to share a
    micro-batch, and `grpo.micro_batch_size` would change the optimisation, not only the memory."""
    mask = mask.astype(jnp.float32)
    if segment_ids is None:
        trained = (mask.sum(axis=-1) > 0).sum()
    else:  # segment 0 (padding) has no trained token
        trained = (_segment_sums(mask, segment_ids, mask.shape[-1] + 1) > 0).sum()
    return Normaliser(
        num_seqs=jnp.maximum(trained.astype(jnp.float32), 1.0),
        num_tokens=jnp.maximum(mask.sum(), 1.0),
        fixed_length=jnp.asarray(float(fixed_length), jnp.float32),
    )


def record_normaliser(masks: list, fixed_length: int) -> Normaliser:
    """`batch_normaliser`'s counts from each record's own mask (one sequence each), on the host:
    a packed mini-batch's micro-batches have different shapes and run one by one, and each must
    divide by the whole mini-batch's counts. Sums of 0/1 masks, exact as the device's are."""
    sums = [float(np.sum(m, dtype=np.float64)) for m in masks]
    return Normaliser(
        num_seqs=np.float32(max(sum(1 for x in sums if x > 0), 1)),
        num_tokens=np.float32(max(sum(sums), 1.0)),
        fixed_length=np.float32(fixed_length),
    )


def token_weights(
    mask: jax.Array,
    mode: AggregationMode,
    norm: Normaliser,
    segment_ids: jax.Array | None = None,
    num_segments: int = 0,
) -> jax.Array:
    """Weight w[b, t] so that the batch loss is sum(token_loss * w); [B, T] float32. With
    `segment_ids` (packed rows; `num_segments` as in `sequence_tokens`) |y_b| is the segment's.

    - seq_mean_token_mean: (1/num_seqs) * (1/|y_b|) per token (the GRPO paper's formula);
    - token_mean: 1/num_tokens (every trained token counts the same, batch-wide);
    - fixed_length: 1/(num_seqs * fixed_length) (Dr.GRPO-style constant normaliser).
    """
    # Weights, not a mean: sum(token_loss * w) over the micro-batches of a step adds up to the loss
    # of the whole batch, because every micro-batch divides by the same whole-batch `norm`.
    mask = mask.astype(jnp.float32)
    if mode == "seq_mean_token_mean":
        seq_len = jnp.maximum(sequence_tokens(mask, segment_ids, num_segments), 1.0)
        return mask / seq_len / norm.num_seqs
    if mode == "token_mean":
        return mask / norm.num_tokens
    if mode == "fixed_length":
        return mask / (norm.num_seqs * norm.fixed_length)
    raise ValueError(f"unknown aggregation mode {mode!r}; expected one of {AGGREGATION_MODES}")


def aggregate(
    token_loss: jax.Array,
    mask: jax.Array,
    mode: AggregationMode,
    norm: Normaliser,
    segment_ids: jax.Array | None = None,
    num_segments: int = 0,
) -> jax.Array:
    """Scalar loss contribution of these rows under the whole-batch normaliser `norm`."""
    weights = token_weights(mask, mode, norm, segment_ids, num_segments)
    return jnp.sum(token_loss.astype(jnp.float32) * weights)


def grpo_loss(
    logprobs: jax.Array,
    old_logprobs: jax.Array,
    advantages: jax.Array,
    mask: jax.Array,
    norm: Normaliser,
    *,
    mode: AggregationMode,
    clip_low: float,
    clip_high: float,
    ref_logprobs: jax.Array | None = None,
    beta: float = 0.0,
    segment_ids: jax.Array | None = None,
    num_segments: int = 0,
    is_weights: jax.Array | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """GRPO loss of one (micro-)batch, plus sums for logging (divide by norm.num_tokens).
    Packed rows: per-token `advantages` and their `segment_ids` (see `token_weights`)."""
    terms = token_terms(
        logprobs, old_logprobs, advantages, clip_low, clip_high, ref_logprobs, beta, is_weights
    )
    loss = aggregate(terms.loss, mask, mode, norm, segment_ids, num_segments)
    mask = mask.astype(jnp.float32)
    per_token = mask / norm.num_tokens  # token-mean weights for the logged statistics
    stats = {
        "clip_frac": jnp.sum(terms.clipped * per_token),
        "kl": jnp.sum(terms.kl * per_token),
        "ratio_mean": jnp.sum(terms.ratio * per_token),
    }
    return loss, stats
