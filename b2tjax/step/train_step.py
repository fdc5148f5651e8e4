"""Jitted GRPO and SFT train steps with micro-batch accumulation and explicit shardings.

The model is split once into (graphdef, abstract Param state); parameters travel as a pure dict
(`nnx.to_pure_dict` layout, the checkpoint format), fp32 master weights. The model's compute dtype
(e.g. bf16) is fixed when it is built, so the forward runs in bf16 while the optimizer updates fp32.

Batches are laid out [M, b, T]: M micro-batches of b rows. The step scans over M, summing losses and
gradients; every micro-batch divides by normalisers computed over the whole [M, b, T] batch, so
the sum equals the one-batch loss exactly (see grpo.py).

Packed mini-batches (b2tjax/step/packing.py) have micro-batches of different shapes, which one
scan cannot hold; they run as a gradient program per micro-batch (`grpo_grad` / `sft_grad`,
compiled once per [rows, width] shape, adding into a donated gradient buffer) and one apply program
(`apply`: the same optimizer update as the scanned steps'), with the normaliser counted over the
whole mini-batch on the host (`loss.record_normaliser`), so the loss and gradients are the ones
the one-shape steps would give (`StepFns.accumulate`).

`init_train_state` shards the optimizer moments like the parameters (`opt_state_shardings`);
`abstract_train_state` is its shape-only twin (what launch/plan.py lowers). `StepFns` members are
`models.sharding.MeshBound` on a mesh: call them, or `.lower(...)` them, with the mesh set.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from b2tjax.step import logprobs as lps
from b2tjax.step import loss as grpo
from b2tjax.step.accumulate import TrainState, accumulate_scan, split_step, update
from b2tjax.step.batch import TrainBatch
from b2tjax.step.router import add_router_terms
from models.lora import has_lora
from models.sharding import on_mesh, row_axes, row_devices

Params = dict  # nnx.to_pure_dict layout


@dataclasses.dataclass(frozen=True)
class BoundModel:
    """A model's graph and parameter structure, to rebuild it from pure params dicts inside jit.

    The trained parameters are every Param, or only the LoRA adapters when the model has some;
    the rest of the Params (the frozen base) then travels as a second pure dict, `frozen`, an
    argument of every jitted function (never a compile-time constant, never donated)."""

    graphdef: Any
    abstract_params: Any  # nnx.State of the trained Params (shapes only are used)
    rest: Any  # non-Param state (usually empty)
    abstract_frozen: Any = None  # nnx.State of the frozen Params (LoRA's base), else empty

    @classmethod
    def from_model(cls, model: nnx.Module) -> tuple[BoundModel, Params]:
        trained, frozen = _param_filters(model)
        graphdef, params, frozen_state, rest = nnx.split(model, trained, frozen, ...)
        return cls(graphdef, params, rest, frozen_state), nnx.to_pure_dict(params)

    @staticmethod
    def frozen_of(model: nnx.Module) -> Params:
        """The frozen Params of `model` as a pure dict (empty when every Param is trained)."""
        return nnx.to_pure_dict(nnx.state(model, _param_filters(model)[1]))

    def __call__(self, params: Params, frozen: Params | None = None) -> nnx.Module:
        state = jax.tree.map(lambda x: x, self.abstract_params)
        nnx.replace_by_pure_dict(state, params)
        frozen_state = jax.tree.map(lambda x: x, self.abstract_frozen)
        if frozen:
            nnx.replace_by_pure_dict(frozen_state, frozen)
        return nnx.merge(self.graphdef, state, frozen_state, self.rest)


def _param_filters(model: nnx.Module) -> tuple[Any, Any]:
    """(trained, frozen) Param filters: the adapters and the base under LoRA, else all and none."""

    if has_lora(model):
        return nnx.LoRAParam, nnx.All(nnx.Param, nnx.Not(nnx.LoRAParam))
    return nnx.Param, nnx.Nothing


# ----------------------------------------------------------------------------------------------
# Losses on one micro-batch


def _micro_logprobs(model, micro: TrainBatch, chunk: int, temperature: float, valid_vocab):
    """(log-probs, entropy, pick, router statistics: None for a dense model): at `micro.positions`
    when the batch has them ([b, K]; `pick` gathers any [b, T] field there), else at every token
    ([b, T]; `pick` is the identity). Packed rows (`micro.segment_ids`) attend within their segments."""
    kw = dict(temperature=temperature, chunk_size=chunk, valid_vocab=valid_vocab)
    hidden, router = lps.forward(model, micro.ids, micro.segments)
    if micro.positions is None:
        return (*lps.sequence_head(model, hidden, micro.ids, **kw), lambda x: x, router)
    lp, ent = lps.position_head(model, hidden, micro.ids, micro.positions, **kw)

    def pick(x):
        return None if x is None else jnp.take_along_axis(x, micro.positions, axis=1)

    return lp, ent, pick, router


def _grpo_micro_loss(model_fn, cfg, valid_vocab, balance, params, micro, norm, frozen, temperature):
    model = model_fn(params, frozen)
    lp, ent, pick, router = _micro_logprobs(model, micro, cfg.logprob_chunk, temperature, valid_vocab)
    with jax.named_scope("loss"):
        mask = pick(micro.mask)  # the same row sums as micro.mask: positions hold every mask != 0
        packed = micro.segment_ids is not None  # then advantages are per token, [b, T]
        loss, stats = grpo.grpo_loss(
            lp,
            pick(micro.old_logprobs),
            pick(micro.advantages) if packed else micro.advantages,
            mask,
            norm,
            mode=cfg.aggregation,
            clip_low=cfg.clip_low,
            clip_high=cfg.clip_high,
            ref_logprobs=pick(micro.ref_logprobs),
            beta=cfg.beta,
            segment_ids=pick(micro.segment_ids),
            num_segments=micro.ids.shape[-1] + 1,
            is_weights=pick(micro.is_weights),
        )
        stats["entropy"] = jnp.sum(ent * mask) / norm.num_tokens
        return add_router_terms(loss, stats, router, balance, mask, norm.num_tokens)


def _sft_micro_loss(model_fn, chunk: int, valid_vocab, balance, params, micro, norm, frozen, temperature):
    model = model_fn(params, frozen)
    lp, ent, pick, router = _micro_logprobs(model, micro, chunk, temperature, valid_vocab)
    with jax.named_scope("loss"):
        mask = pick(micro.mask).astype(jnp.float32)
        loss = -jnp.sum(lp * mask) / norm.num_tokens  # token mean over the whole batch
        stats = {"entropy": jnp.sum(ent * mask) / norm.num_tokens}
        return add_router_terms(loss, stats, router, balance, mask, norm.num_tokens)


# ----------------------------------------------------------------------------------------------
# Step builders


@dataclasses.dataclass
class StepFns:
    """The jitted functions of a run, all with explicit in/out shardings when a mesh is given."""

    grpo_step: Callable  # (state, TrainBatch) -> (state, metrics)
    sft_step: Callable  # (state, TrainBatch) -> (state, metrics)
    logprobs: Callable  # (params, ids, positions | None, segments | None) -> [M, b, T]: _logprob_pass
    mesh: Mesh | None
    grpo_grad: Callable  # (params, grads, [1, b, T] batch, norm) -> (grads, loss, stats), packed
    sft_grad: Callable  # the same for SFT's loss
    apply: Callable  # (state, grads, loss, stats) -> (state, metrics)
    zero_grads: Callable  # params -> zeros laid out like them
    fixed_length: int  # the "fixed_length" aggregation's constant

    def accumulate(
        self, grad: Callable, state: TrainState, micro_batches: list[TrainBatch], norm: grpo.Normaliser
    ) -> tuple[TrainState, dict]:
        """One optimizer step over micro-batches of any shapes (host arrays, [1, b, T] each), by
        `grad` (`grpo_grad` or `sft_grad`), all dividing by `norm` (the whole mini-batch's): the
        gradients add up in one donated buffer, losses and stats in the scanned steps' order."""
        norm = grpo.Normaliser(*(self.replicate(np.float32(x)) for x in norm))
        grads, loss, stats = self.zero_grads(state.params), None, None
        for micro in micro_batches:
            grads, micro_loss, micro_stats = grad(state.params, grads, self.shard_batch(micro), norm)
            loss = micro_loss if loss is None else loss + micro_loss
            stats = micro_stats if stats is None else jax.tree.map(jnp.add, stats, micro_stats)
        return self.apply(state, grads, loss, stats)

    def normaliser(self, masks: list[np.ndarray]) -> grpo.Normaliser:
        """The whole mini-batch's counts from each record's own mask (`loss.record_normaliser`)."""
        return grpo.record_normaliser(masks, self.fixed_length)

    def replicate(self, x: np.ndarray) -> jax.Array:
        """A host array the same on every process, replicated over the mesh's devices."""
        if self.mesh is None:
            return jnp.asarray(x)
        sharding = NamedSharding(self.mesh, PartitionSpec())
        if jax.process_count() == 1:
            return jax.device_put(x, sharding)
        return jax.make_array_from_callback(np.shape(x), sharding, lambda index: np.asarray(x)[index])

    def shard_batch(self, batch: TrainBatch) -> TrainBatch:
        """A micro-batched TrainBatch of host arrays on devices (`shard_rows` for each array)."""
        return jax.tree.map(self.shard_rows, batch)

    def shard_rows(self, x: np.ndarray) -> jax.Array:
        """Put a [M, b, ...] host array on devices with rows split over (data, fsdp).

        With several JAX processes every process holds the same whole global batch (the data
        pipeline and the rollout records are global), and each places only the shards of its own
        devices; so a step's batch, and every normaliser over it, is the one process would see.
        """
        if self.mesh is None:
            return jnp.asarray(x)
        sharding = batch_sharding(self.mesh, x.shape)
        if jax.process_count() == 1:
            return jax.device_put(x, sharding)
        return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])

    def abstract_batch(self, batch: TrainBatch) -> TrainBatch:
        """What `shard_batch` would make of a TrainBatch of global jax.ShapeDtypeStructs, without data."""

        def place(s: jax.ShapeDtypeStruct) -> jax.ShapeDtypeStruct:
            sharding = None if self.mesh is None else batch_sharding(self.mesh, s.shape)
            return jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sharding)

        return jax.tree.map(place, batch)


