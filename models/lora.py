"""LoRA adapters on the Qwen3 projections: y = x W + (alpha / r) (x A) B, with W frozen.

The adapters are `nnx.LoRAParam`s (a subclass of `nnx.Param`) set on the stacked decoder layer as
`<target>_lora_a` / `<target>_lora_b`, so they ride the layer scan with a leading [L] axis like
every other layer weight. A takes the base weight's input dims, B its output dims, each with the
base's logical axis names and a replicated rank axis ("lora_rank"): the mesh rules shard them like
the weight they adapt. B starts at zero (the adapted model is the base model exactly), A with
PEFT's default (Kaiming-uniform, bound 1 / sqrt(fan_in)).

We attach our own adapters instead of using qwix (docs/guides/lora.md says why).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from models import quant
from models.settings import ATTENTION_TARGETS, TARGETS, LoraConfig
from models.sharding import variable_sharding


def module_of(model: nnx.Module, target: str) -> nnx.Module:
    """The stacked layer module holding `target` (attention or MLP)."""
    return model.layers.attn if target in ATTENTION_TARGETS else model.layers.mlp


def in_dims(target: str) -> int:
    """How many leading (per-layer) dims of the weight are contracted with the input."""
    return 2 if target == "o_proj" else 1  # o_proj is [heads, head_dim, embed]


def add_lora(model: nnx.Module, cfg: LoraConfig, seed: int = 0, mesh: Mesh | None = None) -> nnx.Module:
    """Attach fp32 adapters (B = 0) to `cfg.targets` of `model` in place; returns the model.
    With `mesh`, each adapter is placed by its logical names. Works under `nnx.eval_shape`."""

    if not cfg.enabled:
        return model
    if model.config.moe is not None:  # adapters would miss dense_layers and misread stacked experts
        raise ValueError("LoRA on a Qwen3-MoE model is not supported yet: train it with model.lora.rank 0")
    key = jax.random.key(seed)
    for i, target in enumerate(cfg.targets):
        module = module_of(model, target)
        base = getattr(module, target)
        names = base.get_metadata()["out_sharding"]
        n_in = in_dims(target)
        layers, ins, outs = base.shape[0], base.shape[1 : 1 + n_in], base.shape[1 + n_in :]
        bound = 1.0 / math.sqrt(math.prod(ins))
        a = jax.random.uniform(
            jax.random.fold_in(key, i), (layers, *ins, cfg.rank), jnp.float32, -bound, bound
        )
        b = jnp.zeros((layers, cfg.rank, *outs), jnp.float32)
        a_names = (names[0], *names[1 : 1 + n_in], "lora_rank")
        b_names = (names[0], "lora_rank", *names[1 + n_in :])
        for suffix, value, axes in (("a", a, a_names), ("b", b, b_names)):
            var = nnx.LoRAParam(value, out_sharding=axes, eager_sharding=False)
            if mesh is not None and isinstance(value, jax.Array):
                var = var.replace(jax.device_put(value, variable_sharding(var, mesh)))
            setattr(module, f"{target}_lora_{suffix}", var)
        module.lora_scale = cfg.scale
    return model


def quantize_base(model: nnx.Module, mesh: Mesh | None = None) -> nnx.Module:
    """QLoRA's frozen base: every projection (all of TARGETS) stored int8 in place; returns the model."""
    for target in TARGETS:
        quant.quantize_weight(module_of(model, target), target, in_dims(target), model.dtype, mesh)
    return model


def has_lora(model: nnx.Module) -> bool:
    return bool(jax.tree.leaves(nnx.state(model, nnx.LoRAParam)))


def apply(module: nnx.Module, name: str, x: jax.Array, y: jax.Array) -> jax.Array:
    """`y` (= x W of projection `name`) plus its adapter's (alpha / r) (x A) B, if it has one."""
    a = getattr(module, f"{name}_lora_a", None)
    if a is None:
        return y
    dtype = y.dtype
    a = a[...].astype(dtype)
    b = getattr(module, f"{name}_lora_b")[...].astype(dtype)
    h = jnp.tensordot(x.astype(dtype), a, axes=a.ndim - 1) * jnp.asarray(module.lora_scale, dtype)
    return y + jnp.tensordot(h, b, axes=1)


def delta(a: jax.Array, b: jax.Array, scale: float) -> jax.Array:
    """The dense weight update (alpha / r) A B of stacked adapters [L, *in, r] and [L, r, *out],
    fp32, shaped like the weight [L, *in, *out]."""
    layers, rank = a.shape[0], a.shape[-1]
    a2 = a.astype(jnp.float32).reshape(layers, -1, rank)
    b2 = b.astype(jnp.float32).reshape(layers, rank, -1)
    return scale * jnp.einsum("lir,lro->lio", a2, b2).reshape(a.shape[:-1] + b.shape[2:])


def merge_lora(model: nnx.Module) -> nnx.Module:
    """Fold every adapter into its base weight in place (W + (alpha / r) A B, in fp32, stored back in
    the base's dtype; an int8 base is dequantized to the compute dtype, with or without an adapter)
    and drop the adapters: a plain Qwen3 model again. Returns the model."""
    for target in TARGETS:
        module = module_of(model, target)
        a = getattr(module, f"{target}_lora_a", None)
        quantized = quant.is_quantized(module, target)
        if a is None and not quantized:
            continue
        dense = quant.read(module, target, jnp.float32)
        dtype = module.dtype if quantized else getattr(module, target).dtype
        quant.drop(module, target)
        if a is not None:
            dense = dense + delta(a[...], getattr(module, f"{target}_lora_b")[...], module.lora_scale)
            delattr(module, f"{target}_lora_a")
            delattr(module, f"{target}_lora_b")
        setattr(module, target, getattr(module, target).replace(dense.astype(dtype)))
    return model


def adapter_config(model: nnx.Module) -> dict[str, Any]:
    """rank, alpha and targets of the adapters on `model` (as they were attached)."""
    targets = [t for t in TARGETS if getattr(module_of(model, t), f"{t}_lora_a", None) is not None]
    if not targets:
        return {}
    first = module_of(model, targets[0])
    rank = getattr(first, f"{targets[0]}_lora_a").shape[-1]
    return {"rank": rank, "alpha": first.lora_scale * rank, "targets": targets}


def as_config(saved: dict) -> LoraConfig:
    """A LoraConfig from a saved `model.lora` mapping (unknown keys are ignored)."""
    names = {f.name for f in dataclasses.fields(LoraConfig)}
    return LoraConfig(**{k: v for k, v in saved.items() if k in names})
