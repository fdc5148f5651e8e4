"""Optimizer: AdamW on fp32 master weights, warmup + cosine schedule, global-norm clipping.

Skipping non-finite steps is done by the train step itself (`apply_if_finite` below) so the skip
covers a non-finite loss as well as non-finite gradients, and so the count lives in the train state.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from b2tjax.config import OptimConfig


def learning_rate_schedule(cfg: OptimConfig, total_steps: int) -> optax.Schedule:
    """Linear warmup from 0 to `lr`, then cosine decay to `lr * final_lr_ratio` at `total_steps`."""
    warmup = min(cfg.warmup_steps, max(total_steps - 1, 0))
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0 if warmup > 0 else cfg.lr,
        peak_value=cfg.lr,
        warmup_steps=warmup,
        decay_steps=max(total_steps, warmup + 1),
        end_value=cfg.lr * cfg.final_lr_ratio,
    )


def make_optimizer(cfg: OptimConfig, total_steps: int) -> optax.GradientTransformation:
    """clip_by_global_norm -> AdamW(schedule). Moments are kept in fp32 like the master weights."""
    return optax.chain(
        optax.clip_by_global_norm(cfg.max_grad_norm) if cfg.max_grad_norm > 0 else optax.identity(),
        optax.adamw(
            learning_rate_schedule(cfg, total_steps),
            b1=cfg.b1,
            b2=cfg.b2,
            eps=cfg.eps,
            weight_decay=cfg.weight_decay,
            mu_dtype=jnp.float32,
        ),
    )


def tree_is_finite(tree: Any) -> jax.Array:
    """Scalar bool: every leaf of `tree` is finite."""
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree_util.tree_leaves(tree)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


def apply_if_finite(
    optimizer: optax.GradientTransformation, params: Any, opt_state: Any, grads: Any, loss: jax.Array
) -> tuple[Any, Any, jax.Array, jax.Array]:
    """One optimizer update, or no change at all if the loss or any gradient is non-finite.

    Returns (params, opt_state, applied: bool scalar, grad_norm). The schedule's step counter lives
    in opt_state, so a skipped step does not advance the learning-rate schedule either.
    """
    finite = jnp.isfinite(loss) & tree_is_finite(grads)
    # Zero the gradients on the skip path so no NaN flows through the (discarded) update maths.
    safe_grads = jax.tree_util.tree_map(lambda g: jnp.where(finite, g, jnp.zeros_like(g)), grads)
    updates, new_opt_state = optimizer.update(safe_grads, opt_state, params)
    new_params = optax.apply_updates(params, updates)
    pick = lambda new, old: jnp.where(finite, new, old)  # noqa: E731
    params = jax.tree_util.tree_map(pick, new_params, params)
    opt_state = jax.tree_util.tree_map(pick, new_opt_state, opt_state)
    return params, opt_state, finite, optax.tree.norm(grads)
