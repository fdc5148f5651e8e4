"""The jitted programs of the rollout: prefill (append tokens to chosen cache rows) and a decode
segment (a `lax.while_loop` sampling one token per row per step), compiled per model graph and
shape bucket, and `ModelRunner`, which holds the sampler's weights and both programs.

Shapes are static per bucket: B rows, cache length S, prefill rows R and chunk T, decode segment
length N (rollout.buckets). Sampling parameters are runtime arrays [B], so changing them never
recompiles; `compiled_functions` lists what does. The sampling math (keys, top-p/top-k, log-probs)
is rollout/sampling.py, shared with the trainer.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from models import paged_kv
from models.causal_lm import CausalLM
from models.layers import with_paged_attention
from models.moe import route_layout
from models.sharding import on_mesh
from rollout.buckets import pow2_bucket
from rollout.placement import SamplerWeights
from rollout.sampling import (
    SamplingArrays,
    alternative_inputs,
    alternatives_program,
    row_keys,
    sample_tokens,
)


class Finish(enum.IntEnum):
    """How a row's decode segment ended: the int32 codes of `Segment.finish`."""

    NONE = 0  # row inactive or still running
    STOP = 1  # sampled a stop token (<|im_end|> / <|endoftext|>)
    BUDGET = 2  # reached its token budget for this segment


class ModelRunner:
    """The sampler's own copy of the weights (compute dtype, laid out for sampling on `mesh`: see
    rollout/placement.py) and the jitted prefill / decode functions (compiled per bucket)."""

    def __init__(
        self,
        model: CausalLM,
        valid_vocab: int | None = None,
        mesh: Mesh | None = None,
        paged_attention: str | None = None,
        routes: bool = False,
    ):
        """`routes` (router replay, a Qwen3-MoE only): the programs also return the experts each MoE
        layer chose for every token they compute."""
        # rollout.paged_attention, when given, decides how a paged cache is read (else the model's own)
        sampler = model if paged_attention is None else with_paged_attention(model, paged_attention)
        self.graphdef, state = nnx.split(sampler)
        self.weights = SamplerWeights(state, model.dtype, mesh)
        self.state = self.weights.create(state)
        prefill, decode = compiled_functions(self.graphdef, valid_vocab, program_platform(mesh), routes)
        self.prefill, self.decode = on_mesh(prefill, mesh), on_mesh(decode, mesh)
        self._alternatives = on_mesh(alternatives_program(self.graphdef, valid_vocab), mesh)
        self.copy_pages = on_mesh(copy_pages, mesh)

    def alternatives(self, ids: list[int], start: int, temperature: float) -> tuple[np.ndarray, np.ndarray]:
        """For each token ids[t], t >= start: the TOP_LOGPROBS likeliest tokens at its position and
        their log-probs under these weights, ([n, K] int32, [n, K] fp32) on the host. A forward of
        its own (rollout/sampling.py `alternatives_program`): the decode programs stay as lean as
        training needs them; only the weights are shared, read and never donated."""
        n = len(ids) - start
        tokens, at = alternative_inputs(ids, start)
        top, lps = self._alternatives(self.state, tokens, at, jnp.float32(temperature))
        return np.asarray(top)[:n], np.asarray(lps)[:n]

    def update_state(self, model: CausalLM) -> None:
        """New weights, same graph (e.g. after a training step): cast and resharded on the devices
        into the previous copy's buffers; no recompilation."""
        self.state = self.weights.refresh(nnx.state(model), self.state)


def decode_bucket(max_turn_tokens: int) -> int:
    """Static length of a decode segment: a power of two >= the turn budget (few compiles)."""
    return pow2_bucket(max_turn_tokens)


def program_platform(mesh: Mesh | None) -> str:
    """The platform the programs are compiled for: the mesh's devices' (a deviceless TPU or GPU
    topology's when launch/plan.py plans a run from a CPU host), else the default backend's."""
    return jax.default_backend() if mesh is None else mesh.devices.flat[0].platform


@functools.lru_cache(maxsize=16)
def compiled_functions(
    graphdef: Any, valid_vocab: int | None, platform: str, routes: bool = False
) -> tuple[Any, Any]:
    """Jitted (prefill, decode) per model graph, vocabulary and target platform, shared by every
    engine on them. On "cpu" they take XLA CPU's fast forms (the tied head as E x h^T, the decode
    layers unrolled over per-layer weights); the platform is the target's, never the host's
    backend, so a TPU plan compiled on a CPU host is the TPU run's program.

    `routes`: the prefill's third output and `DecodeOut.routes` are the experts chosen for every
    token computed (router replay), else None (no output).

    What recompiles: `graphdef`, `valid_vocab`, `platform` and `routes` (bound here: one pair per model),
    `max_steps` (decode's only static argument: one program per segment bucket, and one for a
    server's stream segment, rollout/sampling.py `StreamSampling.segment`) and the *shapes*
    of the array arguments -- rows B and cache slots S (fixed per engine), the prefill's row count
    R and width T (powers of two, rollout.buckets). Everything else is a runtime array and never
    recompiles: tokens, num_new, reset, rows, active, budget, the SamplingArrays (temperature,
    top-p, top-k, seeds, stream ordinals), the rng key and `stop_after`. The cache and the logits
    are donated (updated in place)."""
    cpu = platform == "cpu"
    prefill = jax.jit(functools.partial(_prefill, graphdef, cpu, routes), donate_argnums=(4, 5))
    decode = jax.jit(
        functools.partial(_decode, graphdef, valid_vocab, cpu, routes),
        static_argnames=("max_steps",),
        donate_argnums=(1, 2),
    )
    return prefill, decode


