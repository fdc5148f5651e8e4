"""Qwen3 building blocks in Flax NNX: RMSNorm, grouped-query attention (RoPE: models/rope.py), SwiGLU
MLP, decoder layer.

Parameters are stored in `param_dtype` (fp32 master) and cast to the compute `dtype` at use;
normalisation statistics, RoPE angles, softmax and logits are always fp32. Every parameter carries
logical axis names (`out_sharding` metadata) that models/sharding.py maps onto a mesh.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from models import lora, quant
from models.config import Qwen3Config
from models.kv_cache import CachedCall, cached_attention, write_layer
from models.paged_kernel import paged_decode_attention, resolve_paged_attention
from models.paged_kv import paged_attention_reference, write_pages
from models.rope import apply_rope
from models.settings import ATTENTION_IMPLS, ModelRuntime
from models.sharding import constrain
from models.splash import splash_attention

F32 = jnp.float32


def make_param(
    rngs: nnx.Rngs | None,
    shape: Sequence[int],
    names: Sequence[str | None],
    init: Callable[..., jax.Array],
    param_dtype: Any,
) -> nnx.Param:
    """A Param with logical axis names; placement happens later (models/sharding.create_model)."""
    key = rngs.params() if rngs is not None else jax.random.key(0)
    return nnx.Param(init(key, tuple(shape), param_dtype), out_sharding=tuple(names), eager_sharding=False)


class RMSNorm(nnx.Module):
    """y = scale * x / rms(x); statistics in fp32, then cast back (as Hugging Face Qwen3RMSNorm)."""

    def __init__(self, dim: int, eps: float, *, dtype: Any, param_dtype: Any):
        self.scale = make_param(None, (dim,), ("norm",), nnx.initializers.ones, param_dtype)
        self.eps = eps
        self.dtype = dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        x32 = x.astype(F32)
        normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        return normed.astype(self.dtype) * self.scale[...].astype(self.dtype)


# Attention for calls without a cache (training, teacher forcing, full-sequence forwards):
# "reference" is the path below (query blocks bound the fp32 score memory); "xla" and "cudnn" are
# jax.nn.dot_product_attention's implementations; "splash" is the Pallas splash kernel
# (models/splash.py; a TPU kernel, in Pallas interpret mode elsewhere); "auto" takes splash when
# the program is compiled for a TPU, cuDNN's fused kernel for a GPU with a 16-bit compute dtype
# (what cuDNN supports), "xla" for a CPU (about 1.8x faster than the reference path there, and CPU
# runs are small enough for its unblocked [T, T] scores), and the reference path on a GPU in fp32.


def resolve_attention(impl: str, dtype: Any, platform: str) -> str:
    """The implementation `impl` stands for in programs compiled for `platform` ("tpu", "gpu" or
    "cuda", "cpu": the mesh's devices', never the host's backend); rejects unknown names."""
    if impl not in ATTENTION_IMPLS:
        raise ValueError(f"unknown attention implementation {impl!r}; choose from {ATTENTION_IMPLS}")
    if impl != "auto":
        return impl
    if platform == "tpu":
        return "splash"
    if platform not in ("gpu", "cuda"):
        return "xla"
    half = jnp.dtype(dtype) in (jnp.dtype(jnp.bfloat16), jnp.dtype(jnp.float16))
    return "cudnn" if half else "reference"


def _attend(q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array) -> jax.Array:
    b, t, nh, d = q.shape
    kvh = k.shape[2]
    qg = q.reshape(b, t, kvh, nh // kvh, d)
    scores = jnp.einsum("btkgd,bskd->bkgts", qg, k.astype(q.dtype), preferred_element_type=F32)
    scores = scores * (d**-0.5)
    scores = jnp.where(mask[:, None, None, :, :], scores, jnp.finfo(F32).min)
    probs = jax.nn.softmax(scores, axis=-1)  # fp32 [B, KVH, G, T, S]
    out = jnp.einsum("bkgts,bskd->btkgd", probs.astype(q.dtype), v.astype(q.dtype))
    return out.reshape(b, t, nh, d)


def attention_mask(
    q_idx: jax.Array, k_idx: jax.Array, window: int | None, q_seg: jax.Array | None, k_seg: jax.Array | None
) -> jax.Array:
    """[1 | B, Tq, S] bool: query index q_idx [Tq] sees key index k_idx [S] at or before it (within
    `window` when set) and, with segment ids q_seg [B, Tq] / k_seg [B, S], only in its own segment."""
    mask = q_idx[:, None] >= k_idx[None, :]
    if window is not None:
        mask &= k_idx[None, :] > q_idx[:, None] - window
    mask = mask[None]
    if q_seg is not None:
        mask = mask & (q_seg[:, :, None] == k_seg[:, None, :])
    return mask


def grouped_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    block: int | None = None,
    window: int | None = None,
    segment_ids: jax.Array | None = None,
) -> jax.Array:
    """Causal GQA without repeating K/V. q: [B, T, NH, D]; k, v: [B, T, KVH, D]; segment_ids [B, T].

    Query heads are grouped as [B, T, KVH, G, D] (head h uses KV head h // G, as HF repeat_kv).
    Masked slots get the most negative finite fp32, so a fully masked row is uniform, not NaN.
    With `block` dividing T (< T), queries run in blocks under lax.map + checkpoint and each block
    builds its own mask, so the fp32 scores are [.., block, T] and the mask [B, block, T] instead of
    [.., T, T] in the forward and the backward pass.
    """
    b, t, nh, d = q.shape
    idx = jnp.arange(t, dtype=jnp.int32)
    if block is None or t <= block or t % block:
        return _attend(q, k, v, attention_mask(idx, idx, window, segment_ids, segment_ids))
    n = t // block
    q_blocks = q.reshape(b, n, block, nh, d).swapaxes(0, 1)  # [n, B, block, NH, D]
    seg_blocks = None if segment_ids is None else segment_ids.reshape(b, n, block).swapaxes(0, 1)

    def attend_block(xs):
        q_block, i, seg_block = xs
        mask = attention_mask(i * block + idx[:block], idx, window, seg_block, segment_ids)
        return _attend(q_block, k, v, mask)

    out = jax.lax.map(jax.checkpoint(attend_block), (q_blocks, jnp.arange(n, dtype=jnp.int32), seg_blocks))
    return out.swapaxes(0, 1).reshape(b, t, nh, d)  # out: [n, B, block, NH, D]


def causal_attention(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    impl: str,
    block: int | None = None,
    window: int | None = None,
    segment_ids: jax.Array | None = None,
) -> jax.Array:
    """Causal GQA over this call's own tokens (q [B, T, NH, D]; k, v [B, T, KVH, D]) with a resolved
    `impl`; with `window`, query t sees keys t - window < s <= t only; with `segment_ids` [B, T]
    int32 (packed rows: 0 = padding, records 1, 2, ...), only keys of its own segment (padding
    attends within segment 0: finite, never NaN). jax.nn.dot_product_attention takes grouped K/V
    heads as they are and keeps its logits and softmax in fp32 for 16-bit inputs, as the reference
    path does; given segments, it takes them as a dense [B, 1, T, T] mask (cuDNN: as a bias)."""
    if impl == "reference":
        return grouped_attention(q, k, v, block, window, segment_ids)
    mask = None
    if segment_ids is not None:
        mask = (segment_ids[:, :, None] == segment_ids[:, None, :])[:, None]
    return jax.nn.dot_product_attention(
        q,
        k.astype(q.dtype),
        v.astype(q.dtype),
        mask=mask,
        is_causal=True,
        local_window_size=None if window is None else (window - 1, 0),
        implementation=impl,
    )


class Attention(nnx.Module):
    """Qwen3 self-attention: q/k/v projections, per-head q_norm/k_norm before RoPE, GQA, o_proj."""

    def __init__(
        self,
        cfg: Qwen3Config,
        *,
        rngs: nnx.Rngs,
        runtime: ModelRuntime,
    ):
        """`runtime` as models.qwen3.resolve_runtime returns it (dtypes, platform and attention resolved)."""
        dtype, param_dtype = runtime.dtype, runtime.param_dtype
        h, nh, kvh, d = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        init = nnx.initializers.normal(cfg.initializer_range)
        self.q_proj = make_param(rngs, (h, nh, d), ("embed", "heads", "head_dim"), init, param_dtype)
        self.k_proj = make_param(rngs, (h, kvh, d), ("embed", "kv_heads", "head_dim"), init, param_dtype)
        self.v_proj = make_param(rngs, (h, kvh, d), ("embed", "kv_heads", "head_dim"), init, param_dtype)
        self.o_proj = make_param(rngs, (nh, d, h), ("heads", "head_dim", "embed"), init, param_dtype)
        if cfg.attention_bias:
            zeros = nnx.initializers.zeros
            self.q_bias = make_param(None, (nh, d), ("heads", "head_dim"), zeros, param_dtype)
            self.k_bias = make_param(None, (kvh, d), ("kv_heads", "head_dim"), zeros, param_dtype)
            self.v_bias = make_param(None, (kvh, d), ("kv_heads", "head_dim"), zeros, param_dtype)
            self.o_bias = make_param(None, (h,), ("embed",), zeros, param_dtype)
        self.q_norm = RMSNorm(d, cfg.rms_norm_eps, dtype=dtype, param_dtype=param_dtype)
        self.k_norm = RMSNorm(d, cfg.rms_norm_eps, dtype=dtype, param_dtype=param_dtype)
        self.rope_theta = cfg.rope_theta
        self.rope_scaling = cfg.rope_scaling
        self.use_bias = cfg.attention_bias
        self.attention_block = runtime.attention_block
        self.impl = runtime.attention  # resolved ATTENTION_IMPLS entry for calls without a cache
        self.platform = runtime.platform  # what the programs compile for (splash runs interpreted off TPU)
        self.cache_block = runtime.cache_block  # key block of attention over the KV cache
        self.paged_attention = runtime.paged_attention  # PAGED_ATTENTION_IMPLS entry (models/paged_kernel.py)
        self.window = cfg.sliding_window
        self.dtype = dtype

    def _project(self, x: jax.Array, name: str) -> jax.Array:
        proj = f"{name}_proj"
        out = lora.apply(self, proj, x, jnp.einsum("bth,hnd->btnd", x, quant.read(self, proj, self.dtype)))
        if self.use_bias:
            out = out + getattr(self, f"{name}_bias")[...].astype(self.dtype)
        return out

    def qkv(self, x: jax.Array, positions: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        """x [B, T, H] -> q [B, T, NH, D], k, v [B, T, KVH, D] (q, k normed and rotated)."""
        q = self.q_norm(self._project(x, "q"))
        k = self.k_norm(self._project(x, "k"))
        v = self._project(x, "v")
        q = apply_rope(q, positions, self.rope_theta, self.rope_scaling)
        k = apply_rope(k, positions, self.rope_theta, self.rope_scaling)
        q = constrain(q, ("batch", "seq", "act_heads", None))
        k = constrain(k, ("batch", "seq", "act_kv_heads", None))
        v = constrain(v, ("batch", "seq", "act_kv_heads", None))
        return q, k, v

    def attend(self, q: jax.Array, k: jax.Array, v: jax.Array, segment_ids: jax.Array | None) -> jax.Array:
        """Causal attention without a cache by this layer's implementation (causal_attention)."""
        if self.impl == "splash":
            return splash_attention(q, k, v, segment_ids, self.window, interpret=self.platform != "tpu")
        return causal_attention(q, k, v, self.impl, self.attention_block, self.window, segment_ids)

    def paged_kernel(self, tokens: int, cache_dtype: jnp.dtype) -> bool:
        """Whether a paged call of `tokens` tokens a row reads its pages by the Pallas decode kernel:
        decode steps (one token) of an unwindowed layer whose `paged_attention` resolves to it."""
        impl = resolve_paged_attention(self.paged_attention, self.platform, cache_dtype)
        return impl == "kernel" and tokens == 1 and self.window is None

    def out(self, attn: jax.Array) -> jax.Array:
        """attn [B, T, NH, D] -> [B, T, H]. One [B, T, NH * D] x [NH * D, H] product (both reshapes are
        free): contracting (n, d) as two dims, XLA's CPU compiler copied the whole weight per
        layer per decode step into a (d, n) order."""
        b, t, nh, d = attn.shape
        w = quant.read(self, "o_proj", self.dtype)
        y = lora.apply(self, "o_proj", attn, attn.reshape(b, t, nh * d) @ w.reshape(nh * d, w.shape[-1]))
        if self.use_bias:
            y = y + self.o_bias[...].astype(self.dtype)
        return y


class MLP(nnx.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, cfg: Qwen3Config, *, rngs: nnx.Rngs, dtype: Any, param_dtype: Any):
        h, i = cfg.hidden_size, cfg.intermediate_size
        init = nnx.initializers.normal(cfg.initializer_range)
        self.gate_proj = make_param(rngs, (h, i), ("embed", "mlp"), init, param_dtype)
        self.up_proj = make_param(rngs, (h, i), ("embed", "mlp"), init, param_dtype)
        self.down_proj = make_param(rngs, (i, h), ("mlp", "embed"), init, param_dtype)
        self.dtype = dtype

    def __call__(self, x: jax.Array) -> jax.Array:
        gate = lora.apply(self, "gate_proj", x, x @ quant.read(self, "gate_proj", self.dtype))
        up = lora.apply(self, "up_proj", x, x @ quant.read(self, "up_proj", self.dtype))
        act = constrain(jax.nn.silu(gate) * up, ("batch", "seq", "act_mlp"))
        return lora.apply(self, "down_proj", act, act @ quant.read(self, "down_proj", self.dtype))


class DecoderLayer(nnx.Module):
    """Pre-norm residual block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(
        self,
        cfg: Qwen3Config,
        *,
        rngs: nnx.Rngs,
        runtime: ModelRuntime,
    ):
        dtype, param_dtype = runtime.dtype, runtime.param_dtype
        self.input_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype=dtype, param_dtype=param_dtype)
        self.attn = Attention(cfg, rngs=rngs, runtime=runtime)
        self.post_attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype=dtype, param_dtype=param_dtype)
        self.mlp = MLP(cfg, rngs=rngs, dtype=dtype, param_dtype=param_dtype)

    def _finish(
        self, x: jax.Array, attn: jax.Array, valid: jax.Array | None, routes: jax.Array | None
    ) -> tuple[jax.Array, Any]:
        """(the layer's output, what its MLP returns beside its output: `feed_forward`)."""
        with jax.named_scope("attention"):
            x = constrain(x + self.attn.out(attn), ("batch", "seq", "act_embed"))
        with jax.named_scope("mlp"):
            out, aux = self.feed_forward(self.post_attn_norm(x), valid, routes)
        return constrain(x + out, ("batch", "seq", "act_embed")), aux

    def feed_forward(self, x: jax.Array, valid: jax.Array | None, routes: Any) -> tuple[jax.Array, Any]:
        """The MLP on x [B, T, H] and what a routed block (models/moe.py) also returns: its router's
        statistics and chosen experts (None here). `valid` [B, T] (the call's real tokens, None:
        all) and `routes` [B, T, k] (experts to use, None: the router's top-k) are for a routed
        block; the dense MLP runs every token and takes no routes (always None)."""
        return self.mlp(x), None

    def __call__(
        self,
        x: jax.Array,
        positions: jax.Array,
        segment_ids: jax.Array | None = None,
        routes: jax.Array | None = None,
    ) -> tuple[jax.Array, Any]:
        """x [B, T, H] without a cache: causal attention over this call's tokens (by index;
        `positions` [B, T] only rotate q and k), within each segment of `segment_ids` [B, T].
        Returns (x, the MLP's extra outputs: `feed_forward`)."""
        with jax.named_scope("attention"):  # the output projection and residual: _finish
            q, k, v = self.attn.qkv(self.input_norm(x), positions)
            attn = self.attn.attend(q, k, v, segment_ids)
        return self._finish(x, attn, None if segment_ids is None else segment_ids != 0, routes)

    def cached(
        self, x: jax.Array, layer: jax.Array, call: CachedCall, k_cache: jax.Array, v_cache: jax.Array
    ) -> tuple[tuple[jax.Array, jax.Array, jax.Array], jax.Array | None]:
        """x [R, T, H] appended to the stacked cache [L, B, KVH, S, D] (or paged pool) as layer
        `layer`: writes this call's keys/values into their slots, then attends over the live
        cache blocks (which hold them). Returns ((x, k_cache, v_cache), the experts a routed
        block chose [R, T, k], None for a dense MLP)."""
        with jax.named_scope("attention"):
            q, k, v = self.attn.qkv(self.input_norm(x), call.positions)
            paged = call.pages is not None  # page tables (models/paged_kv.py) or a row per stream
            write = write_pages if paged else write_layer
            k_cache = write(k_cache, layer, k, call)
            v_cache = write(v_cache, layer, v, call)
            block = self.attn.cache_block
            if paged and self.attn.paged_kernel(x.shape[1], k_cache.dtype):
                interpret = self.attn.platform != "tpu"
                attn = paged_decode_attention(q, k_cache, v_cache, layer, call, block, interpret)
            else:
                attend = paged_attention_reference if paged else cached_attention
                attn = attend(q, k_cache, v_cache, layer, call, block, self.attn.window)
        x, aux = self._finish(x, attn, call.positions < call.filled[:, None], None)
        return (x, k_cache, v_cache), None if aux is None else aux[1]


def with_paged_attention(model: nnx.Module, impl: str) -> nnx.Module:
    """`model` whose attention layers read a paged cache by `impl` (PAGED_ATTENTION_IMPLS): the
    sampler's choice (`rollout.paged_attention`), set on a shell over the same arrays so that the
    caller's model (the trainer's) keeps its own graph; `model` itself when nothing changes."""
    layers = [m for _, m in nnx.iter_modules(model) if isinstance(m, Attention)]
    for m in layers:
        resolve_paged_attention(impl, m.platform, model.dtype)  # rejects unknown names
    if all(m.paged_attention == impl for m in layers):
        return model
    shell = nnx.merge(*nnx.split(model))
    for _, m in nnx.iter_modules(shell):
        if isinstance(m, Attention):
            m.paged_attention = impl
    return shell