def batch_sharding(mesh: Mesh, shape: tuple[int, ...]) -> NamedSharding:
    """[M, b, ...]: b over ROW_AXES (data, fsdp, expert) when it divides, else replicated."""
    splits = len(shape) >= 2 and shape[1] % row_devices(dict(mesh.shape)) == 0
    rows = row_axes(dict(mesh.shape)) if splits else None
    return NamedSharding(mesh, PartitionSpec(None, rows))


def opt_state_shardings(optimizer: optax.GradientTransformation, params: Any, mesh: Mesh) -> Any:
    """Optimizer-state shardings: moments sharded like the parameters they follow, everything else
    (step counters) replicated. Left to itself, a jitted `optimizer.init` replicates the moments:
    zeros carry no data dependence on the sharded parameters."""
    replicated = NamedSharding(mesh, PartitionSpec())
    shapes = jax.eval_shape(optimizer.init, params)
    param_shardings = jax.tree.map(lambda x: x.sharding, params)
    return optax.tree_map_params(
        optimizer,
        lambda _, sharding: sharding,
        shapes,
        param_shardings,
        transform_non_params=lambda _: replicated,
        is_leaf=lambda x: isinstance(x, NamedSharding),
    )


def init_train_state(
    params: Params, optimizer: optax.GradientTransformation, mesh: Mesh | None = None
) -> TrainState:
    """Optimizer state created under jit, its moment buffers sharded like the parameters; with a
    mesh, step counters are replicated over it."""
    if mesh is None:
        return TrainState(
            params, jax.jit(optimizer.init)(params), jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32)
        )
    opt_state = jax.jit(optimizer.init, out_shardings=opt_state_shardings(optimizer, params, mesh))(params)
    replicated = NamedSharding(mesh, PartitionSpec())
    step, skipped = (
        jax.device_put(jnp.zeros((), jnp.int32), replicated) for _ in range(2)
    )  # donated: 2 buffers
    return TrainState(params, opt_state, step, skipped)


