"""A decode step's attention over the paged KV cache by JAX's Pallas TPU paged-attention kernel.

Why this kernel: JAX 0.10.2 ships two paged kernels for TPU. `ragged_paged_attention` (prefill and
decode in one call) does not run in Pallas interpret mode (the interpreter lacks ReshapeTransform),
so nothing on a CPU machine could test it; `paged_attention` (one query token per row: decode)
runs interpreted (`pltpu.force_tpu_interpret_mode`). So a decode step on TPU reads its pages with
`paged_attention`, and prefill chunks (several tokens a row) keep the gather path of
models/paged_kv.py (chunked prefill). On GPU and CPU every call takes the gather path (a GPU
kernel is not built).

What the kernel takes and how the pool meets it:
- q [B, Hq, D], k/v pages [KVH, pages, page_size, D], lengths [B] int32, page_indices [B, n]
  int32 with n divisible by `pages_per_compute_block`. It applies no softmax scale (q is scaled
  here, in fp32) and masks key slots >= lengths[b] only: a decode query at position p sees slots
  <= p = its row's fill length - 1, so causality is that mask (a sliding window is not supported:
  windowed models take the gather path).
- It loads a whole compute block of table entries whenever the block starts below the length, so
  entries past a row's last page are read: unallocated entries (P, out of range) are clamped to a
  real page (masked by the length).
- It casts the K/V it loads to bf16 (its loader dequantizes to bf16 when not quantized), so its
  keys equal the gather path's only for a bf16 pool; "auto" takes it only there.
- Layer and shard without a copy: the local pool [L, NS', KVH', P, ps, D] is reshaped (free) to
  one head of L * NS' * KVH' * P pages, and the kernel runs once per local KV head with each row's
  table offset to its layer's, shard's and head's pages. A per-layer slice would be a copy of the
  layer's whole pool per step (a custom call's operand is a whole buffer); one call with every
  (row, head) as a kernel row would put KVH' tables in SMEM (the kernel prefetches the whole
  table: the Qwen3-0.6B TPU recipe's 4,096 pages a row x 8 rows x 8 heads overflowed its 1 MiB).
- On a mesh the pallas_call runs under `jax.shard_map`: rows and the pool's NS axis over the
  batch axes (data x fsdp x expert), KV heads over tensor, as the pool is laid out (PAGE_AXES); a shard's
  tables already hold its own page numbers.
- Shapes: the TPU compile is checked at the Qwen3 releases' D = 128 with rollout.page_size 16 and
  a bf16 pool (tests/b2tjax/test_paged_decode_tpu.py); other head dims and page sizes are untried
  on TPU (Mosaic tiles by 128 lanes). Interpret mode takes any.
"""

from __future__ import annotations

import contextlib
import functools

import jax
import jax.numpy as jnp
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.pallas.ops.tpu.paged_attention import paged_attention
from jax.sharding import PartitionSpec

from models.kv_cache import CachedCall
from models.paged_kv import PAGE_AXES, key_block
from models.sharding import logical_to_spec

# How a paged cache is read: "gather" (models/paged_kv.py, every platform), "kernel" (decode steps
# by the Pallas kernel: compiled for TPU, interpreted elsewhere), "auto" (the kernel in programs
# for a TPU with a bf16 pool, else gather).
PAGED_ATTENTION_IMPLS = ("auto", "gather", "kernel")


def resolve_paged_attention(impl: str, platform: str, cache_dtype: jnp.dtype) -> str:
    """The kernel ("kernel") or the gather path ("gather") for `impl` in a program compiled for
    `platform` (the mesh's devices', never the host's backend) over a pool of `cache_dtype`;
    rejects unknown names."""
    if impl not in PAGED_ATTENTION_IMPLS:
        raise ValueError(f"unknown paged attention {impl!r}; choose from {PAGED_ATTENTION_IMPLS}")
    if impl != "auto":
        return impl
    bf16 = jnp.dtype(cache_dtype) == jnp.dtype(jnp.bfloat16)
    return "kernel" if platform == "tpu" and bf16 else "gather"


