"""KV cache with a fill length per batch row (rows of a batch sit at different positions)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from jax.sharding import Mesh, NamedSharding

from models.config import Qwen3Config
from models.sharding import constrain, logical_to_spec

# Logical axes of KVCache.k / .v: batch over (data, fsdp), KV heads over tensor.
CACHE_AXES = ("layers", "batch", "cache_seq", "act_kv_heads", "head_dim")


@struct.dataclass
class KVCache:
    """k, v: [L, B, S, KVH, D]; lengths: [B] int32 = number of filled slots (slots >= length are unwritten)."""

    k: jax.Array
    v: jax.Array
    lengths: jax.Array

    @property
    def max_len(self) -> int:
        return self.k.shape[2]

    @property
    def batch_size(self) -> int:
        return self.k.shape[1]


def init_cache(cfg: Qwen3Config, batch: int, max_len: int, dtype: Any = jnp.float32,
               mesh: Mesh | None = None) -> KVCache:
    """An empty cache for `batch` rows of up to `max_len` tokens each; with `mesh`, created sharded
    (rows over data x fsdp, KV heads over tensor, where they divide)."""
    if batch <= 0 or max_len <= 0:
        raise ValueError(f"cache batch and max_len must be positive, got batch={batch} max_len={max_len}")
    shape = (cfg.num_hidden_layers, batch, max_len, cfg.num_key_value_heads, cfg.head_dim)

    def empty() -> KVCache:
        return KVCache(k=jnp.zeros(shape, dtype), v=jnp.zeros(shape, dtype),
                       lengths=jnp.zeros((batch,), jnp.int32))

    if mesh is None:
        return empty()
    mesh_shape = dict(mesh.shape)
    kv = NamedSharding(mesh, logical_to_spec(CACHE_AXES, shape, mesh_shape))
    rows = NamedSharding(mesh, logical_to_spec(("batch",), (batch,), mesh_shape))
    return jax.jit(empty, out_shardings=KVCache(k=kv, v=kv, lengths=rows))()


def write_slots(positions: jax.Array, num_new: jax.Array, max_len: int) -> jax.Array:
    """Cache slot of each new token, [B, T] int32 (its position, [B, T]); tokens t >= num_new[b] get
    `max_len` (out of range), so a scatter with mode='drop' leaves those slots (and anything past the
    end) untouched."""
    t = jnp.arange(positions.shape[1], dtype=jnp.int32)[None, :]
    return jnp.where(t < num_new[:, None], positions, max_len)


def scatter_rows(cache_layer: jax.Array, new: jax.Array, slots: jax.Array) -> jax.Array:
    """cache_layer [B, S, KVH, D] with new [B, T, KVH, D] written at slots [B, T] (mode='drop')."""
    rows = jnp.broadcast_to(jnp.arange(new.shape[0], dtype=jnp.int32)[:, None], slots.shape)
    updated = cache_layer.at[rows, slots].set(new.astype(cache_layer.dtype), mode="drop")
    return constrain(updated, CACHE_AXES[1:])


def cached_attention_mask(positions: jax.Array, filled: jax.Array, max_len: int) -> jax.Array:
    """[B, T, S] bool: query t of row b (at positions[b, t] = lengths[b] + t) sees slot s iff s is
    written by the end of this call (s < filled[b] = lengths[b] + num_new[b]) and causal (s <= position)."""
    s = jnp.arange(max_len, dtype=jnp.int32)[None, None, :]
    return (s <= positions[:, :, None]) & (s < filled[:, None, None])
