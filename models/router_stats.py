"""What a Qwen3-MoE router did in one forward, over the tokens it routed (padding never counts), and
what training reads from it: the Switch-Transformer load-balance loss and a few plottable metrics.

Each MoE layer returns a `RouterStats` of sums over its valid tokens; the layer scan stacks them
[L, ...]. Sums, not means, so that they are exact over a batch split across devices (the
expert-parallel path routes the global batch before any exchange). The loss is MaxText's
`load_balance_loss` (and HF's `load_balancing_loss_func` per layer): per layer
E * sum_e f_e * P_e, f_e = routed (token, slot) pairs to expert e per valid token (the k slots of
a token all count, so f sums to k and a perfectly balanced router scores k), P_e = mean router
probability of e; the mean over MoE layers. Only P carries a gradient: it pushes probability away
from the experts that got more than their share.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

F32 = jnp.float32


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class RouterStats:
    """Sums over the valid tokens of one layer (or [L, ...] stacked over layers), all fp32:
    `counts` [E] routed (token, slot) pairs per expert, `probs` [E] router probabilities,
    `entropy` [] the router softmax's entropy, `tokens` [] valid tokens, `slots` [] the pairs a
    dropless router owes them (tokens x k)."""

    counts: jax.Array
    probs: jax.Array
    entropy: jax.Array
    tokens: jax.Array
    slots: jax.Array


def router_stats(probs: jax.Array, counts: jax.Array, valid: jax.Array, top_k: int) -> RouterStats:
    """The stats of N tokens with router softmax `probs` fp32 [N, E], routed `counts` [E] (valid
    tokens' pairs only) and `valid` [N] bool."""
    keep = valid.astype(F32)
    entropy = -jnp.sum(probs * jnp.log(jnp.maximum(probs, jnp.finfo(F32).tiny)), axis=-1)
    tokens = jnp.sum(keep)
    return RouterStats(
        counts=counts.astype(F32),
        probs=jnp.einsum("ne,n->e", probs, keep),
        entropy=jax.lax.stop_gradient(jnp.sum(entropy * keep)),
        tokens=tokens,
        slots=tokens * top_k,
    )


def _per_token(stats: RouterStats, value: jax.Array) -> jax.Array:
    """value [L, ...] / valid tokens [L] (0 for a layer that saw none)."""
    tokens = jnp.maximum(stats.tokens, 1.0)
    return value / tokens.reshape(tokens.shape + (1,) * (value.ndim - tokens.ndim))


def load_balance_loss(stats: RouterStats) -> jax.Array:
    """The load-balance loss of `stats` stacked [L, ...]: the mean over layers of E * sum_e f_e P_e."""
    f = _per_token(stats, jax.lax.stop_gradient(stats.counts))
    p = _per_token(stats, stats.probs)
    return jnp.mean(stats.counts.shape[-1] * jnp.sum(f * p, axis=-1))


def router_metrics(stats: RouterStats) -> dict[str, jax.Array]:
    """Scalars of `stats` stacked [L, ...], each the mean over layers: the load-balance loss; the
    most and least loaded expert's pairs and their spread (std / mean) relative to a balanced
    router's tokens x k / E (1 = balanced); the share of owed pairs not routed (0: dropless); the
    router entropy per valid token."""
    stats = jax.tree.map(jax.lax.stop_gradient, stats)
    balanced = jnp.maximum(stats.slots, 1.0)[:, None] / stats.counts.shape[-1]
    load = stats.counts / balanced  # [L, E]
    return {
        "router/load_balance_loss": load_balance_loss(stats),
        "router/expert_load_max": jnp.mean(jnp.max(load, axis=-1)),
        "router/expert_load_min": jnp.mean(jnp.min(load, axis=-1)),
        "router/expert_load_cv": jnp.mean(
            jnp.std(load, axis=-1) / jnp.maximum(jnp.mean(load, axis=-1), 1e-9)
        ),
        "router/dropped_share": jnp.mean(1.0 - jnp.sum(stats.counts, -1) / jnp.maximum(stats.slots, 1.0)),
        "router/entropy": jnp.mean(_per_token(stats, stats.entropy)),
    }
