"""The routed-experts block of Qwen3-MoE (HF `Qwen3MoeSparseMoeBlock`) in Flax NNX: a router, then
each token's top-k experts (SwiGLU each), their outputs summed with the gate weights. Dropless:
every routed token is computed, no capacity.

Routing (`MoeBlock.route`): router logits and softmax in fp32, top-k, renormalised to sum 1 when
`norm_topk_prob`. Tokens marked invalid (padding) get no expert (index E, weight 0) and are in no
expert's count. `MoeBlock.forward` also returns the router's statistics over the valid tokens
(models/router_stats.py: the load-balance loss and metrics), from the routing of the whole batch,
before any exchange between expert shards. The expert computation is one of `EXPERT_IMPLS`:
- "ragged": the k copies of each routed token sorted by expert and run as grouped matmuls
  (`jax.lax.ragged_dot`, group sizes = tokens per expert); unrouted copies sort last, past every
  group, and are never computed;
- "dense": the reference, every expert on every token, outputs weighted by a [N, E] combine
  matrix (zero off the chosen experts); E/k times the FLOPs, for tests;
- "auto": "dense" in programs for a CPU (XLA's CPU ragged_dot is slower still), else "ragged".

Experts sharded over the mesh's `expert` axis (S > 1 shards, each holding E / S experts; outside
the experts that axis' devices are data-parallel, models/sharding.py ROW_AXES): each shard's token
copies go to the shards of their experts and come back, inside `jax.shard_map` over the whole mesh
(`expert_parallel`). The exchange is one of `EXCHANGES`, resolved once for the platform
(`resolve_exchange`):
- "all_to_all" (TPU, GPU): the copies sorted by expert, each shard sent exactly the rows of its
  experts with `jax.lax.ragged_all_to_all` and the outputs sent back (as Tunix's and MaxText's MoE);
  the receive buffer holds the worst case, every copy of every shard's tokens: dropless;
- "gather" (CPU, whose XLA has no ragged all-to-all): the expert axis' tokens all-gathered, each
  shard computing its own experts' share of every token, the shares summed and scattered back by
  one `psum_scatter` (MaxText's ring of experts).
In a shard the FSDP-sharded model dim of the expert weights is all-gathered and the tensor-sharded
MLP dim gives partial sums, added over its axes at the end.

LoRA (models/lora.py): per-expert factors `<proj>_lora_a` [E, in, r] and `<proj>_lora_b` [E, r, out]
add (alpha / r) (x A_e) B_e to each token copy's x W_e (`project`), sharded with their experts.

Router replay (the trainer using the experts a sampler chose): every forward returns the experts
it chose per token (`route_dtype`, 0 for padding), and takes given ones (`routes`) instead of
top-k: the probabilities at those indices (`jnp.take_along_axis(probs, chosen, -1)`) go to `gates`
and the expert computation as top-k's would, so the router keeps its gradient through `probs`.
Negative given indices (a token with no recorded routes) leave that token its own top-k.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import AbstractMesh
from jax.sharding import PartitionSpec as P

from models.config import Qwen3Config
from models.layers import F32, Attention, DecoderLayer, RMSNorm, make_param
from models.router_stats import RouterStats, router_stats
from models.settings import EXPERT_IMPLS, ModelRuntime
from models.sharding import constrain, logical_to_spec, row_axes

EXPERT_AXIS = "expert"
# The logical axes of the stacked expert weights gate [E, H, I], up [E, H, I], down [E, I, H].
EXPERT_NAMES = {
    "gate_proj": ("expert", "embed", "mlp"),
    "up_proj": ("expert", "embed", "mlp"),
    "down_proj": ("expert", "mlp", "embed"),
}


def param_names(name: str) -> tuple[str, ...]:
    """The logical axes of an expert parameter: a weight of EXPERT_NAMES or one of its LoRA factors,
    A `<proj>_lora_a` [E, in, r] or B `<proj>_lora_b` [E, r, out]."""
    proj, _, which = name.partition("_lora_")
    expert, into, out = EXPERT_NAMES[proj]
    return {"": (expert, into, out), "a": (expert, into, "lora_rank"), "b": (expert, "lora_rank", out)}[which]


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


def resolve_exchange(platform: str) -> str:
    """How tokens reach experts on other shards in programs compiled for `platform` (`EXCHANGES`):
    XLA:CPU does not implement ragged all-to-all."""
    return "gather" if platform == "cpu" else "all_to_all"


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class Routing:
    """Where N tokens go: `experts` int32 [N, k] (E for a token not routed), `weights` fp32 [N, k]
    (0 for one not routed), `counts` int32 [E] (routed tokens per expert)."""

    experts: jax.Array
    weights: jax.Array
    counts: jax.Array


def route_dtype(num_experts: int) -> jnp.dtype:
    """The integer type of recorded expert indices: uint8 (one byte per (token, slot)) while the
    indices fit, int16 above 256 experts."""
    return jnp.dtype(jnp.uint8 if num_experts <= 256 else jnp.int16)


def route_layout(cfg: Qwen3Config) -> tuple[int, int, jnp.dtype]:
    """(MoE layers, experts per token, index dtype) of the routes a Qwen3-MoE `cfg` records."""
    moe = cfg.moe
    return (
        sum(moe.sparse_layers(cfg.num_hidden_layers)),
        moe.num_experts_per_tok,
        route_dtype(moe.num_experts),
    )


def gates(top: jax.Array, experts: jax.Array, valid: jax.Array, num_experts: int, renorm: bool) -> Routing:
    """The routing of tokens whose chosen `experts` [N, k] have softmax probabilities `top` [N, k]:
    renormalised when `renorm`; tokens with `valid` [N] False routed nowhere and counted nowhere."""
    if renorm:
        top = top / jnp.sum(top, axis=-1, keepdims=True)
    weights = jnp.where(valid[:, None], top, 0.0)
    experts = jnp.where(valid[:, None], experts, num_experts).astype(jnp.int32)
    return Routing(experts=experts, weights=weights, counts=expert_counts(experts, num_experts))


def expert_counts(experts: jax.Array, num_experts: int) -> jax.Array:
    """int32 [num_experts]: how many of `experts` (any shape) name each; index num_experts counts nowhere."""
    return jnp.zeros(num_experts, jnp.int32).at[experts.reshape(-1)].add(1, mode="drop")


Params = dict[str, jax.Array]  # gate_proj, up_proj, down_proj [E, ...] and any `<proj>_lora_a/b`


def project(name: str, x: jax.Array, params: Params, scale: float, dot: Callable) -> jax.Array:
    """x through expert projection `name` by `dot(x, stacked weight)`: x W, plus (alpha / r) (x A) B
    (`scale` = alpha / r) when `params` holds its LoRA factors."""
    y = dot(x, params[name])
    a = params.get(f"{name}_lora_a")
    if a is None:
        return y
    h = dot(x, a) * jnp.asarray(scale, y.dtype)
    return y + dot(h, params[f"{name}_lora_b"])


def _expert_mlp(x: jax.Array, params: Params, scale: float, dot: Callable) -> jax.Array:
    """SwiGLU through each expert's gate, up and down projections, `dot` grouping rows by expert."""
    gate, up = (project(name, x, params, scale, dot) for name in ("gate_proj", "up_proj"))
    return project("down_proj", jax.nn.silu(gate) * up, params, scale, dot)


