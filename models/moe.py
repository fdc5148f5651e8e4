"""The routed-experts block of Qwen3-MoE (HF `Qwen3MoeSparseMoeBlock`) in Flax NNX: a router, then
each token's top-k experts (SwiGLU each), their outputs summed with the gate weights. Dropless:
every routed token is computed, no capacity.

Routing (`MoeBlock.route`): router logits and softmax in fp32, top-k, renormalised to sum 1 when
`norm_topk_prob`. Tokens marked invalid (padding) get no expert (index E, weight 0) and are in no
expert's count. The expert computation is one of `EXPERT_IMPLS`:
- "ragged": the k copies of each routed token sorted by expert and run as grouped matmuls
  (`jax.lax.ragged_dot`, group sizes = tokens per expert); unrouted copies sort last, past every
  group, and are never computed;
- "dense": the reference, every expert on every token, outputs weighted by a [N, E] combine
  matrix (zero off the chosen experts); E/k times the FLOPs, for tests;
- "auto": "dense" in programs for a CPU (XLA's CPU ragged_dot is slower still), else "ragged".

Router replay (the trainer using the experts a sampler chose) fits between `top_k` and `gates`:
take the probabilities at the given indices (`jnp.take_along_axis(probs, chosen, -1)`) instead of
`jax.lax.top_k`; `gates` and the expert computation stay as they are, and the gate weights keep
their gradient through `probs`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from models.config import Qwen3Config
from models.layers import F32, Attention, DecoderLayer, RMSNorm, make_param
from models.settings import EXPERT_IMPLS, ModelRuntime
from models.sharding import constrain


def resolve_experts(impl: str, platform: str) -> str:
    """The expert computation `impl` stands for in programs compiled for `platform` (the mesh's);
    unknown names are a ValueError. "auto" is "dense" for a CPU: XLA's CPU ragged_dot costs about
    k times the dense path (measured, forward + backward, 1,024 tokens, hidden 128, 64 experts of
    64, top-8: 5.2 s vs 0.67 s), as if each group ran over every row; else "ragged"."""
    if impl not in EXPERT_IMPLS:
        raise ValueError(f"unknown expert implementation {impl!r}; choose from {EXPERT_IMPLS}")
    if impl == "auto":
        return "dense" if platform == "cpu" else "ragged"
    return impl


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Routing:
    """Where N tokens go: `experts` int32 [N, k] (E for a token not routed), `weights` fp32 [N, k]
    (0 for one not routed), `counts` int32 [E] (routed tokens per expert)."""

    experts: jax.Array
    weights: jax.Array
    counts: jax.Array


def gates(top: jax.Array, experts: jax.Array, valid: jax.Array, num_experts: int, renorm: bool) -> Routing:
    """The routing of tokens whose chosen `experts` [N, k] have softmax probabilities `top` [N, k]:
    renormalised when `renorm`; tokens with `valid` [N] False routed nowhere and counted nowhere."""
    if renorm:
        top = top / jnp.sum(top, axis=-1, keepdims=True)
    weights = jnp.where(valid[:, None], top, 0.0)
    experts = jnp.where(valid[:, None], experts, num_experts).astype(jnp.int32)
    counts = jnp.zeros(num_experts, jnp.int32).at[experts.reshape(-1)].add(1, mode="drop")
    return Routing(experts=experts, weights=weights, counts=counts)


def dense_experts(
    x: jax.Array, routing: Routing, gate: jax.Array, up: jax.Array, down: jax.Array
) -> jax.Array:
    """Reference: x [N, H] through every expert (weights [E, H, I], [E, H, I], [E, I, H]), combined
    by the gate weights; fp32 [N, H]."""
    n, e = x.shape[0], gate.shape[0]
    rows = jnp.arange(n)[:, None]
    combine = jnp.zeros((n, e + 1), F32).at[rows, routing.experts].add(routing.weights)[:, :e]
    act = jax.nn.silu(jnp.einsum("nh,ehi->eni", x, gate)) * jnp.einsum("nh,ehi->eni", x, up)
    out = jnp.einsum("eni,eih->enh", act, down)
    return jnp.einsum("enh,ne->nh", out, combine.astype(out.dtype), preferred_element_type=F32)


def ragged_experts(
    x: jax.Array, routing: Routing, gate: jax.Array, up: jax.Array, down: jax.Array
) -> jax.Array:
    """Grouped matmuls: the N * k (token, expert) pairs sorted by expert, each expert's contiguous
    rows times its weights (`jax.lax.ragged_dot`), unsorted and summed per token; fp32 [N, H]."""
    n, k = routing.experts.shape
    order = jnp.argsort(routing.experts.reshape(-1), stable=True)  # unrouted (index E) sort last
    rows = x[order // k]  # [N * k, H]
    sizes = routing.counts
    act = jax.nn.silu(jax.lax.ragged_dot(rows, gate, sizes)) * jax.lax.ragged_dot(rows, up, sizes)
    out = jax.lax.ragged_dot(act, down, sizes)  # rows past the groups: unrouted, weight 0 below
    routed = jnp.arange(n * k) < jnp.sum(sizes)
    out = jnp.where(routed[:, None], out, 0)[jnp.argsort(order)].reshape(n, k, -1)
    return jnp.einsum("nkh,nk->nh", out, routing.weights.astype(out.dtype), preferred_element_type=F32)


EXPERTS = {"ragged": ragged_experts, "dense": dense_experts}


class MoeBlock(nnx.Module):
    """Router [H, E] and stacked expert weights: gate/up [E, H, I], down [E, I, H]."""

    def __init__(self, cfg: Qwen3Config, *, rngs: nnx.Rngs, dtype: Any, param_dtype: Any, experts: str):
        """`experts`: "ragged" or "dense" (`resolve_experts`)."""
        moe = cfg.moe
        h, i, e = cfg.hidden_size, moe.moe_intermediate_size, moe.num_experts
        init = nnx.initializers.normal(cfg.initializer_range)
        self.router = make_param(rngs, (h, e), ("embed", None), init, param_dtype)
        self.gate_proj = make_param(rngs, (e, h, i), (None, "embed", "mlp"), init, param_dtype)
        self.up_proj = make_param(rngs, (e, h, i), (None, "embed", "mlp"), init, param_dtype)
        self.down_proj = make_param(rngs, (e, i, h), (None, "mlp", "embed"), init, param_dtype)
        self.top_k = moe.num_experts_per_tok
        self.renorm = moe.norm_topk_prob
        self.experts = experts
        self.dtype = dtype

    @property
    def num_experts(self) -> int:
        return self.router.shape[-1]

    def route(self, x: jax.Array, valid: jax.Array) -> Routing:
        """x [N, H] (compute dtype), valid [N] bool -> the routing (logits and softmax in fp32)."""
        w = self.router[...].astype(self.dtype)
        probs = jax.nn.softmax(jnp.einsum("nh,he->ne", x, w, preferred_element_type=F32), axis=-1)
        top, chosen = jax.lax.top_k(probs, self.top_k)
        return gates(top, chosen, valid, self.num_experts, self.renorm)

    def __call__(self, x: jax.Array, valid: jax.Array | None = None) -> jax.Array:
        """x [B, T, H] -> [B, T, H]; `valid` [B, T] bool (None: every token) marks the tokens routed."""
        b, t, h = x.shape
        flat = x.reshape(b * t, h)
        valid = jnp.ones((b * t,), bool) if valid is None else valid.reshape(b * t)
        routing = self.route(flat, valid)
        weights = [getattr(self, n)[...].astype(self.dtype) for n in ("gate_proj", "up_proj", "down_proj")]
        out = EXPERTS[self.experts](flat, routing, *weights).astype(self.dtype)
        return constrain(out.reshape(b, t, h), ("batch", "seq", "act_embed"))


class MoeDecoderLayer(DecoderLayer):
    """A decoder layer whose MLP is the routed experts; padding tokens are not routed."""

    def __init__(self, cfg: Qwen3Config, *, rngs: nnx.Rngs, runtime: ModelRuntime):
        """`runtime` resolved (models.qwen3.resolve_runtime): its `moe_experts` "ragged" or "dense"."""
        dtype, param_dtype = runtime.dtype, runtime.param_dtype
        self.input_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype=dtype, param_dtype=param_dtype)
        self.attn = Attention(cfg, rngs=rngs, runtime=runtime)
        self.post_attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype=dtype, param_dtype=param_dtype)
        experts = runtime.moe_experts
        self.mlp = MoeBlock(cfg, rngs=rngs, dtype=dtype, param_dtype=param_dtype, experts=experts)

    def feed_forward(self, x: jax.Array, valid: jax.Array | None) -> jax.Array:
        return self.mlp(x, valid)