def compute_block(block: int, page_size: int, pages_per_row: int) -> int:
    """Pages per kernel compute block: the largest divisor of the row's pages within the gather
    path's key block (the kernel needs a divisor)."""
    most = key_block(block, page_size, pages_per_row)
    return max(n for n in range(1, most + 1) if pages_per_row % n == 0)


def _local(
    q: jax.Array,
    k_pool: jax.Array,
    v_pool: jax.Array,
    lengths: jax.Array,
    table: jax.Array,
    layer: jax.Array,
    pages_per_block: int,
    interpret: bool,
) -> jax.Array:
    """The kernel on one shard: q fp32 [R, NH, D] (scaled), pools [L, NS, KVH, P, ps, D], lengths
    [R], table [R, n] (clamped page numbers of each row's shard; rows split over NS in order).
    One kernel call per KV head, each over the whole pool seen as one head's pages."""
    r, nh, d = q.shape
    _, shards, kvh, per_shard, ps, _ = k_pool.shape
    shard = jnp.arange(r, dtype=jnp.int32) // (r // shards)
    k_pages, v_pages = (pool.reshape(1, -1, ps, d) for pool in (k_pool, v_pool))  # free: outer axes
    heads = q.reshape(r, kvh, nh // kvh, d)
    call = functools.partial(paged_attention, pages_per_compute_block=pages_per_block)
    first = (layer * shards + shard) * kvh * per_shard  # [R]: the row's pages of head 0
    with pltpu.force_tpu_interpret_mode() if interpret else contextlib.nullcontext():
        outs = [
            call(heads[:, h], k_pages, v_pages, lengths, (first + h * per_shard)[:, None] + table)
            for h in range(kvh)
        ]
    out = jnp.stack(outs, axis=1)  # [R, KVH, G, D]
    return out.reshape(r, nh, d)


def paged_decode_attention(
    q: jax.Array,
    k_pool: jax.Array,
    v_pool: jax.Array,
    layer: jax.Array,
    call: CachedCall,
    block: int,
    interpret: bool = False,
) -> jax.Array:
    """A one-token call's GQA (q [R, 1, NH, D]) over the paged pools [L, NS, KVH, P, ps, D] by the
    Pallas kernel, after this call's keys and values are written; equals
    `paged_attention_reference` (bf16 pools exactly in keys, fp32 scores either way). `block`:
    the cache key block (slots) bounding the kernel's compute block; `interpret` runs it in Pallas
    TPU interpret mode (off TPU). Under a mesh (`jax.set_mesh`) it runs per shard in shard_map."""
    r, t, nh, d = q.shape
    if t != 1:
        raise ValueError(f"the paged kernel attends one query token per row, got {t}")
    _, shards, _, per_shard, ps, _ = k_pool.shape
    if call.rows is not None and shards != 1:
        raise ValueError("a paged call on sharded rows must extend every row in order (rows=None)")
    per_row = call.pages.shape[1]
    lengths = jnp.minimum(call.filled, per_row * ps).astype(jnp.int32)
    table = jnp.minimum(call.pages, per_shard - 1)  # unallocated entries (P) a block still loads
    scaled = q[:, 0].astype(jnp.float32) * d**-0.5
    local = functools.partial(_local, pages_per_block=compute_block(block, ps, per_row), interpret=interpret)
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        out = local(scaled, k_pool, v_pool, lengths, table, layer)
    else:
        pool_spec = logical_to_spec(PAGE_AXES, k_pool.shape, dict(mesh.shape))
        rows, heads = pool_spec[1], pool_spec[2]  # the pool's shard and KV-head axes
        specs = (
            PartitionSpec(rows, heads, None),
            pool_spec,
            pool_spec,
            PartitionSpec(rows),
            PartitionSpec(rows, None),
            PartitionSpec(),
        )
        run = jax.shard_map(local, in_specs=specs, out_specs=specs[0], check_vma=False)
        out = run(scaled, k_pool, v_pool, lengths, table, layer)
    return out[:, None].astype(q.dtype)