def abstract_train_state(
    params: Any, optimizer: optax.GradientTransformation, mesh: Mesh | None = None
) -> TrainState:
    """`init_train_state` in shapes only (params: ShapeDtypeStructs, with shardings on a mesh)."""
    opt_shapes = jax.eval_shape(optimizer.init, params)
    if mesh is None:
        scalar = jax.ShapeDtypeStruct((), jnp.int32)
        return TrainState(params, opt_shapes, scalar, scalar)
    shardings = opt_state_shardings(optimizer, params, mesh)
    opt_state = jax.tree.map(
        lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh), opt_shapes, shardings
    )
    scalar = jax.ShapeDtypeStruct((), jnp.int32, sharding=NamedSharding(mesh, PartitionSpec()))
    return TrainState(params, opt_state, scalar, scalar)


def state_shardings(state: TrainState) -> Any:
    return jax.tree.map(lambda x: x.sharding, state)


def make_step_fns(
    model_fn: BoundModel,
    optimizer: optax.GradientTransformation,
    schedule: optax.Schedule,
    grpo_cfg,
    *,
    temperature: float,
    fixed_length: int,
    state_sharding: Any = None,
    mesh: Mesh | None = None,
    valid_vocab: int | None = None,
    frozen: Params | None = None,
    load_balance_weight: float = 0.0,
) -> StepFns:
    """Build jitted GRPO/SFT steps and the log-prob pass.

    `state_sharding` (from `state_shardings(init_train_state(...))`) pins the train state's layout
    as both input and output sharding; batches are sharded by `StepFns.shard_batch`. `valid_vocab`
    (the tokenizer's size) keeps the model's padded embedding rows out of every log-softmax, as
    the sampler does. `frozen`: the frozen base of a LoRA model (BoundModel.frozen_of; arrays, or
    ShapeDtypeStructs to lower), passed to every call. `load_balance_weight`: a Qwen3-MoE's
    load-balance loss added to both losses times it (b2tjax/step/router.py; 0: none).
    """
    grpo_loss = functools.partial(
        _grpo_micro_loss, model_fn, grpo_cfg, valid_vocab, load_balance_weight, temperature=temperature
    )
    sft_loss = functools.partial(
        _sft_micro_loss, model_fn, grpo_cfg.logprob_chunk, valid_vocab, load_balance_weight, temperature=1.0
    )

    def grpo_step(state: TrainState, batch: TrainBatch, frozen: Params):
        norm = grpo.batch_normaliser(batch.mask, fixed_length, batch.segment_ids)
        loss, grads, stats = accumulate_scan(grpo_loss, state.params, batch, norm, frozen)
        return update(optimizer, schedule, state, loss, grads, stats)

    def sft_step(state: TrainState, batch: TrainBatch, frozen: Params):
        norm = grpo.batch_normaliser(batch.mask, fixed_length)
        loss, grads, stats = accumulate_scan(sft_loss, state.params, batch, norm, frozen)
        return update(optimizer, schedule, state, loss, grads, stats)

    logprobs = functools.partial(
        _logprob_pass,
        model_fn,
        dict(temperature=temperature, chunk_size=grpo_cfg.logprob_chunk, valid_vocab=valid_vocab),
    )
    jit_step, jit_lp = _jitters(state_sharding, mesh), _jit_logprobs(logprobs, state_sharding, mesh)
    split = split_step(optimizer, schedule, state_sharding, mesh)
    return StepFns(
        grpo_step=WithFrozen(on_mesh(jit_step(grpo_step), mesh), frozen),
        sft_step=WithFrozen(on_mesh(jit_step(sft_step), mesh), frozen),
        logprobs=WithFrozen(on_mesh(jit_lp, mesh), frozen, arity=4),
        mesh=mesh,
        grpo_grad=WithFrozen(split.grad(grpo_loss), frozen),
        sft_grad=WithFrozen(split.grad(sft_loss), frozen),
        apply=split.apply,
        zero_grads=split.zeros,
        fixed_length=fixed_length,
    )


