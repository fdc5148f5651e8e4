"""KV cache with a fill length per batch row (rows of a batch sit at different positions).

The cache is one stacked array per K and V, [L, B, KVH, S, D]: slots next to the head dimension,
the layout the attention's block reads want. With [L, B, S, KVH, D] the TPU and CUDA compilers
chose that layout inside the prefill and decode loops anyway and transposed the whole donated
cache into it and back around them: a temporary copy of K or V (or both) of the cache's size (on a
v5p-32 the 8B prefill at 192 rows needed 27 GiB for it). A cached forward threads it
through the layer scan as loop *carry* (never as scanned input/output, which would copy all of it
every call): each layer scatters its new keys/values into the slots of this call and attention
reads the cache block by block, only up to the longest filled row. Under `jit` with the cache
donated (or carried by a `while_loop`), XLA updates the buffer in place, so a decode step costs
what the live tokens cost, whatever the allocated length S.

Attention reads the cache in blocks of `cache_block` slots (model argument, default 512). Callers
must donate the cache to their jit (or carry it in a loop), as `rollout.programs` and
`models.greedy` do, for the update to happen in place; `forward_cached(..., rows=)` extends only the
given rows, so a prefill of a few rows neither gathers nor copies the others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import struct
from jax.sharding import Mesh, NamedSharding

from models.config import Qwen3Config
from models.sharding import constrain, logical_to_spec

F32 = jnp.float32

# Logical axes of KVCache.k / .v: batch over (data, fsdp), KV heads over tensor.
CACHE_AXES = ("layers", "batch", "act_kv_heads", "cache_seq", "head_dim")


@struct.dataclass
class KVCache:
    """k, v: [L, B, KVH, S, D]; lengths: [B] int32 = filled slots (slots >= length are unwritten)."""

    k: jax.Array
    v: jax.Array
    lengths: jax.Array

    @property
    def max_len(self) -> int:
        return self.k.shape[3]

    @property
    def batch_size(self) -> int:
        return self.k.shape[1]

    def row_pages(self, rows: jax.Array | None) -> None:
        """No page tables: slots are the row's own (see models/paged_kv.py for the paged cache)."""
        return None


class CachedCall(NamedTuple):
    """What every layer of one cached forward shares. R = rows of this call (<= cache rows B)."""

    positions: jax.Array  # [R, T] int32: position (= cache slot) of each new token
    filled: jax.Array  # [R] int32: slots written once this call is done
    slots: jax.Array  # [R, T] int32: where each new token is written (S = dropped)
    rows: jax.Array | None  # [R] int32 cache row of each call row; None = all rows, in order
    pages: jax.Array | None = None  # paged cache: [R, pages per row] int32 page table of the call's rows


def init_cache(
    cfg: Qwen3Config, batch: int, max_len: int, dtype: Any = jnp.float32, mesh: Mesh | None = None
) -> KVCache:
    """An empty cache for `batch` rows of up to `max_len` tokens each; with `mesh`, created sharded
    (rows over data x fsdp x expert, KV heads over tensor, where they divide)."""
    if batch <= 0 or max_len <= 0:
        raise ValueError(f"cache batch and max_len must be positive, got batch={batch} max_len={max_len}")
    shape = (cfg.num_hidden_layers, batch, cfg.num_key_value_heads, max_len, cfg.head_dim)

    def empty() -> KVCache:
        return KVCache(
            k=jnp.zeros(shape, dtype), v=jnp.zeros(shape, dtype), lengths=jnp.zeros((batch,), jnp.int32)
        )

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


def write_layer(cache: jax.Array, layer: jax.Array, new: jax.Array, call: CachedCall) -> jax.Array:
    """cache [L, B, KVH, S, D] with new [R, T, KVH, D] written at (layer, row, head, slot): a scatter
    that touches only the new slots (mode='drop' skips padding tokens and anything past the end).
    A paged cache (`call.pages` set) is written by models/paged_kv.py `write_pages` instead."""
    r, t = call.slots.shape
    kvh = cache.shape[2]
    rows = jnp.arange(r, dtype=jnp.int32) if call.rows is None else call.rows
    rows = jnp.broadcast_to(rows[:, None, None], (r, t, kvh))
    heads = jnp.broadcast_to(jnp.arange(kvh, dtype=jnp.int32), (r, t, kvh))
    slots = jnp.broadcast_to(call.slots[:, :, None], (r, t, kvh))
    # One scatter, not a dynamic_update_slice per row: every row writes at its own position (rows
    # are at different lengths under continuous batching), and padding tokens must not overwrite a
    # live slot, which the out-of-range slot index plus mode="drop" guarantees without a branch.
    # The caller donates the cache, so XLA writes these few slots into the existing buffer: a
    # functional update that copied [L, B, KVH, S, D] per step would cost the whole cache per token.
    # Heads are indexed too, so each update is one head's D values: with the heads as a window
    # the TPU compiler copies the whole cache per layer into a layout where (KVH, D) is contiguous.
    updated = cache.at[layer, rows, heads, slots].set(new.astype(cache.dtype), mode="drop")
    return constrain(updated, CACHE_AXES)