def _every_expert(x: jax.Array, w: jax.Array) -> jax.Array:
    """x [N, d] (every token) or [E, N, d] (each expert's) times w [E, d, o] -> [E, N, o]."""
    return jnp.einsum("nd,edo->eno" if x.ndim == 2 else "end,edo->eno", x, w)


def dense_experts(x: jax.Array, routing: Routing, params: Params, scale: float = 1.0) -> jax.Array:
    """Reference: x [N, H] through every expert (`params`: weights [E, H, I], [E, H, I], [E, I, H]
    and any LoRA factors), combined by the gate weights; fp32 [N, H]."""
    n, e = x.shape[0], params["gate_proj"].shape[0]
    rows = jnp.arange(n)[:, None]
    combine = jnp.zeros((n, e + 1), F32).at[rows, routing.experts].add(routing.weights)[:, :e]
    out = _expert_mlp(x, params, scale, _every_expert)
    return jnp.einsum("enh,ne->nh", out, combine.astype(out.dtype), preferred_element_type=F32)


def ragged_experts(x: jax.Array, routing: Routing, params: Params, scale: float = 1.0) -> jax.Array:
    """Grouped matmuls: the N * k (token, expert) pairs sorted by expert, each expert's contiguous
    rows times its weights (`jax.lax.ragged_dot`; LoRA factors too), unsorted and summed per token;
    fp32 [N, H]."""
    n, k = routing.experts.shape
    order = jnp.argsort(routing.experts.reshape(-1), stable=True)  # unrouted (index E) sort last
    rows = x[order // k]  # [N * k, H]
    sizes = routing.counts
    grouped = lambda v, w: jax.lax.ragged_dot(v, w, sizes)  # noqa: E731
    out = _expert_mlp(rows, params, scale, grouped)  # rows past the groups: unrouted, weight 0 below
    routed = jnp.arange(n * k) < jnp.sum(sizes)
    out = jnp.where(routed[:, None], out, 0)[jnp.argsort(order)].reshape(n, k, -1)
    return jnp.einsum("nkh,nk->nh", out, routing.weights.astype(out.dtype), preferred_element_type=F32)


EXPERTS = {"ragged": ragged_experts, "dense": dense_experts}
ExpertsFn = Callable[[jax.Array, Routing, Params], jax.Array]


def shard_routing(experts: jax.Array, weights: jax.Array, first: jax.Array, count: int) -> Routing:
    """The routing of token copies to the `count` experts from `first` (one shard's), renumbered from
    0; copies for other experts are not routed here (index `count`, weight 0)."""
    local = experts - first
    mine = (local >= 0) & (local < count)
    local = jnp.where(mine, local, count)
    return Routing(experts=local, weights=jnp.where(mine, weights, 0.0), counts=expert_counts(local, count))


def gather_exchange(
    compute: ExpertsFn, x: jax.Array, experts: jax.Array, weights: jax.Array, params: Params
) -> jax.Array:
    """One shard's n tokens x [n, H] (their `experts` and gate `weights` [n, k]) through the experts
    of every shard: all tokens of the expert axis gathered, this shard's experts' share of each
    computed, the shares summed and scattered back; fp32 [n, H]."""
    count = params["gate_proj"].shape[0]
    first = jax.lax.axis_index(EXPERT_AXIS) * count
    xs, experts, weights = (jax.lax.all_gather(a, EXPERT_AXIS, tiled=True) for a in (x, experts, weights))
    out = compute(xs, shard_routing(experts, weights, first, count), params)
    return jax.lax.psum_scatter(out, EXPERT_AXIS, scatter_dimension=0, tiled=True)


def all_to_all_exchange(
    compute: ExpertsFn, x: jax.Array, experts: jax.Array, weights: jax.Array, params: Params
) -> jax.Array:
    """As `gather_exchange`, moving only each token copy to its expert's shard and back: copies
    sorted by expert (so by shard; unrouted last), sent with ragged_all_to_all, grouped there by
    local expert, computed, returned to their places; fp32 [n, H]."""
    (n, k), count = experts.shape, params["gate_proj"].shape[0]
    shards, me = jax.lax.axis_size(EXPERT_AXIS), jax.lax.axis_index(EXPERT_AXIS)
    order = jnp.argsort(experts.reshape(-1), stable=True)
    table = jax.lax.all_gather(expert_counts(experts, shards * count), EXPERT_AXIS)  # [src, E] copies
    sent = table.reshape(shards, shards, count).sum(-1)  # [src, dst] rows
    start = jnp.cumsum(sent, axis=1) - sent  # where src's rows for dst begin among its sorted copies
    place = jnp.cumsum(sent, axis=0) - sent  # where src's rows begin in dst's receive buffer
    buffer = jnp.zeros((shards * n * k, x.shape[1]), x.dtype)
    got = jax.lax.ragged_all_to_all(
        x[order // k], buffer, start[me], sent[me], place[me], sent[:, me], axis_name=EXPERT_AXIS
    )
    mine = jax.lax.dynamic_slice_in_dim(table, me * count, count, axis=1).reshape(-1)  # [src x local]
    local = jnp.repeat(jnp.tile(jnp.arange(count), shards), mine, total_repeat_length=buffer.shape[0])
    local = jnp.where(jnp.arange(buffer.shape[0]) < jnp.sum(mine), local, count)[:, None]
    routing = Routing(experts=local, weights=(local < count).astype(F32), counts=expert_counts(local, count))
    out = compute(got, routing, params).astype(x.dtype)  # each row its own expert's output
    back = jax.lax.ragged_all_to_all(
        out,
        jnp.zeros((n * k, x.shape[1]), x.dtype),
        place[:, me],
        sent[:, me],
        start[:, me],
        sent[me],
        axis_name=EXPERT_AXIS,
    )  # rows of unrouted copies stay 0
    back = back[jnp.argsort(order)].reshape(n, k, -1)
    return jnp.einsum("nkh,nk->nh", back, weights.astype(back.dtype), preferred_element_type=F32)


EXCHANGES = {"gather": gather_exchange, "all_to_all": all_to_all_exchange}


def _mesh_axes(spec_entry: Any) -> tuple[str, ...]:
    """The mesh axes one dimension of a PartitionSpec is split over."""
    return (spec_entry,) if isinstance(spec_entry, str) else tuple(spec_entry or ())


def expert_parallel(
    x: jax.Array, routing: Routing, params: Params, compute: ExpertsFn, exchange: str, mesh: AbstractMesh
) -> jax.Array:
    """`compute` (an `EXPERTS` function) of x [N, H] with the experts (gate, up, down and any LoRA
    factors) sharded over `mesh`'s expert axis and tokens moved by `EXCHANGES[exchange]`; fp32
    [N, H]. N is padded with unrouted tokens to split evenly over the row axes."""
    shape = dict(mesh.shape)
    num, shards = params["gate_proj"].shape[0], shape[EXPERT_AXIS]
    if num % shards:
        raise ValueError(f"num_experts ({num}) must be a multiple of mesh.expert ({shards})")
    rows = row_axes(shape)
    n, pad = x.shape[0], -x.shape[0] % math.prod(shape[a] for a in rows)
    tokens = (
        jnp.pad(x, ((0, pad), (0, 0))),
        jnp.pad(routing.experts, ((0, pad), (0, 0)), constant_values=num),
        jnp.pad(routing.weights, ((0, pad), (0, 0))),
    )
    specs = {name: logical_to_spec(param_names(name), p.shape, shape) for name, p in params.items()}
    embed, mlp = _mesh_axes(specs["gate_proj"][1]), _mesh_axes(specs["gate_proj"][2])

    def body(x, experts, weights, params):
        gathered = {
            name: jax.lax.all_gather(p, embed, axis=param_names(name).index("embed"), tiled=True)
            if "embed" in param_names(name)
            else p
            for name, p in params.items()
        }
        return jax.lax.psum(EXCHANGES[exchange](compute, x, experts, weights, gathered), mlp)

    row_spec = P(rows, None)
    run = jax.shard_map(body, mesh=mesh, in_specs=(row_spec,) * 3 + (specs,), out_specs=row_spec)
    return run(*tokens, params)[:n]


class MoeBlock(nnx.Module):
    """Router [H, E] and stacked expert weights: gate/up [E, H, I], down [E, I, H]."""

    def __init__(
        self,
        cfg: Qwen3Config,
        *,
        rngs: nnx.Rngs,
        dtype: Any,
        param_dtype: Any,
        experts: str,
        exchange: str = "gather",
    ):
        """`experts`: "ragged" or "dense" (`resolve_experts`); `exchange`: how tokens reach experts on
        other shards of a mesh's expert axis (`resolve_exchange`; "gather" runs on every platform)."""
        moe = cfg.moe
        h, i, e = cfg.hidden_size, moe.moe_intermediate_size, moe.num_experts
        init = nnx.initializers.normal(cfg.initializer_range)
        self.router = make_param(rngs, (h, e), ("embed", None), init, param_dtype)
        self.gate_proj = make_param(rngs, (e, h, i), EXPERT_NAMES["gate_proj"], init, param_dtype)
        self.up_proj = make_param(rngs, (e, h, i), EXPERT_NAMES["up_proj"], init, param_dtype)
        self.down_proj = make_param(rngs, (e, i, h), EXPERT_NAMES["down_proj"], init, param_dtype)
        self.top_k = moe.num_experts_per_tok
        self.renorm = moe.norm_topk_prob
        self.experts = experts
        self.exchange = exchange
        self.dtype = dtype

    @property
    def num_experts(self) -> int:
        return self.router.shape[-1]

    def expert_params(self) -> Params:
        """The expert weights and any LoRA factors on them, in the compute dtype."""
        adapted = [f"{n}_lora_{w}" for n in EXPERT_NAMES for w in "ab" if hasattr(self, f"{n}_lora_a")]
        return {n: getattr(self, n)[...].astype(self.dtype) for n in [*EXPERT_NAMES, *adapted]}

    def router_probs(self, x: jax.Array) -> jax.Array:
        """x [N, H] (compute dtype) -> the router's softmax fp32 [N, E] (logits in fp32)."""
        w = self.router[...].astype(self.dtype)
        return jax.nn.softmax(jnp.einsum("nh,he->ne", x, w, preferred_element_type=F32), axis=-1)

    def choose(self, probs: jax.Array, valid: jax.Array, routes: jax.Array | None = None) -> Routing:
        """The routing of tokens with router softmax `probs` [N, E] and `valid` [N] bool: top-k, or
        the given experts `routes` [N, k] (replay) with their probabilities; a token whose given
        experts are negative (none recorded) keeps its top-k."""
        top, chosen = jax.lax.top_k(probs, self.top_k)
        if routes is not None:
            given = routes.astype(jnp.int32)
            chosen = jnp.where(given[:, :1] >= 0, given, chosen)
            top = jnp.take_along_axis(probs, chosen, axis=-1)
        return gates(top, chosen, valid, self.num_experts, self.renorm)

    def route(self, x: jax.Array, valid: jax.Array) -> Routing:
        """x [N, H] (compute dtype), valid [N] bool -> the routing (logits and softmax in fp32)."""
        return self.choose(self.router_probs(x), valid)

    def __call__(self, x: jax.Array, valid: jax.Array | None = None) -> jax.Array:
        """x [B, T, H] -> [B, T, H]; `valid` [B, T] bool (None: every token) marks the tokens routed."""
        return self.forward(x, valid)[0]

    def forward(
        self, x: jax.Array, valid: jax.Array | None = None, routes: jax.Array | None = None
    ) -> tuple[jax.Array, RouterStats, jax.Array]:
        """`__call__`'s output, the router's statistics over the valid tokens and the experts each
        token went to, [B, T, k] `route_dtype` (0 for invalid tokens); `routes` [B, T, k]: experts to
        use instead of top-k. On a mesh with an expert axis of size > 1 the experts run sharded
        (`expert_parallel`)."""
        b, t, h = x.shape
        flat = x.reshape(b * t, h)
        valid = jnp.ones((b * t,), bool) if valid is None else valid.reshape(b * t)
        probs = self.router_probs(flat)
        routing = self.choose(probs, valid, None if routes is None else routes.reshape(b * t, -1))
        compute = functools.partial(EXPERTS[self.experts], scale=getattr(self, "lora_scale", 1.0))
        mesh = jax.sharding.get_abstract_mesh()
        if mesh.empty or dict(mesh.shape).get(EXPERT_AXIS, 1) == 1:
            out = compute(flat, routing, self.expert_params())
        else:
            out = expert_parallel(flat, routing, self.expert_params(), compute, self.exchange, mesh)
        out = constrain(out.astype(self.dtype).reshape(b, t, h), ("batch", "seq", "act_embed"))
        e = self.num_experts
        chosen = jnp.where(routing.experts < e, routing.experts, 0).astype(route_dtype(e))
        return out, router_stats(probs, routing.counts, valid, self.top_k), chosen.reshape(b, t, -1)


class MoeDecoderLayer(DecoderLayer):
    """A decoder layer whose MLP is the routed experts; padding tokens are not routed."""

    def __init__(self, cfg: Qwen3Config, *, rngs: nnx.Rngs, runtime: ModelRuntime):
        """`runtime` resolved (models.qwen3.resolve_runtime): its `moe_experts` "ragged" or "dense"."""
        dtype, param_dtype = runtime.dtype, runtime.param_dtype
        self.input_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype=dtype, param_dtype=param_dtype)
        self.attn = Attention(cfg, rngs=rngs, runtime=runtime)
        self.post_attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype=dtype, param_dtype=param_dtype)
        self.mlp = MoeBlock(
            cfg,
            rngs=rngs,
            dtype=dtype,
            param_dtype=param_dtype,
            experts=runtime.moe_experts,
            exchange=resolve_exchange(runtime.platform),
        )

    def feed_forward(
        self, x: jax.Array, valid: jax.Array | None, routes: jax.Array | None
    ) -> tuple[jax.Array, tuple[RouterStats, jax.Array]]:
        """The routed experts' output and (router statistics, the experts chosen [B, T, k])."""
        out, stats, chosen = self.mlp.forward(x, valid, routes)
        return out, (stats, chosen)