def _jitters(state_sharding: Any, mesh: Mesh | None) -> Callable:
    """f -> f jitted as a train step: the state donated, its layout pinned in and out on a mesh."""
    if state_sharding is None:
        return lambda f: jax.jit(f, donate_argnums=(0,))
    replicated = NamedSharding(mesh, PartitionSpec())
    return lambda f: jax.jit(
        f,
        in_shardings=(state_sharding, None, None),
        out_shardings=(state_sharding, replicated),
        donate_argnums=(0,),
    )


def _jit_logprobs(logprobs: Callable, state_sharding: Any, mesh: Mesh | None) -> Callable:
    """The log-prob pass, its output replicated: every process reads all rows with np.asarray, the
    gather done by XLA inside the program (no host-level collective a process could skip)."""
    if state_sharding is None:
        return jax.jit(logprobs)
    replicated = NamedSharding(mesh, PartitionSpec())
    return jax.jit(
        logprobs, in_shardings=(state_sharding.params, None, None, None, None), out_shardings=replicated
    )


def _logprob_pass(
    model_fn: BoundModel,
    kw: dict,
    params: Params,
    ids: jax.Array,
    positions: jax.Array | None,
    segments: tuple[Any, ...] | None,
    frozen: Params,
) -> jax.Array:
    """Per-token log-probs [micro, rows, T] of micro-batched `ids` (zero where `positions` skips);
    `segments`: packed rows' (segment_ids, token_positions, routes: `TrainBatch.segments`)."""

    def body(_, micro):
        model = model_fn(params, frozen)  # built inside the scan body: NNX forbids crossing trace levels
        micro_ids, micro_positions, micro_segments = micro
        if micro_positions is None:
            return None, lps.sequence_logprobs(model, micro_ids, segments=micro_segments, **kw)[0]
        lp, _ = lps.position_logprobs(model, micro_ids, micro_positions, segments=micro_segments, **kw)
        return None, lps.spread_positions(lp, micro_positions, micro_ids.shape[1])

    return jax.lax.scan(body, None, (ids, positions, segments))[1]


class WithFrozen:
    """A jitted function called (and lowered, for launch/plan.py) with the frozen base appended to
    its arguments, so callers keep the signatures of full fine-tuning. With `arity`, arguments
    left off at the end (optional ones, such as the log-prob pass's segments) are None."""

    def __init__(self, fn: Callable, frozen: Params | None, arity: int = 0):
        self.fn, self.frozen, self.arity = fn, {} if frozen is None else frozen, arity

    def _args(self, args: tuple) -> tuple:
        return (*args, *[None] * (self.arity - len(args)), self.frozen)

    def __call__(self, *args):
        return self.fn(*self._args(args))

    def lower(self, *args):
        return self.fn.lower(*self._args(args))
