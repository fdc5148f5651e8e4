"""How a train step sums micro-batches into one optimizer update: one shape scanned in one program
(the padded steps, `accumulate_scan`), or micro-batches of their own shapes each through a
gradient program into a donated buffer, then an apply program (packed steps, `split_step`; the
loop is `train_step.StepFns.accumulate`). Both add the micro-batches' losses, gradients and stats
in order from the first and apply `update`, so they give the same step."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from b2tjax.step.batch import TrainBatch
from b2tjax.step.optim import apply_if_finite
from models.sharding import on_mesh


class TrainState(NamedTuple):
    params: dict  # nnx.to_pure_dict layout
    opt_state: Any
    step: jax.Array  # int32 optimizer steps attempted
    skipped: jax.Array  # int32 steps skipped for a non-finite loss or gradient


def accumulate_scan(micro_loss: Callable, params, batch: TrainBatch, norm, frozen):
    """Sum loss, grads and stats over the leading micro-batch axis with lax.scan (gradients with
    respect to `params` only: the frozen base gets none)."""
    grad_fn = jax.value_and_grad(micro_loss, has_aux=True)
    if batch.ids.shape[0] == 1:  # one micro-batch: no scan, no zero-filled accumulators to add to
        with jax.named_scope("forward_backward"):
            (loss, stats), grads = grad_fn(params, jax.tree.map(lambda x: x[0], batch), norm, frozen)
        return loss, grads, stats

    def body(carry, micro):
        loss_sum, grads_sum, stats_sum = carry
        # the forward ops keep their scopes (forward, logprobs, loss); JAX names the backward ones
        # transpose(jvp(...)) of them, all under this scope
        with jax.named_scope("forward_backward"):
            (loss, stats), grads = grad_fn(params, micro, norm, frozen)
        grads_sum = jax.tree.map(jnp.add, grads_sum, grads)
        stats_sum = jax.tree.map(jnp.add, stats_sum, stats)
        return (loss_sum + loss, grads_sum, stats_sum), None

    first = jax.tree.map(lambda x: x[0], batch)
    stats_shape = jax.eval_shape(lambda: micro_loss(params, first, norm, frozen)[1])
    zeros = (
        jnp.zeros((), jnp.float32),
        jax.tree.map(jnp.zeros_like, params),
        jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), stats_shape),
    )
    (loss, grads, stats), _ = jax.lax.scan(body, zeros, batch)
    return loss, grads, stats


def micro_grads(micro_loss: Callable, params, grads_sum, batch: TrainBatch, norm, frozen):
    """One [1, b, T] micro-batch's gradients added into `grads_sum` (donated), and its loss and
    stats: a packed mini-batch's micro-batches of any shape accumulate into one buffer."""
    grad_fn = jax.value_and_grad(micro_loss, has_aux=True)
    with jax.named_scope("forward_backward"):
        (loss, stats), grads = grad_fn(params, jax.tree.map(lambda x: x[0], batch), norm, frozen)
    return jax.tree.map(jnp.add, grads_sum, grads), loss, stats


def update(optimizer, schedule, state: TrainState, loss, grads, stats):
    with jax.named_scope("optimizer_update"):
        params, opt_state, applied, grad_norm = apply_if_finite(
            optimizer, state.params, state.opt_state, grads, loss
        )
    metrics = dict(
        stats,
        loss=loss,
        grad_norm=grad_norm,
        applied=applied.astype(jnp.float32),
        lr=schedule(state.step - state.skipped),
    )
    new_state = TrainState(params, opt_state, state.step + 1, state.skipped + (1 - applied.astype(jnp.int32)))
    return new_state, metrics


class SplitStep(NamedTuple):
    grad: Callable  # micro loss -> its jitted gradient program (frozen base last)
    apply: Callable
    zeros: Callable


def split_step(optimizer, schedule, state_sharding, mesh: Mesh | None) -> SplitStep:
    """The packed steps' programs (`StepFns.accumulate`): a gradient program per micro loss, the
    optimizer's apply program and the zero gradient buffer, laid out like the parameters."""

    def apply(state: TrainState, grads, loss, stats):
        return update(optimizer, schedule, state, loss, grads, stats)

    def zeros(params):
        return jax.tree.map(jnp.zeros_like, params)

    if state_sharding is None:
        return SplitStep(
            lambda loss: jax.jit(functools.partial(micro_grads, loss), donate_argnums=(1,)),
            jax.jit(apply, donate_argnums=(0,)),
            jax.jit(zeros),
        )
    replicated = NamedSharding(mesh, PartitionSpec())
    params = state_sharding.params
    grad = lambda loss: on_mesh(  # noqa: E731
        jax.jit(
            functools.partial(micro_grads, loss),
            in_shardings=(params, params, None, None, None),
            out_shardings=(params, replicated, replicated),
            donate_argnums=(1,),
        ),
        mesh,
    )
    apply_jit = jax.jit(
        apply,
        in_shardings=(state_sharding, params, None, None),
        out_shardings=(state_sharding, replicated),
        donate_argnums=(0,),
    )
    zeros_jit = jax.jit(zeros, in_shardings=(params,), out_shardings=params)
    return SplitStep(grad, on_mesh(apply_jit, mesh), on_mesh(zeros_jit, mesh))
