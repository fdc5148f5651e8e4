"""LoRA adapters on the Qwen3 projections: y = x W + (alpha / r) (x A) B, with W frozen.

The adapters are `nnx.LoRAParam`s (a subclass of `nnx.Param`) set on the stacked decoder layer as
`<target>_lora_a` / `<target>_lora_b`, so they ride the layer scan with a leading [L] axis like
every other layer weight. A takes the base weight's input dims, B its output dims, each with the
base's logical axis names and a replicated rank axis ("lora_rank"): the mesh rules shard them like
the weight they adapt. B starts at zero (the adapted model is the base model exactly), A with
PEFT's default (Kaiming-uniform, bound 1 / sqrt(fan_in)).

On a Qwen3-MoE model the MLP targets adapt every expert: the stacked expert weights [L, E, in, out]
get per-expert factors A [L, E, in, r] and B [L, E, r, out], sharded with the experts and applied
inside the expert computation (models/moe.py); the router is never adapted. Layers that keep a
dense MLP (`dense_layers`) are adapted as dense Qwen3's.

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


def modules_of(model: nnx.Module, target: str) -> list[tuple[str, nnx.Module]]:
    """(stack name, module) of each layer stack's module holding `target` (attention or MLP):
    `layers`, and a Qwen3-MoE model's `dense_layers` when it has some (models/stacks.py)."""
    stacks = ["layers"] + (["dense_layers"] if hasattr(model, "dense_layers") else [])
    part = "attn" if target in ATTENTION_TARGETS else "mlp"
    return [(name, getattr(getattr(model, name), part)) for name in stacks]


def in_dims(target: str) -> int:
    """How many dims of the weight after its leading ones are contracted with the input."""
    return 2 if target == "o_proj" else 1  # o_proj is [heads, head_dim, embed]


def lead_dims(base: nnx.Variable) -> int:
    """The leading dims of a stacked weight that its adapter keeps apart: [L], or [L, E] for experts."""
    names = base.get_metadata()["out_sharding"]
    return 2 if names[1] == "expert" else 1


def check_moe_targets(targets: list[str]) -> None:
    """Refuse, in one line, expert targets that transformers' fused experts cannot carry."""
    if len({"gate_proj", "up_proj"} & set(targets)) == 1:
        raise ValueError(
            f"model.lora.targets {list(targets)}: on a Qwen3-MoE model gate_proj and up_proj are adapted "
            "together or not at all (transformers fuses them into the experts' gate_up_proj)"
        )


def add_lora(model: nnx.Module, cfg: LoraConfig, seed: int = 0, mesh: Mesh | None = None) -> nnx.Module:
    """Attach fp32 adapters (B = 0) to `cfg.targets` of `model` in place; returns the model.
    With `mesh`, each adapter is placed by its logical names. Works under `nnx.eval_shape`."""

    if not cfg.enabled:
        return model
    if model.config.moe is not None:
        check_moe_targets(cfg.targets)
    key = jax.random.key(seed)
    for i, target in enumerate(cfg.targets):
        for j, (_, module) in enumerate(modules_of(model, target)):
            _attach(module, target, cfg, jax.random.fold_in(key, i + len(TARGETS) * j), mesh)
    return model


def _attach(module: nnx.Module, target: str, cfg: LoraConfig, key: jax.Array, mesh: Mesh | None) -> None:
    """Set `target`'s adapters on `module`: A [*lead, *in, r] random, B [*lead, r, *out] zero."""
    base = getattr(module, target)
    names = base.get_metadata()["out_sharding"]
    lead, n_in = lead_dims(base), in_dims(target)
    ins = base.shape[lead : lead + n_in]
    bound = 1.0 / math.sqrt(math.prod(ins))
    a = jax.random.uniform(key, (*base.shape[:lead], *ins, cfg.rank), jnp.float32, -bound, bound)
    b = jnp.zeros((*base.shape[:lead], cfg.rank, *base.shape[lead + n_in :]), jnp.float32)
    a_names = (*names[: lead + n_in], "lora_rank")
    b_names = (*names[:lead], "lora_rank", *names[lead + n_in :])
    for suffix, value, axes in (("a", a, a_names), ("b", b, b_names)):
        var = nnx.LoRAParam(value, out_sharding=axes, eager_sharding=False)
        if mesh is not None and isinstance(value, jax.Array):
            var = var.replace(jax.device_put(value, variable_sharding(var, mesh)))
        setattr(module, f"{target}_lora_{suffix}", var)
    module.lora_scale = cfg.scale


def quantize_base(model: nnx.Module, mesh: Mesh | None = None) -> nnx.Module:
    """QLoRA's frozen base: every projection (all of TARGETS) stored int8 in place; returns the model."""
    if model.config.moe is not None:
        raise ValueError(
            "QLoRA (model.lora.quant: int8) on a Qwen3-MoE model is not supported: use quant none"
        )
    for target in TARGETS:
        module = modules_of(model, target)[0][1]  # a dense Qwen3: one stack
        quant.quantize_weight(module, target, in_dims(target), model.dtype, mesh)
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


def delta(a: jax.Array, b: jax.Array, scale: float, lead: int = 1) -> jax.Array:
    """The dense weight update (alpha / r) A B of stacked adapters [*lead, *in, r] and
    [*lead, r, *out] (`lead` dims: [L], or [L, E] for experts), fp32, shaped like the weight."""
    outer, rank = a.shape[:lead], a.shape[-1]
    a2 = a.astype(jnp.float32).reshape(*outer, -1, rank)
    b2 = b.astype(jnp.float32).reshape(*outer, rank, -1)
    return scale * jnp.einsum("...ir,...ro->...io", a2, b2).reshape(a.shape[:-1] + b.shape[lead + 1 :])


def merge_lora(model: nnx.Module) -> nnx.Module:
    """Fold every adapter into its base weight in place (W + (alpha / r) A B, in fp32, stored back in
    the base's dtype; an int8 base is dequantized to the compute dtype, with or without an adapter)
    and drop the adapters: a plain Qwen3 model again. Returns the model."""
    for target in TARGETS:
        for _, module in modules_of(model, target):
            _merge(module, target)
    return model


def _merge(module: nnx.Module, target: str) -> None:
    a = getattr(module, f"{target}_lora_a", None)
    quantized = quant.is_quantized(module, target)
    if a is None and not quantized:
        return
    base = getattr(module, target)
    dense = quant.read(module, target, jnp.float32)
    dtype = module.dtype if quantized else base.dtype
    quant.drop(module, target)
    if a is not None:
        b = getattr(module, f"{target}_lora_b")[...]
        dense = dense + delta(a[...], b, module.lora_scale, lead_dims(base))
        delattr(module, f"{target}_lora_a")
        delattr(module, f"{target}_lora_b")
    setattr(module, target, base.replace(dense.astype(dtype)))


def adapter_config(model: nnx.Module) -> dict[str, Any]:
    """rank, alpha and targets of the adapters on `model` (as they were attached)."""
    targets = [t for t in TARGETS if getattr(modules_of(model, t)[0][1], f"{t}_lora_a", None) is not None]
    if not targets:
        return {}
    first = modules_of(model, targets[0])[0][1]
    rank = getattr(first, f"{targets[0]}_lora_a").shape[-1]
    return {"rank": rank, "alpha": first.lora_scale * rank, "targets": targets}


def as_config(saved: dict) -> LoraConfig:
    """A LoraConfig from a saved `model.lora` mapping (unknown keys are ignored)."""
    names = {f.name for f in dataclasses.fields(LoraConfig)}
    return LoraConfig(**{k: v for k, v in saved.items() if k in names})
