"""A Qwen3-MoE's router in a train step: its load-balance loss added to the micro-batch's loss times
`model.moe.load_balance_loss_weight`, and its statistics added to the step's metrics
(models/router_stats.py). A dense model has no router: its loss and metrics stay as they are.

A micro-batch's router terms are its own batch's (the loss is not linear in the routing: f x P),
weighted by its share of the step's trained tokens, the normaliser of the loss itself: they add up
over micro-batches as the loss does, and a one-micro-batch step's are the batch's exactly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from models.router_stats import RouterStats, load_balance_loss, router_metrics


def add_router_terms(
    loss: jax.Array, stats: dict, router: RouterStats | None, weight: float, mask: jax.Array, trained
) -> tuple[jax.Array, dict]:
    """(loss, stats) of a micro-batch with its `router` statistics ([L, ...], None for a dense
    model) added, each weighted by the micro-batch's share of the step's `trained` tokens (`mask`
    its own); the loss term times `weight` (0: the loss is left as it is, not added to a zero)."""
    if router is None:
        if weight:
            raise ValueError(f"model.moe.load_balance_loss_weight={weight} needs a Qwen3-MoE model")
        return loss, stats
    share = jnp.sum(mask) / trained
    stats = dict(stats, **{name: value * share for name, value in router_metrics(router).items()})
    return (loss + weight * share * load_balance_loss(router) if weight else loss), stats
