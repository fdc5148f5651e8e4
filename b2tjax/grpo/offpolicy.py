"""The off-policy terms of streaming GRPO (rollout.max_staleness > 0): the decoupled
objective's per-token importance weights and the staleness of a step's records.

Decoupled PPO (AReaL, Hilton et al. 2022): a streamed record's tokens were sampled by older
*behaviour* policies (the sampler's log-probs, one policy version per token), so the clipped ratio
is taken against the *proximal* policy -- the trainer's weights before this update, whose log-probs
the update computes anyway -- and each token's loss is weighted by pi_proximal / pi_behaviour:

    loss_t = -w_t * min(r_t A, clip(r_t, 1 - eps_low, 1 + eps_high) A),
    r_t = pi_theta / pi_proximal,  w_t = min(pi_proximal / pi_behaviour, is_cap)  (a constant).

Truncating w (truncated importance sampling, `grpo.is_cap`, default 2.0) bounds the variance a
token the old policy found unlikely would add. At max_staleness = 0 none of this runs: the step's
batch has no weights and the loss is the synchronous one, bit for bit. `ratio_anchor` picks the
old log-probs and weights for both the padded and the packed update (b2tjax/grpo/packed.py), so
the two train on the same values.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from b2tjax.config.schema import GRPOConfig
from rollout.record import EpisodeRecord


def ratio_anchor(
    grpo: GRPOConfig, streamed: bool, trainer_lp: np.ndarray, sampler_lp: np.ndarray, sampled: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None, dict[str, float]]:
    """The ratio's old log-probs, the importance weights (None unless `streamed`) and their
    metrics. Streamed: the proximal policy's (the trainer's) and `importance_weights`; else the
    trainer's under `grpo.recompute_old_logprobs`, or the sampler's where it recorded one."""
    if streamed:  # decoupled: clip against the proximal policy, weight by proximal / behaviour
        weights, metrics = importance_weights(trainer_lp, sampler_lp, sampled, grpo.is_cap)
        return trainer_lp, weights, metrics
    if grpo.recompute_old_logprobs:
        return trainer_lp, None, {}
    # the sampler's, except where the sampler recorded none (environment tokens, padding rows)
    return np.where(sampled > 0, sampler_lp, trainer_lp), None, {}


def importance_weights(
    proximal_lp: np.ndarray, behaviour_lp: np.ndarray, sampled: np.ndarray, cap: float
) -> tuple[np.ndarray, dict[str, float]]:
    """[rows, T] truncated weights min(exp(proximal - behaviour), cap) on sampled tokens (1.0
    elsewhere: those tokens carry no behaviour log-prob), and their mean / max (before truncation)
    and the share of sampled tokens capped. Packed records come back to back, [1, tokens]: the
    padded rows' sampled tokens in the same order, so the metrics are the padded ones."""
    on = sampled > 0
    raw = np.where(on, np.exp(np.where(on, proximal_lp - behaviour_lp, 0.0)), 1.0)
    weights = np.minimum(raw, cap).astype(np.float32)
    count = max(int(on.sum()), 1)
    metrics = {
        "is_weight_mean": float(weights[on].sum() / count),
        "is_weight_max": float(raw[on].max()) if on.any() else 1.0,
        "is_capped_share": float((raw[on] > cap).sum() / count),
    }
    return weights, metrics


def record_staleness(records: Sequence[EpisodeRecord], policy_version: int) -> np.ndarray:
    """Per record: weight updates between its oldest sampled token and the policy being trained
    (0 for a record that sampled nothing)."""
    ages = []
    for record in records:
        span = record.version_range
        ages.append(0 if span is None else policy_version - span[0])
    return np.asarray(ages, np.int64)


def staleness_metrics(
    records: Sequence[EpisodeRecord], policy_version: int, max_staleness: int
) -> dict[str, float]:
    """The staleness histogram (`staleness/k`: share of the step's records k updates old, k = 0 ..
    max_staleness), its mean and max. A record older than the bound is a scheduling bug: the
    trainer submits each step's episodes only max_staleness steps ahead (b2tjax/run/streaming.py)."""
    ages = record_staleness(records, policy_version)
    if ages.size and ages.max() > max_staleness:
        oldest = int(ages.max())
        raise ValueError(f"a record is {oldest} updates old, over rollout.max_staleness={max_staleness}")
    out = {f"staleness/{k}": float(np.mean(ages == k)) for k in range(max_staleness + 1)}
    out["staleness_mean"] = float(ages.mean()) if ages.size else 0.0
    out["staleness_max"] = float(ages.max()) if ages.size else 0.0
    return out