def _read_block(
    cache: jax.Array, layer: jax.Array, start: jax.Array, size: int, rows: jax.Array | None
) -> jax.Array:
    """Slots [start, start + size) of one layer, [R, KVH, size, D]: a slice, never the whole cache."""
    _, b, kvh, _, d = cache.shape
    block = jax.lax.dynamic_slice(cache, (layer, 0, 0, start, 0), (1, b, kvh, size, d))[0]
    return block if rows is None else block[rows]


def _visible_slots(
    call: CachedCall, start: jax.Array, i: jax.Array, size: int, window: int | None
) -> jax.Array:
    """Which slots of key block `i` (read from `start`) each query sees, bool [R, T, size]: those
    not covered by an earlier block (the clamped last block overlaps them), at or before the
    query's position, already filled, and, with `window`, inside the query's window."""
    slot = start + jnp.arange(size, dtype=jnp.int32)
    visible = (
        (slot[None, None, :] >= i * size)
        & (slot[None, None, :] <= call.positions[:, :, None])
        & (slot[None, None, :] < call.filled[:, None, None])
    )  # [R, T, size]
    if window is not None:
        visible &= slot[None, None, :] > call.positions[:, :, None] - window
    return visible


def cached_attention(
    q: jax.Array,
    k_cache: jax.Array,
    v_cache: jax.Array,
    layer: jax.Array,
    call: CachedCall,
    block: int,
    window: int | None = None,
) -> jax.Array:
    """GQA of q [R, T, NH, D] over one layer of the cache, in key blocks with an online softmax.

    Only blocks below the longest filled row are read (a while loop with a data-dependent trip
    count), so the cost follows the live length, not the allocated one. Query t of row r sees
    slot s iff s <= positions[r, t] and s < filled[r] (and, with `window`, s > positions[r, t] -
    window: blocks wholly below every query's window are not read either). Scores, the running
    max and the running sum are fp32; a fully masked query gets a uniform average (finite mask
    value), never NaN. A paged cache (`call.pages` set) is read by models/paged_kv.py
    `paged_attention_reference` instead, through the rows' page tables.
    """
    s = k_cache.shape[3]
    size = min(block, s)

    def read(start: jax.Array) -> tuple[jax.Array, jax.Array]:
        return (
            _read_block(k_cache, layer, start, size, call.rows),
            _read_block(v_cache, layer, start, size, call.rows),
        )

    return blocked_attention(q, read, k_cache.shape[2], s, size, call, window)


def blocked_attention(
    q: jax.Array,
    read: Callable[[jax.Array], tuple[jax.Array, jax.Array]],
    kvh: int,
    s: int,
    size: int,
    call: CachedCall,
    window: int | None = None,
) -> jax.Array:
    """The online softmax of `cached_attention` over key blocks of `size` slots of a row's `s`
    (logical) slots; `read(start)` returns the keys and values of slots [start, start + size) of
    the call's rows, each [R, KVH, size, D]. Shared by the contiguous and the paged cache, so both
    do the same arithmetic in the same order on the same blocks."""
    r, t, nh, d = q.shape
    g = nh // kvh
    qg = q.reshape(r, t, kvh, g, d)
    neg = jnp.finfo(F32).min
    num_blocks = jnp.maximum((jnp.max(call.filled) + size - 1) // size, 1)
    first_block = 0
    if window is not None:  # the oldest slot any query here still sees decides the first block
        first_block = jnp.minimum(
            jnp.maximum(jnp.min(call.positions) - window + 1, 0) // size, num_blocks - 1
        )

    def body(i, carry):
        run_max, run_sum, acc = carry  # [R, KVH, G, T], [R, KVH, G, T], [R, KVH, G, T, D]
        # The last block is clamped to end at S; slots an earlier block already covered are masked.
        start = jnp.minimum(i * size, s - size)
        keys, values = read(start)
        keys, values = keys.astype(q.dtype), values.astype(q.dtype)
        scores = jnp.einsum("rtkgd,rksd->rkgts", qg, keys, preferred_element_type=F32) * (d**-0.5)
        visible = _visible_slots(call, start, i, size, window)
        scores = jnp.where(visible[:, None, None], scores, neg)
        new_max = jnp.maximum(run_max, scores.max(axis=-1))
        correction = jnp.exp(run_max - new_max)
        probs = jnp.exp(scores - new_max[..., None])
        run_sum = run_sum * correction + probs.sum(axis=-1)
        update = jnp.einsum("rkgts,rksd->rkgtd", probs.astype(q.dtype), values, preferred_element_type=F32)
        return new_max, run_sum, acc * correction[..., None] + update

    init = (
        jnp.full((r, kvh, g, t), neg, F32),
        jnp.zeros((r, kvh, g, t), F32),
        jnp.zeros((r, kvh, g, t, d), F32),
    )
    _, run_sum, acc = jax.lax.fori_loop(first_block, num_blocks, body, init)
    out = acc / run_sum[..., None]  # [R, KVH, G, T, D]
    return out.transpose(0, 3, 1, 2, 4).reshape(r, t, nh, d).astype(q.dtype)
