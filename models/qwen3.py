"""Qwen3ForCausalLM in Flax NNX: decoder layers created stacked (nnx.vmap) and run with a layer scan.
A config with `moe` (HF `Qwen3MoeForCausalLM`) builds the same model with routed experts in its
sparse layers (models/moe.py; layer stacks: models/stacks.py), computed as `runtime.moe_experts` says.

Entry points (the contract other packages rely on):
- `model(ids, positions, segment_ids)`: logits without a cache (training, teacher forcing);
  `segment_ids` [B, T] packs records into rows (0 = padding), each attending only within itself.
  `attention=` picks the uncached attention: "auto" (the Pallas splash kernel in programs for a
  TPU, cuDNN's fused `jax.nn.dot_product_attention` on a GPU in bf16/fp16, the reference path
  elsewhere; `platform=` is the target's, from the mesh), "reference" (our blocked einsum), "xla",
  "cudnn", "splash" (models/splash.py); scores and softmax are fp32 in every one. `remat` and
  `attention_block` trade memory for time. `routed_forward` (and `routed_forward_cached`) also return a
  Qwen3-MoE's router statistics and chosen experts, the layer scan's outputs, and take given experts.
- `forward_cached(tokens [R, T], num_new [R], cache, rows=[R])` extends only cache rows `rows`
  (models/kv_cache.py); `last_only=True` returns only each row's next-token logits [R, V] (the
  prefill: [R, T, vocab] logits never exist); `layer_states=model.layer_weights()` runs the layers
  unrolled over per-layer weights (the CPU decode, where each scan step copied a layer's weight
  slice); `table_first_head=True` takes a tied head as E x h^T (XLA:CPU ran h x E^T at half speed).
  The CPU forms are chosen by the platform the caller compiles for
  (`rollout.programs.program_platform(mesh)`), never by the host's backend.
- Sliding window: `Qwen3Config.sliding_window = W` makes every layer attend to its last W tokens
  (HF Qwen3 with `use_sliding_window` and `max_window_layers=0`; the import refuses configs that
  slide only some layers), on every path. The Qwen3 releases use full attention.
- RoPE scaling: `Qwen3Config.rope_scaling` (linear or YaRN, models/rope.py) rotates q and k in
  `Attention.qkv`, the one place every path (uncached, prefill, decode) rotates, so the keys a KV
  cache holds are rotated exactly as a training forward rotates them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, get_args

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from models.config import Qwen3Config
from models.kv_cache import CachedCall, KVCache, init_cache, write_slots
from models.layers import F32, RMSNorm, make_param, resolve_attention
from models.moe import resolve_experts
from models.paged_kernel import resolve_paged_attention
from models.paged_kv import PagedKVCache
from models.router_stats import RouterStats
from models.settings import DEFAULT_RUNTIME, AttentionImpl, ModelRuntime, Remat
from models.sharding import constrain, mesh_platform, state_shardings
from models.stacks import decoder_stacks

__all__ = ["Qwen3ForCausalLM", "KVCache", "init_cache", "REMAT_POLICIES", "Remat", "AttentionImpl"]

# Parameter / compute dtypes selectable by name (command lines, config.json "torch_dtype").
DTYPES: dict[str, Any] = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}

REMAT_POLICIES: dict[str, Callable[..., bool] | None] = {
    "full": None,
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
    "dots_all": jax.checkpoint_policies.dots_saveable,
}
assert set(REMAT_POLICIES) == set(get_args(Remat)) - {"none"}, "a Remat name without its policy"


class Embedder(nnx.Module):
    """Token embedding table [V, H]; also the output projection when embeddings are tied."""

    def __init__(self, cfg: Qwen3Config, *, rngs: nnx.Rngs, dtype: Any, param_dtype: Any):
        init = nnx.initializers.normal(cfg.initializer_range)
        self.embedding = make_param(
            rngs, (cfg.vocab_size, cfg.hidden_size), ("vocab", "embed"), init, param_dtype
        )
        self.dtype = dtype

    def __call__(self, ids: jax.Array) -> jax.Array:
        with jax.named_scope("embed"):
            return jnp.take(self.embedding[...].astype(self.dtype), ids, axis=0)


class LMHead(nnx.Module):
    """Untied output projection [H, V] (applied by Qwen3ForCausalLM.logits)."""

    def __init__(self, cfg: Qwen3Config, *, rngs: nnx.Rngs, param_dtype: Any):
        init = nnx.initializers.normal(cfg.initializer_range)
        self.kernel = make_param(
            rngs, (cfg.hidden_size, cfg.vocab_size), ("embed", "vocab"), init, param_dtype
        )


class Qwen3ForCausalLM(nnx.Module):
    """Qwen3 decoder-only LM: what it is (`cfg`), how it executes (`runtime`, models.settings.ModelRuntime:
    dtypes, remat, the attention implementations and blocks, the platform its programs compile for).
    "auto" attention is the Pallas splash kernel in programs for a TPU, cuDNN's fused kernel on a GPU
    in bf16/fp16, else the reference path; "auto" paged attention is the Pallas decode kernel in
    programs for a TPU with a bf16 pool (prefill chunks always gather)."""

    def __init__(self, cfg: Qwen3Config, *, rngs: nnx.Rngs, runtime: ModelRuntime = DEFAULT_RUNTIME):
        runtime = resolve_runtime(runtime)
        self.config = cfg
        self.runtime = runtime
        self.embed = Embedder(cfg, rngs=rngs, dtype=runtime.dtype, param_dtype=runtime.param_dtype)
        # `layers` (every Param with a leading axis named "layers"), for a Qwen3-MoE with dense-MLP
        # layers also `dense_layers`; `runs` says in which order they run (models/stacks.py)
        self.runs, self.layers, dense_layers = decoder_stacks(cfg, rngs, runtime)
        if dense_layers is not None:
            self.dense_layers = dense_layers
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype=self.dtype, param_dtype=self.param_dtype)
        if not cfg.tie_word_embeddings:
            self.lm_head = LMHead(cfg, rngs=rngs, param_dtype=self.param_dtype)

    @property
    def dtype(self) -> Any:
        """The compute dtype (the runtime's)."""
        return self.runtime.dtype

    @property
    def param_dtype(self) -> Any:
        """The stored dtype of the parameters (the runtime's)."""
        return self.runtime.param_dtype

    @property
    def remat(self) -> str:
        return self.runtime.remat

    # ----------------------------------------------------------------------------------------
    def _layer_runs(self) -> list[tuple[Any, Any, range]]:
        """The layers in model order as runs of one stack each: (graphdef, stacked state, the
        model's layer indices it holds). One run for dense Qwen3; a Qwen3-MoE with dense-MLP
        layers has one per consecutive kind, each a slice of its stack."""
        out = []
        for name, start, stop, first in self.runs:
            graphdef, state = nnx.split(getattr(self, name))
            if (start, stop) != (0, len(jax.tree.leaves(state)[0])):
                state = jax.tree.map(lambda a, start=start, stop=stop: a[start:stop], state)
            out.append((graphdef, state, range(first, first + stop - start)))
        return out

    def _run_layers(
        self, x: jax.Array, positions: jax.Array, segment_ids: jax.Array | None = None, routes: Any = None
    ) -> tuple[jax.Array, Any]:
        """Scan the stacked layers over x [B, T, H] (no cache; rematerialised per `remat`); with it
        (the routers' statistics [L, ...], the experts chosen [B, T, L, k]) over the MoE layers in
        model order (scanned outputs; None for dense Qwen3, whose scans output nothing). `routes`
        [B, T, L, k]: the experts each MoE layer uses instead of its top-k.

        A plain jax.lax.scan over the split layer state (merged back per step) rather than nnx.scan:
        identical program, and it also works when the model was merged at an outer trace level
        (e.g. a sampler's lax.while_loop closing over the model), where nnx transforms refuse."""
        given = None if routes is None else jnp.moveaxis(routes, 2, 0)  # [L, B, T, k]
        auxes = []
        for (graphdef, layer_state, _), (name, start, stop, _) in zip(self._layer_runs(), self.runs):
            run_routes = None if given is None or name != "layers" else given[start:stop]

            def body(x: jax.Array, xs, graphdef=graphdef):
                return nnx.merge(graphdef, xs[0])(x, positions, segment_ids, xs[1])

            if self.remat != "none":
                body = jax.checkpoint(body, policy=REMAT_POLICIES[self.remat], prevent_cse=False)
            with jax.named_scope("layers"):
                x, aux = jax.lax.scan(body, x, (layer_state, run_routes))
            auxes += [] if aux is None else [aux]
        if not auxes:
            return x, None
        stats, chosen = jax.tree.map(lambda *a: jnp.concatenate(a), *auxes)
        return x, (stats, jnp.moveaxis(chosen, 0, 2))

    def layer_weights(self) -> list[Any]:
        """The stacked layers' state as one state per layer (a copy of the layer weights), for a
        loop of many cached steps to pass to `forward_cached(layer_states=...)`: XLA's CPU backend
        copies each layer's slice of a stacked weight before its dot in every step of the layer
        scan (~63 MB a step per Qwen3-0.6B layer), an unrolled loop over separate arrays reads
        them in place."""
        return [
            jax.tree.map(lambda a, j=j: a[j], state)
            for _, state, layers in self._layer_runs()
            for j in range(len(layers))
        ]

    def _run_layers_cached(
        self, x: jax.Array, call: CachedCall, cache: KVCache, layer_states: list[Any] | None = None
    ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array | None]:
        """The layer scan with the whole stacked cache in the *carry*: layer l writes its slots and
        reads its live blocks of the one buffer, so no step copies the cache (inputs and outputs
        of a scan would be a full copy per call). With `layer_states` (`layer_weights`), the
        layers run unrolled on those separate arrays instead of scanned. Returns (x, k, v, the
        experts the MoE layers chose [R, T, L, k], None for dense Qwen3)."""
        runs = self._layer_runs()
        carry, chosen = (x, cache.k, cache.v), []
        if layer_states is not None:
            graphdefs = [graphdef for graphdef, _, layers in runs for _ in layers]
            for i, (graphdef, state_i) in enumerate(zip(graphdefs, layer_states, strict=True)):
                carry, c = nnx.merge(graphdef, state_i).cached(carry[0], jnp.int32(i), call, *carry[1:])
                chosen += [] if c is None else [c[None]]
            runs = []  # run unrolled above
        for graphdef, layer_state, layers in runs:

            def body(carry, xs, graphdef=graphdef):
                return nnx.merge(graphdef, xs[0]).cached(carry[0], xs[1], call, *carry[1:])

            index = jnp.arange(layers.start, layers.stop, dtype=jnp.int32)
            with jax.named_scope("layers"):
                carry, c = jax.lax.scan(body, carry, (layer_state, index))
            chosen += [] if c is None else [c]
        return *carry, jnp.moveaxis(jnp.concatenate(chosen), 0, 2) if chosen else None

    def lm_head_weight(self) -> jax.Array:
        """[H, V] in param dtype: the transposed embedding when tied."""
        if self.config.tie_word_embeddings:
            return self.embed.embedding[...].T
        return self.lm_head.kernel[...]

    def logits(self, hidden: jax.Array) -> jax.Array:
        """hidden [B, T, H] -> fp32 logits [B, T, V] (fp32 accumulation)."""
        with jax.named_scope("lm_head"):
            w = self.lm_head_weight().astype(self.dtype)
            out = jnp.einsum("bth,hv->btv", hidden.astype(self.dtype), w, preferred_element_type=F32)
            return constrain(out, ("batch", "seq", "act_vocab"))

    def next_token_logits(self, hidden: jax.Array, table_first: bool = False) -> jax.Array:
        """hidden [R, H] (one position per row: a decode step, a prefill's last token) -> fp32
        logits [R, V], as `logits` computes them.

        `table_first` (for XLA's CPU backend; with tied embeddings) takes the product as
        E [V, H] x hidden^T: XLA's CPU dot (XNNPACK) with the few rows as M and the transposed table
        streams it about half as fast (measured: 61 vs 34 ms CPU time for 4 x 1,024 x 151,936
        fp32), and the head is most of a decode step. The barrier keeps the algebraic simplifier
        from folding the [V, R] -> [R, V] transpose back into the slow form. GPU and TPU compilers
        take hidden x E^T well, and a separate transpose of [V, R] logits would cost real bandwidth
        at many rows, so the programs for them leave it off."""
        if not (table_first and self.config.tie_word_embeddings):
            return self.logits(hidden[:, None])[:, 0]
        with jax.named_scope("lm_head"):
            w = self.embed.embedding[...].astype(self.dtype)  # [V, H]
            out = jnp.einsum("vh,rh->vr", w, hidden.astype(self.dtype), preferred_element_type=F32)
            return constrain(jax.lax.optimization_barrier(out).T, ("batch", "act_vocab"))

    def hidden_states(
        self,
        input_ids: jax.Array,
        positions: jax.Array | None = None,
        segment_ids: jax.Array | None = None,
    ) -> jax.Array:
        """Causal forward without cache: int32 [B, T] -> final-normed hidden [B, T, H] (compute dtype).
        `positions` [B, T] only change RoPE; attention is causal by index. `segment_ids` [B, T]
        int32 packs several records into a row (0 = padding, records 1, 2, ... in a row; the caller
        restarts `positions` at 0 per record): a token attends only to earlier tokens of its own
        segment, so each record's logits are those of the record alone. None: one sequence a row."""
        return self.hidden_and_router(input_ids, positions, segment_ids)[0]

    def hidden_and_router(
        self,
        input_ids: jax.Array,
        positions: jax.Array | None = None,
        segment_ids: jax.Array | None = None,
        routes: jax.Array | None = None,
    ) -> tuple[jax.Array, RouterStats | None]:
        """`hidden_states` and the routers' statistics over the real tokens (segment_ids != 0),
        stacked [L, ...] over the MoE layers (models/router_stats.py); None for dense Qwen3."""
        hidden, router = self.routed_forward(input_ids, positions, segment_ids, routes)
        return hidden, None if router is None else router[0]

    def routed_forward(
        self,
        input_ids: jax.Array,
        positions: jax.Array | None = None,
        segment_ids: jax.Array | None = None,
        routes: jax.Array | None = None,
    ) -> tuple[jax.Array, tuple[RouterStats, jax.Array] | None]:
        """`hidden_states` and, for a Qwen3-MoE, (the routers' statistics, the experts each MoE layer
        chose per token: [B, T, L_moe, k] `models.moe.route_dtype`, 0 for padding; None for dense).
        `routes` (that form): experts to use instead of top-k (replay; gradient via their probs)."""
        if input_ids.ndim != 2:
            raise ValueError(f"input_ids must be [batch, seq], got shape {input_ids.shape}")
        b, t = input_ids.shape
        if segment_ids is not None and segment_ids.shape != (b, t):
            raise ValueError(f"segment_ids must be [{b}, {t}] like input_ids, got shape {segment_ids.shape}")
        if routes is not None and self.config.moe is None:
            raise ValueError("routes given to a dense Qwen3 model (router replay needs a Qwen3-MoE)")
        if positions is None:
            positions = jnp.broadcast_to(jnp.arange(t, dtype=jnp.int32), (b, t))
        x = constrain(self.embed(input_ids), ("batch", "seq", "act_embed"))
        x, router = self._run_layers(x, positions, segment_ids, routes)
        with jax.named_scope("final_norm"):
            return self.norm(x), router

    def __call__(
        self,
        input_ids: jax.Array,
        positions: jax.Array | None = None,
        segment_ids: jax.Array | None = None,
    ) -> jax.Array:
        """int32 [B, T] -> fp32 logits [B, T, V], causal (within segments: `hidden_states`)."""
        return self.logits(self.hidden_states(input_ids, positions, segment_ids))

    def forward_cached(self, tokens: jax.Array, num_new: jax.Array, cache: Any, **kw: Any) -> tuple:
        """`routed_forward_cached` without the experts chosen (`kw`: its options)."""
        return self.routed_forward_cached(tokens, num_new, cache, **kw)[:2]

    def routed_forward_cached(
        self,
        tokens: jax.Array,
        num_new: jax.Array,
        cache: KVCache | PagedKVCache,
        last_only: bool = False,
        rows: jax.Array | None = None,
        layer_states: list[Any] | None = None,
        table_first_head: bool = False,
    ) -> tuple[jax.Array, KVCache, jax.Array | None]:
        """Append tokens[r, :num_new[r]] to cache row r (or rows[r]) at positions cache.lengths[...].

        Prefill, one-token decode and chunk append are this one call. tokens int32 [R, T];
        num_new int32 [R] in [0, T]; `rows` int32 [R], distinct: the cache rows the call's rows
        extend (None: all B rows in order, R = B), so a refill of a few rows of a large batch
        computes only those. Returns fp32 logits [R, T, V] (row r's next-token logits at index
        num_new[r] - 1; entries past num_new[r] are meaningless), the new cache and the experts the
        MoE layers chose ([R, T, L_moe, k] as `routed_forward`'s, None for dense Qwen3). Rows with
        num_new 0 are untouched; tokens that would land past the cache end are dropped and the
        length saturates at max_len. `last_only=True` returns only each row's next-token logits,
        fp32 [R, V] (index num_new[r] - 1; row 0's for num_new 0), which saves the [R, T, V] tensor
        when prefilling long prompts with a large vocabulary. Cost follows the live length of the
        longest row, not max_len; donate the cache (or carry it in a loop) so it updates in place.
        `layer_states`: the layers' weights from `layer_weights` (run unrolled), or None (scanned).
        `table_first_head`: the last-only logits in `next_token_logits`' CPU form."""
        if tokens.ndim != 2:
            raise ValueError(f"tokens must be [batch, seq], got shape {tokens.shape}")
        r, t = tokens.shape
        if rows is None and r != cache.batch_size:
            raise ValueError(f"tokens batch {r} != cache batch {cache.batch_size}")
        if rows is not None and rows.shape != (r,):
            raise ValueError(f"rows must be [{r}] (one cache row per tokens row), got shape {rows.shape}")
        num_new = jnp.asarray(num_new, jnp.int32)
        s = cache.max_len
        lengths = cache.lengths if rows is None else cache.lengths[rows]
        positions = lengths[:, None] + jnp.arange(t, dtype=jnp.int32)[None, :]
        filled = lengths + num_new  # [R] slots written once this call is done
        slots = write_slots(positions, num_new, s)
        call = CachedCall(
            positions=positions, filled=filled, slots=slots, rows=rows, pages=cache.row_pages(rows)
        )
        x = constrain(self.embed(tokens), ("batch", "seq", "act_embed"))
        x, k, v, chosen = self._run_layers_cached(x, call, cache, layer_states)
        with jax.named_scope("final_norm"):
            hidden = self.norm(x)
        if last_only:
            last = jnp.maximum(num_new - 1, 0)
            logits = self.next_token_logits(hidden[jnp.arange(r), last], table_first_head)  # [R, V]
        else:
            logits = self.logits(hidden)
        new_lengths = jnp.minimum(filled, s)
        new_lengths = new_lengths if rows is None else cache.lengths.at[rows].set(new_lengths)
        return logits, cache.replace(k=k, v=v, lengths=new_lengths), chosen


# -- building a model, sharded on a mesh or shape-only ---------------------------------------------
def resolve_runtime(runtime: ModelRuntime) -> ModelRuntime:
    """`runtime` checked, with its dtypes as dtypes, its platform filled in (None: this host's
    backend) and its attention resolved for that platform; unknown names are a ValueError."""
    if runtime.remat not in get_args(Remat):
        raise ValueError(f"unknown remat policy {runtime.remat!r}; choose from {list(get_args(Remat))}")
    if runtime.attention_block is not None and runtime.attention_block <= 0:
        raise ValueError(f"attention_block must be positive or None, got {runtime.attention_block}")
    if runtime.cache_block <= 0:
        raise ValueError(f"cache_block must be positive, got {runtime.cache_block}")
    dtype, param_dtype = jnp.dtype(runtime.dtype), jnp.dtype(runtime.param_dtype)
    platform = jax.default_backend() if runtime.platform is None else runtime.platform
    resolve_paged_attention(runtime.paged_attention, platform, dtype)  # rejects unknown names now
    return dataclasses.replace(
        runtime,
        dtype=dtype,
        param_dtype=param_dtype,
        platform=platform,
        attention=resolve_attention(runtime.attention, dtype, platform),
        moe_experts=resolve_experts(runtime.moe_experts, platform),
    )


def on_mesh(runtime: ModelRuntime, mesh: Mesh | None) -> ModelRuntime:
    """`runtime` for programs on `mesh`: its platform the mesh's devices' (this host's without one)."""
    return dataclasses.replace(runtime, platform=mesh_platform(mesh))


def create_model(config, mesh: Mesh | None = None, seed: int = 0, runtime: ModelRuntime = DEFAULT_RUNTIME):
    """Build a Qwen3ForCausalLM whose params are created directly as sharded arrays on `mesh`
    (jit with out_shardings; nothing is materialised whole on one device first); its attention
    is the one for the mesh's platform."""
    runtime = on_mesh(runtime, mesh)
    build = lambda: Qwen3ForCausalLM(config, rngs=nnx.Rngs(seed), runtime=runtime)
    if mesh is None:
        return build()
    graphdef, abs_state = nnx.split(nnx.eval_shape(build))
    pure = jax.jit(
        lambda: nnx.to_pure_dict(nnx.state(build())), out_shardings=state_shardings(abs_state, mesh)
    )()
    nnx.replace_by_pure_dict(abs_state, pure)
    return nnx.merge(graphdef, abs_state)


def abstract_model(config, runtime: ModelRuntime = DEFAULT_RUNTIME):
    """Shape-only model (no memory): used to build shardings / restore targets (the runtime's
    platform: the restoring mesh's, `on_mesh`)."""
    return nnx.eval_shape(lambda: Qwen3ForCausalLM(config, rngs=nnx.Rngs(0), runtime=runtime))