def _prefill(graphdef, cpu, routes, state, rows, tokens, num_new, cache, next_logits, reset):
    """Append tokens[i, :num_new[i]] to cache row rows[i] (after resetting it where reset[i]).

    Only the R selected rows are computed and only their new slots are written (the donated cache
    is updated in place), so refilling one row of a large batch costs one row. rows int32 [R]
    (distinct); tokens int32 [R, T]; num_new int32 [R] (0 leaves a row untouched); reset bool [R];
    next_logits fp32 [B, V]. Returns (next_logits [B, V], cache, the experts chosen [R, T, L, k]
    when `routes`, else None). `rows=None` means every row in order (R = B): no row is gathered or
    scattered, so on a mesh each device extends its own rows.
    """
    model = nnx.merge(graphdef, state)
    if rows is None:
        cache = dataclasses.replace(cache, lengths=jnp.where(reset, 0, cache.lengths))
        last, cache, chosen = model.routed_forward_cached(
            tokens, num_new, cache, last_only=True, table_first_head=cpu
        )
        return jnp.where((num_new > 0)[:, None], last, next_logits), cache, chosen if routes else None
    lengths = cache.lengths.at[rows].set(jnp.where(reset, 0, cache.lengths[rows]))
    cache = dataclasses.replace(cache, lengths=lengths)
    last, cache, chosen = model.routed_forward_cached(
        tokens, num_new, cache, last_only=True, rows=rows, table_first_head=cpu
    )  # fp32 [R, V]
    updated = jnp.where((num_new > 0)[:, None], last, next_logits[rows])
    return next_logits.at[rows].set(updated), cache, chosen if routes else None


# A prefix copy (rollout/prefix.py): full pages are shared by the page table, only partly filled
# last pages (or pages crossing row shards) move (models/paged_kv.py).
copy_pages = jax.jit(paged_kv.copy_pages, donate_argnums=(0,))


class DecodeCarry(NamedTuple):
    """The `lax.while_loop` state of a decode segment (B rows, N = max_steps, V vocabulary).

    `state` rides in the carry: NNX refuses Variables whose values are tracers of an outer trace
    level, so the model is merged from the loop's own copy."""

    state: Any  # nnx.State: the sampler's weights
    layers: Any  # on CPU the layer weights split per layer (Qwen3ForCausalLM.layer_weights), else None
    step: jax.Array  # int32 []: loop iterations so far (the output column written next)
    cache: Any  # models.paged_kv.PagedKVCache: the page pool, B rows' page tables and fill lengths int32 [B]
    logits: jax.Array  # fp32 [B, V]: next-token logits of every row
    alive: jax.Array  # bool [B]: still sampling this segment
    count: jax.Array  # int32 [B]: tokens sampled this segment
    finish: jax.Array  # int32 [B]: the Finish code of rows that stopped
    out_ids: jax.Array  # int32 [B, N]: sampled ids (0 past count)
    out_lp: jax.Array  # fp32 [B, N]: their log-probs (0 past count)
    out_routes: Any  # router replay: the experts chosen for the sampled ids [B, N, L, k]; else None


class DecodeOut(NamedTuple):
    """A decode segment's result; ids/logprobs [B, N], count/finish [B], then the device state."""

    ids: jax.Array
    logprobs: jax.Array
    count: jax.Array
    finish: jax.Array
    cache: Any
    next_logits: jax.Array
    routes: Any  # [B, N, L, k] route_dtype for the ids (router replay), else None


def _segment_layers(graphdef: Any, state: Any, cpu: bool) -> Any:
    """A decode segment's per-layer weights on CPU, else None (the steps scan the stacked ones).
    XLA's CPU backend copies each layer's slice of the stacked weights in every step of the layer
    scan; split once per segment (a second copy of the layer weights while it runs), the steps
    read them in place. GPU and TPU keep the scan: one compiled layer, no second copy."""
    return nnx.merge(graphdef, state).layer_weights() if cpu else None


def _feed_tokens(graphdef: Any, c: DecodeCarry, tok: jax.Array, cpu: bool) -> tuple[jax.Array, Any, Any]:
    """One decode step's model call: each alive row's sampled token tok int32 [B] appended to its
    cache row; (next-token logits fp32 [B, V], the cache, the experts chosen [B, 1, L, k] or None)."""
    model = nnx.merge(graphdef, c.state)
    fed = c.alive.astype(jnp.int32)  # 1 token for a live row, none for a stopped one
    return model.routed_forward_cached(
        tok[:, None], fed, c.cache, last_only=True, layer_states=c.layers, table_first_head=cpu
    )


