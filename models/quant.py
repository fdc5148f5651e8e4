"""Frozen int8 base weights for QLoRA: symmetric per-output-channel quantization, dequantized on the
fly in the forward pass.

A quantized projection keeps its name and logical axes with an int8 value, plus `<name>_scale`
(the compute dtype, the contracted input dims kept as size 1, so it broadcasts over the weight
both stacked [L, ...] and inside the layer scan). int8 -> bf16 is exact (|q| <= 127 fits bf16's
8-bit significand), so the dequantized weight is q * scale rounded once, in the compute dtype,
identically in the trainer and the sampler. Embeddings and the LM head stay unquantized.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from models.sharding import variable_sharding


def quantize_int8(w: jax.Array, axes: Sequence[int]) -> tuple[jax.Array, jax.Array]:
    """(int8 q, fp32 scale) with w ~ q * scale; the scale is max|w| / 127 over `axes` (kept)."""
    w32 = w.astype(jnp.float32)
    scale = jnp.max(jnp.abs(w32), axis=tuple(axes), keepdims=True) / 127.0
    scale = jnp.where(scale > 0, scale, 1.0)  # an all-zero channel: any scale reproduces it
    return jnp.clip(jnp.round(w32 / scale), -127, 127).astype(jnp.int8), scale


def is_quantized(module: nnx.Module, name: str) -> bool:
    return getattr(module, f"{name}_scale", None) is not None


def read(module: nnx.Module, name: str, dtype: Any) -> jax.Array:
    """Weight `name` of `module` in `dtype`: dequantized when it is stored as int8."""
    w = getattr(module, name)[...]
    scale = getattr(module, f"{name}_scale", None)
    if scale is None:
        return w.astype(dtype)
    return w.astype(dtype) * scale[...].astype(dtype)


def quantize_weight(module: nnx.Module, name: str, n_in: int, dtype: Any, mesh: Mesh | None) -> None:
    """Store stacked weight `name` [L, *in, *out] of `module` as int8 plus a `dtype` scale, in place.
    Works under `nnx.eval_shape`; with `mesh`, both are placed by their logical names."""

    base = getattr(module, name)
    names = base.get_metadata()["out_sharding"]
    axes = tuple(range(1, 1 + n_in))
    q, scale = quantize_int8(base[...], axes)
    scale_names = tuple(None if i in axes else n for i, n in enumerate(names))
    scale_var = nnx.Param(scale.astype(dtype), out_sharding=scale_names, eager_sharding=False)
    q_var = base.replace(q)
    if mesh is not None and isinstance(q, jax.Array):
        q_var = q_var.replace(jax.device_put(q, variable_sharding(q_var, mesh)))
        scale_var = scale_var.replace(jax.device_put(scale_var[...], variable_sharding(scale_var, mesh)))
    setattr(module, name, q_var)
    setattr(module, f"{name}_scale", scale_var)


def drop(module: nnx.Module, name: str) -> None:
    """Forget the scale of `name` (its value must be replaced by a dense one by the caller)."""
    if is_quantized(module, name):
        delattr(module, f"{name}_scale")
