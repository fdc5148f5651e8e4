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


def apply_if_finite(
    optimizer: optax.GradientTransformation, params: Any, opt_state: Any, grads: Any, loss: jax.Array
) -> tuple[Any, Any, jax.Array, jax.Array]:
    """One optimizer update, or no change at all if the loss or the gradient is non-finite.

    Returns (params, opt_state, applied: bool scalar, grad_norm). The schedule's step counter lives
    in opt_state, so a skipped step does not advance the learning-rate schedule either. The test is
    the global gradient norm, which the step reports anyway: any NaN or inf gradient makes it
    non-finite (so does a norm past fp32's range, ~1.8e38, which no step should take either). A
    `lax.cond` runs the update or passes the state through, so a step costs no extra pass over the
    parameters and moments to select between new and old.
    """
    grad_norm = optax.tree.norm(grads)
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)

    def update(operands: tuple[Any, Any, Any]) -> tuple[Any, Any]:
        params, opt_state, grads = operands
        updates, new_opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_opt_state

    params, opt_state = jax.lax.cond(
        finite, update, lambda operands: operands[:2], (params, opt_state, grads)
    )
    return params, opt_state, finite, grad_norm
