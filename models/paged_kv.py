"""A paged KV cache: one pool of fixed-size pages per layer stack, and a page table per row.

Why: the contiguous cache (models/kv_cache.py) gives every row `max_len` slots from its first
token, so a batch holds rows x max_len however short its streams are. Here a row holds only the
pages its tokens fill (the host allocates them: rollout/pages.py), and rows that share a prefix (a
GRPO group's prompt) point at the same pages. Slot s of row b lives in page `pages[b, s //
page_size]` at offset `s % page_size`; the logical slots, positions and masks are those of the
contiguous cache, so attention does the same arithmetic on the same key blocks (one online softmax,
`models.kv_cache.blocked_attention`): only where a block's keys are read from differs.

Layout: k, v [L, NS, KVH, P, page_size, D], NS = the shards the rows are split into (data x fsdp x expert
on a mesh, 1 without), P pages per shard: the pages of a shard live on that shard's devices with
its rows, and a row's table holds page numbers of its own shard. Per layer and shard a pool is
[KVH, P, page_size, D], the TPU paged-attention kernel's own layout (models/paged_kernel.py), and
the whole local pool reshapes to its page axis for free. Reads and writes are `vmap`ped over NS, so
they are gathers and scatters with a batch dimension the SPMD partitioner keeps local (no page
crosses devices). KV heads are split over `tensor` like the contiguous cache's. Table entries of
pages a row does not hold are P (out of range): writes there are dropped, reads clamped and masked
by the row's fill length.

This is the reference (gather) path every platform can run and every prefill chunk takes; a
decode step in a program for a TPU reads the pool by JAX's Pallas paged-attention kernel instead
(models/paged_kernel.py, `paged_attention=` of the model).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct
from jax.sharding import Mesh, NamedSharding

from models.config import Qwen3Config
from models.kv_cache import CachedCall, blocked_attention
from models.sharding import constrain, logical_to_spec

# Logical axes of PagedKVCache.k / .v: the pool's shards over (data, fsdp), KV heads over tensor.
PAGE_AXES = ("layers", "batch", "act_kv_heads", None, None, "head_dim")


@struct.dataclass
class PagedKVCache:
    """k, v: [L, NS, KVH, P, page_size, D]; lengths [B] int32 filled slots per row; pages
    [B, pages_per_row] int32: the page (in the row's shard) holding each run of page_size slots."""

    k: jax.Array
    v: jax.Array
    lengths: jax.Array
    pages: jax.Array

    @property
    def page_size(self) -> int:
        return self.k.shape[4]

    @property
    def max_len(self) -> int:
        """Logical slots per row (a whole number of pages)."""
        return self.pages.shape[1] * self.page_size

    @property
    def batch_size(self) -> int:
        return self.pages.shape[0]

    def row_pages(self, rows: jax.Array | None) -> jax.Array:
        """The page tables of a call's rows (all rows in order for None)."""
        return self.pages if rows is None else self.pages[rows]


def row_shards(mesh: Mesh | None, rows: int) -> int:
    """How many shards `rows` cache rows are split into on `mesh` (data x fsdp x expert where they divide)."""
    if mesh is None:
        return 1
    spec = logical_to_spec(("batch",), (rows,), dict(mesh.shape))[0]
    axes = () if spec is None else (spec,) if isinstance(spec, str) else spec
    return math.prod(mesh.shape[a] for a in axes)


def init_paged_cache(
    cfg: Qwen3Config,
    batch: int,
    max_len: int,
    page_size: int,
    num_pages: int,
    dtype: Any = jnp.float32,
    mesh: Mesh | None = None,
) -> PagedKVCache:
    """An empty pool of `num_pages` pages (split evenly over the row shards) for `batch` rows of up
    to `max_len` tokens; every table entry is unallocated."""
    shards = row_shards(mesh, batch)
    if batch <= 0 or max_len <= 0 or page_size <= 0:
        raise ValueError(
            f"paged cache needs positive batch, max_len, page_size; got {batch}, {max_len}, {page_size}"
        )
    if num_pages % shards:
        raise ValueError(f"rollout.kv_pages ({num_pages}) must be a multiple of the row shards ({shards})")
    per_shard = num_pages // shards
    per_row = -(-max_len // page_size)
    shape = (cfg.num_hidden_layers, shards, cfg.num_key_value_heads, per_shard, page_size, cfg.head_dim)

    def empty() -> PagedKVCache:
        return PagedKVCache(
            k=jnp.zeros(shape, dtype),
            v=jnp.zeros(shape, dtype),
            lengths=jnp.zeros((batch,), jnp.int32),
            pages=jnp.full((batch, per_row), per_shard, jnp.int32),
        )

    if mesh is None:
        return empty()
    mesh_shape = dict(mesh.shape)
    kv = NamedSharding(mesh, logical_to_spec(PAGE_AXES, shape, mesh_shape))
    rows = NamedSharding(mesh, logical_to_spec(("batch",), (batch,), mesh_shape))
    table = NamedSharding(mesh, logical_to_spec(("batch", None), (batch, per_row), mesh_shape))
    return jax.jit(empty, out_shardings=PagedKVCache(k=kv, v=kv, lengths=rows, pages=table))()


def _by_shard(x: jax.Array, shards: int) -> jax.Array:
    """[R, ...] -> [NS, R / NS, ...]: rows are split over the shards in order."""
    return x.reshape((shards, x.shape[0] // shards) + x.shape[1:])


def _check_rows(call: CachedCall, shards: int) -> None:
    if call.rows is not None and shards != 1:
        raise ValueError("a paged call on sharded rows must extend every row in order (rows=None)")


def write_pages(pool: jax.Array, layer: jax.Array, new: jax.Array, call: CachedCall) -> jax.Array:
    """pool [L, NS, KVH, P, ps, D] with new [R, T, KVH, D] written at each token's (page, offset):
    one scatter per shard (vmapped), only the new slots; padding tokens (slot = max_len) and table
    entries P are dropped."""
    _, shards, kvh, per_shard, ps, _ = pool.shape
    _check_rows(call, shards)
    per_row = call.pages.shape[1]
    slot = call.slots  # [R, T]; max_len marks a padding token
    page = jnp.take_along_axis(call.pages, jnp.minimum(slot // ps, per_row - 1), axis=1)
    page = jnp.where(slot < per_row * ps, page, per_shard)
    offset = slot % ps

    def one(pool_n: jax.Array, page_n: jax.Array, offset_n: jax.Array, new_n: jax.Array) -> jax.Array:
        shape = page_n.shape + (kvh,)
        heads = jnp.broadcast_to(jnp.arange(kvh, dtype=jnp.int32), shape)
        pages = jnp.broadcast_to(page_n[..., None], shape)
        offsets = jnp.broadcast_to(offset_n[..., None], shape)
        return pool_n.at[layer, heads, pages, offsets].set(new_n.astype(pool_n.dtype), mode="drop")

    args = (_by_shard(page, shards), _by_shard(offset, shards), _by_shard(new, shards))
    updated = jax.vmap(one, in_axes=(1, 0, 0, 0), out_axes=1)(pool, *args)
    return constrain(updated, PAGE_AXES)


def gather_pages(pool: jax.Array, layer: jax.Array, table: jax.Array) -> jax.Array:
    """Pages `table` [R, n] of one layer, as slots: [R, KVH, n * ps, D] (a gather per shard)."""
    _, shards, kvh, _, ps, d = pool.shape
    r, n = table.shape

    def one(pool_n: jax.Array, table_n: jax.Array) -> jax.Array:
        # the two index arrays around the head slice lead the result (NumPy's rule)
        return pool_n.at[layer, :, table_n].get(mode="clip")  # [R / NS, n, KVH, ps, D]

    got = jax.vmap(one, in_axes=(1, 0))(pool, _by_shard(table, shards)).reshape(r, n, kvh, ps, d)
    return got.transpose(0, 2, 1, 3, 4).reshape(r, kvh, n * ps, d)


def key_block(block: int, page_size: int, pages_per_row: int) -> int:
    """Pages per key block: `block` slots rounded down to whole pages, at least one, at most a row."""
    return max(1, min(block // page_size, pages_per_row))


def paged_attention_reference(
    q: jax.Array,
    k_pool: jax.Array,
    v_pool: jax.Array,
    layer: jax.Array,
    call: CachedCall,
    block: int,
    window: int | None = None,
) -> jax.Array:
    """`cached_attention` over a paged cache: the same key blocks (of whole pages), each gathered
    through the call rows' page tables. Only blocks below the longest filled row are read."""
    _, shards, kvh, _, ps, _ = k_pool.shape
    _check_rows(call, shards)
    per_row = call.pages.shape[1]
    n = key_block(block, ps, per_row)

    def read(start: jax.Array) -> tuple[jax.Array, jax.Array]:
        table = jax.lax.dynamic_slice_in_dim(call.pages, start // ps, n, axis=1)  # [R, n]
        return gather_pages(k_pool, layer, table), gather_pages(v_pool, layer, table)

    return blocked_attention(q, read, kvh, per_row * ps, n * ps, call, window)


def copy_pages(
    cache: PagedKVCache,
    src: jax.Array,
    dst: jax.Array,
    count: jax.Array,
    rows: jax.Array,
    lengths: jax.Array,
) -> PagedKVCache:
    """Copy whole pages src[i] -> dst[i] (int32 [N, 2]: (shard, page); the first `count` pairs) in
    every layer, and set the fill length of rows[i] to lengths[i] (rows = B: padding, dropped).

    How a row takes a prefix it shares with another: full pages are shared through the page
    table (the host's job), only a partly filled last page is copied here (copy on write: the
    row's next token goes to a page of its own), or every page when the rows sit on different
    shards. Slots of a copied page past the prefix hold the source's tokens, masked by the
    destination's fill length until it overwrites them."""

    def one(i: jax.Array, kv: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        def move(x: jax.Array) -> jax.Array:
            size = (x.shape[0], 1, x.shape[2], 1) + x.shape[4:]  # [L, 1, KVH, 1, ps, D]
            page = jax.lax.dynamic_slice(x, (0, src[i, 0], 0, src[i, 1], 0, 0), size)
            return jax.lax.dynamic_update_slice(x, page, (0, dst[i, 0], 0, dst[i, 1], 0, 0))

        return move(kv[0]), move(kv[1])

    k, v = jax.lax.fori_loop(0, count, one, (cache.k, cache.v))
    return cache.replace(k=k, v=v, lengths=cache.lengths.at[rows].set(lengths, mode="drop"))