def _decode_step(
    graphdef: Any,
    valid_vocab: int,
    cpu: bool,
    params: SamplingArrays,
    stop_ids: jax.Array,
    key: jax.Array,
    budget: jax.Array,
    c: DecodeCarry,
) -> DecodeCarry:
    """One iteration of the decode loop: sample a token for every row, write it (and its log-prob)
    into the output column `c.step` where the row is alive, feed it back into the cache, and stop
    the rows that sampled a stop token or used up their budget."""
    keys = row_keys(key, params.seed, params.stream, c.cache.lengths)
    tok, lp = sample_tokens(c.logits, keys, params.temperature, params.top_p, params.top_k, valid_vocab)
    out_ids = jax.lax.dynamic_update_slice(c.out_ids, jnp.where(c.alive, tok, 0)[:, None], (0, c.step))
    out_lp = jax.lax.dynamic_update_slice(c.out_lp, jnp.where(c.alive, lp, 0.0)[:, None], (0, c.step))
    count = c.count + c.alive.astype(jnp.int32)
    new_logits, cache, chosen = _feed_tokens(graphdef, c, tok, cpu)
    out_routes = c.out_routes
    if out_routes is not None:  # compiled with routes: the chosen experts of the tokens fed
        out_routes = jax.lax.dynamic_update_slice(out_routes, chosen, (0, c.step, 0, 0))
    is_stop = jnp.any(tok[:, None] == stop_ids[None, :], axis=-1)
    out_of_budget = count >= budget
    finish = jnp.where(
        c.alive & is_stop, int(Finish.STOP), jnp.where(c.alive & out_of_budget, int(Finish.BUDGET), c.finish)
    )
    return DecodeCarry(
        state=c.state,
        layers=c.layers,
        step=c.step + 1,
        cache=cache,
        logits=jnp.where(c.alive[:, None], new_logits, c.logits),
        alive=c.alive & ~is_stop & ~out_of_budget,
        count=count,
        finish=finish,
        out_ids=out_ids,
        out_lp=out_lp,
        out_routes=out_routes,
    )


def _initial_carry(
    graphdef: Any,
    cpu: bool,
    routes: bool,
    state: Any,
    cache: Any,
    next_logits: jax.Array,
    alive0: jax.Array,
    max_steps: int,
) -> DecodeCarry:
    """The decode loop's state before its first step: nothing sampled, outputs zero-filled."""
    batch = next_logits.shape[0]
    out_routes = None
    if routes:
        layers, k, dtype = route_layout(nnx.merge(graphdef, state).config)
        out_routes = jnp.zeros((batch, max_steps, layers, k), dtype)
    return DecodeCarry(
        state=state,
        layers=_segment_layers(graphdef, state, cpu),
        step=jnp.int32(0),
        cache=cache,
        logits=next_logits,
        alive=alive0,
        count=jnp.zeros(batch, jnp.int32),
        finish=jnp.zeros(batch, jnp.int32),
        out_ids=jnp.zeros((batch, max_steps), jnp.int32),
        out_lp=jnp.zeros((batch, max_steps), jnp.float32),
        out_routes=out_routes,
    )


def _decode(
    graphdef,
    valid_vocab,
    cpu,
    routes,
    state,
    cache,
    next_logits,
    active,
    budget,
    params,
    stop_ids,
    key,
    stop_after=None,
    *,
    max_steps,
) -> DecodeOut:
    """Decode up to `max_steps` tokens for every active row, one token per row per step.

    Ids >= valid_vocab (padded embedding rows) are never sampled and excluded from the log-probs.

    A row stops on a stop token or when it has produced `budget[b]` tokens; the loop returns when
    every row has stopped, or as soon as `stop_after` (int32 scalar, traced: any value, one
    compile; None = every active row) rows have stopped, leaving the others mid-turn
    (Finish.NONE) for the next segment, so the host can start on the finished turns early.
    Every sampled token (stop token included) is fed back into the cache, so afterwards
    cache.lengths[b] == number of tokens in row b's record. active bool [B], budget int32 [B],
    params SamplingArrays [B], stop_ids int32 [K], key a typed rng key.
    """
    alive0 = active & (budget > 0)
    if stop_after is None:
        stop_after = jnp.sum(alive0, dtype=jnp.int32)

    def cond(carry: DecodeCarry) -> jax.Array:
        stopped = jnp.sum(alive0 & ~carry.alive, dtype=jnp.int32)
        return (carry.step < max_steps) & jnp.any(carry.alive) & (stopped < stop_after)

    def body(c: DecodeCarry) -> DecodeCarry:
        return _decode_step(graphdef, valid_vocab, cpu, params, stop_ids, key, budget, c)

    init = _initial_carry(graphdef, cpu, routes, state, cache, next_logits, alive0, max_steps)
    c = jax.lax.while_loop(cond, body, init)
    return DecodeOut(c.out_ids, c.out_lp, c.count, c.finish, c.cache, c.logits, c.out_routes)
