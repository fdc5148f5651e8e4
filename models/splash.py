"""Causal GQA by the Pallas splash attention kernel that ships with JAX (TPU), segment-aware.

`jax.experimental.pallas.ops.tpu.splash_attention` computes softmax(q k^T) v block by block in VMEM
(online softmax, fp32 logits and accumulators; the forward keeps only the log-sum-exp), skips the
key blocks the mask leaves empty (above the causal diagonal), and takes `SegmentIds` so a packed
row's records never see each other. So the training step's attention memory is O(T) per head
instead of the reference path's fp32 [block, T] score blocks.

GQA without repeating K/V: the kernel's MQA form (G query heads over one K/V head) is vmapped over
the KV heads and the rows, so K and V are read in place. Off TPU the kernel runs in Pallas
interpret mode (tests on CPU). On a mesh, a Pallas call is a custom call the SPMD partitioner
cannot split, so the kernel runs under `jax.shard_map`: rows over the batch axes, heads over the
tensor axis exactly as the activations are laid out (models/sharding.py), the sequence whole.

Lengths: T is padded to a multiple of 128 (the TPU's lane width; keys past T sit after every real
query, so causality already hides them) and the block is the largest of 512, 256, 128 dividing
it, for every kernel of the forward and the backward pass.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental.pallas.ops.tpu import splash_attention as splash
from jax.sharding import PartitionSpec

from models.sharding import logical_to_spec

LANES = 128
BLOCKS = (512, 256, 128)  # preferred first: fewer grid steps on long rows


def splash_lengths(t: int) -> tuple[int, int]:
    """(padded length, block) for a call of `t` tokens: t rounded up to a multiple of 128, and the
    largest of 512, 256, 128 dividing that."""
    padded = -(-t // LANES) * LANES
    return padded, next(b for b in BLOCKS if padded % b == 0)


def _kernel(
    t: int, groups: int, block: int, window: int | None, interpret: bool
) -> splash.SplashAttentionKernel:
    """The MQA kernel of `groups` query heads over one K/V head at padded length `t`. Built in the
    trace (its mask tables become the program's constants); the numpy work of tabling the mask's
    blocks is cached by the splash module per mask and block shape."""
    if window is None:
        mask = splash.CausalMask((t, t))
    else:  # query i sees keys i - window < j <= i
        mask = splash.LocalMask((t, t), window_size=(window - 1, 0), offset=0)
    sizes = splash.BlockSizes(
        block_q=block,
        block_kv=block,
        block_kv_compute=block,
        block_q_dkv=block,
        block_kv_dkv=block,
        block_kv_dkv_compute=block,
        block_q_dq=block,
        block_kv_dq=block,
    )
    return splash.make_splash_mqa_single_device(
        splash.MultiHeadMask([mask] * groups), block_sizes=sizes, interpret=interpret
    )


def _local(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    segment_ids: jax.Array | None,
    window: int | None,
    interpret: bool,
) -> jax.Array:
    """Splash attention on one device's shard: q [B, T, NH, D], k, v [B, T, KVH, D] -> [B, T, NH, D]."""
    b, t, nh, d = q.shape
    kvh = k.shape[2]
    padded, block = splash_lengths(t)
    kernel = _kernel(padded, nh // kvh, block, window, interpret)
    pad = ((0, 0), (0, padded - t), (0, 0), (0, 0))
    # splash applies no scale: scale q (in fp32, then back to the compute dtype) as the reference does
    q = jnp.pad((q.astype(jnp.float32) * d**-0.5).astype(q.dtype), pad)
    qg = q.reshape(b, padded, kvh, nh // kvh, d).transpose(0, 2, 3, 1, 4)  # [B, KVH, G, T, D]
    kt = jnp.pad(k.astype(q.dtype), pad).transpose(0, 2, 1, 3)  # [B, KVH, T, D]
    vt = jnp.pad(v.astype(q.dtype), pad).transpose(0, 2, 1, 3)
    if segment_ids is None:
        out = jax.vmap(jax.vmap(kernel))(qg, kt, vt)
    else:
        seg = jnp.pad(segment_ids.astype(jnp.int32), ((0, 0), (0, padded - t)))
        head = lambda qh, kh, vh, s: kernel(qh, kh, vh, splash.SegmentIds(q=s, kv=s))  # noqa: E731
        out = jax.vmap(jax.vmap(head, (0, 0, 0, None)))(qg, kt, vt, seg)  # heads, then rows
    return out.transpose(0, 3, 1, 2, 4)[:, :t].reshape(b, t, nh, d)


def splash_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    segment_ids: jax.Array | None = None,
    window: int | None = None,
    interpret: bool = False,
) -> jax.Array:
    """Causal GQA (q [B, T, NH, D]; k, v [B, T, KVH, D]), within the segments of `segment_ids` [B, T]
    and the last `window` keys when given; `interpret` runs the kernel in Pallas interpret mode
    (off TPU). Under a mesh (`jax.set_mesh`) it runs per shard under shard_map."""
    local = functools.partial(_local, window=window, interpret=interpret)
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return local(q, k, v, segment_ids)
    sizes = dict(mesh.shape)
    rows = logical_to_spec(("batch",), q.shape[:1], sizes)[0]
    # query heads split in the KV heads' contiguous chunks, so each shard keeps its heads' K/V
    heads = logical_to_spec(("act_kv_heads",), k.shape[2:3], sizes)[0]
    spec = PartitionSpec(rows, None, heads, None)
    args, specs = (q, k, v), (spec, spec, spec)
    if segment_ids is not None:
        args, specs = (*args, segment_ids), (*specs, PartitionSpec(rows, None))
    body = lambda *xs: local(*xs[:3], xs[3] if len(xs) > 3 else None)  # noqa: E731
    return jax.shard_map(body, in_specs=specs, out_specs=spec, check_vma=False)(*args)
