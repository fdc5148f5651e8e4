"""Jitted generation: prefill/append of new tokens and a `lax.while_loop` decode segment.

Log-prob convention (shared with the trainer, b2tjax/logprobs.py): the log-probability of a token is
taken under the *tempered, unfiltered* distribution, log_softmax(logits / T)[id]. Top-p / top-k
only decide which tokens may be sampled; they do not renormalise the recorded log-probs, so the
trainer can recompute exactly the same number from logits alone. Greedy rows (T <= 0) record
log-probs at T = 1. `token_logprobs` is the one definition both sides call. Ids at or above the
tokenizer's vocabulary size (the model's padded embedding rows) are masked on both sides
(`mask_padded_vocab`): never sampled, and excluded from every log-softmax.

Shapes are static per bucket: B rows, cache length S, prefill chunk T, decode segment length N.
Sampling parameters are runtime arrays [B], so changing them never recompiles.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from models.sharding import on_mesh

FINISH_NONE = 0  # row inactive or still running
FINISH_STOP = 1  # sampled a stop token (<|im_end|> / <|endoftext|>)
FINISH_BUDGET = 2  # reached its token budget for this segment


def effective_temperature(temperature: jax.Array | float) -> jax.Array:
    """Temperature used for log-probs: T, or 1.0 for greedy rows (T <= 0)."""
    t = jnp.asarray(temperature, jnp.float32)
    return jnp.where(t > 0, t, 1.0)


def mask_padded_vocab(logits: jax.Array, valid_vocab: int | None) -> jax.Array:
    """fp32 logits [..., V] with ids >= valid_vocab (padded embedding rows, e.g. Qwen3's 151,936 rows
    for 151,669 tokens: ids no tokenizer can decode) set to the most negative finite fp32: never
    sampled, zero probability, and finite (so entropy and gradients stay NaN-free). Apply it after
    any temperature scaling (dividing the mask value by T < 1 would overflow to -inf)."""
    if valid_vocab is None or valid_vocab >= logits.shape[-1]:
        return logits
    valid = jnp.arange(logits.shape[-1], dtype=jnp.int32) < valid_vocab
    return jnp.where(valid, logits, jnp.finfo(jnp.float32).min)


def tempered_logits(
    logits: jax.Array, temperature: jax.Array | float, valid_vocab: int | None = None
) -> jax.Array:
    """logits / T in fp32 (T = 1 for greedy rows), padded ids masked. temperature scalar or [...]."""
    t = effective_temperature(temperature)
    scaled = logits.astype(jnp.float32) / (t[..., None] if t.ndim else t)
    return mask_padded_vocab(scaled, valid_vocab)


def token_logprobs(
    logits: jax.Array, ids: jax.Array, temperature: jax.Array | float, valid_vocab: int | None = None
) -> jax.Array:
    """log_softmax(logits / T)[ids] in fp32 over the first `valid_vocab` ids (all when None).
    logits [..., V], ids [...], temperature scalar or [...]. Computed as scaled[id] - logsumexp,
    so no [..., V] log-softmax is materialised."""
    scaled = tempered_logits(logits, temperature, valid_vocab)
    picked = jnp.take_along_axis(scaled, ids[..., None].astype(jnp.int32), axis=-1)[..., 0]
    return picked - jax.nn.logsumexp(scaled, axis=-1)


def _filter_top_p_top_k(scaled: jax.Array, top_p: jax.Array, top_k: jax.Array) -> jax.Array:
    """Mask (to -inf) tokens outside the top-k and the top-p nucleus. scaled [B, V] fp32."""
    vocab = scaled.shape[-1]
    desc = -jnp.sort(-scaled, axis=-1)  # [B, V]
    probs = jax.nn.softmax(desc, axis=-1)
    before = jnp.cumsum(probs, axis=-1) - probs  # mass strictly above
    rank = jnp.arange(vocab)[None, :]
    keep = (before < top_p[:, None]) & ((top_k[:, None] <= 0) | (rank < top_k[:, None]))
    keep = keep.at[:, 0].set(True)
    threshold = jnp.min(jnp.where(keep, desc, jnp.inf), axis=-1)  # [B]
    return jnp.where(scaled >= threshold[:, None], scaled, -jnp.inf)


def sample_tokens(
    logits: jax.Array,
    keys: jax.Array,
    temperature: jax.Array,
    top_p: jax.Array,
    top_k: jax.Array,
    valid_vocab: int | None = None,
) -> tuple[jax.Array, jax.Array]:
    """One token per row and its log-prob. logits [B, V] fp32, keys [B] typed keys, params [B].
    When every row is greedy, no random draw or top-p/top-k sort runs (a lax.cond skips them)."""
    with jax.named_scope("sample"):
        return _sample_tokens(logits, keys, temperature, top_p, top_k, valid_vocab)


def _sample_tokens(logits, keys, temperature, top_p, top_k, valid_vocab):  # sample_tokens, unscoped
    greedy = jnp.argmax(mask_padded_vocab(logits.astype(jnp.float32), valid_vocab), axis=-1)

    def draw() -> jax.Array:
        scaled = tempered_logits(logits, temperature, valid_vocab)
        needs_filter = jnp.any((top_p < 1.0) | (top_k > 0))
        filtered = jax.lax.cond(needs_filter, _filter_top_p_top_k, lambda s, p, k: s, scaled, top_p, top_k)
        return jnp.where(temperature > 0, jax.vmap(jax.random.categorical)(keys, filtered), greedy)

    ids = jax.lax.cond(jnp.any(temperature > 0), draw, lambda: greedy).astype(jnp.int32)
    return ids, token_logprobs(logits, ids, temperature, valid_vocab)


class SamplingArrays(NamedTuple):
    """Per-row runtime sampling parameters, all [B]."""

    temperature: jax.Array  # fp32; <= 0 means greedy
    top_p: jax.Array  # fp32; 1.0 disables
    top_k: jax.Array  # int32; 0 disables
    seed: jax.Array  # int32 episode seed: a row's samples do not depend on its batch mates
    stream: jax.Array  # int32 creation ordinal of the row's stream inside its episode


def row_keys(key: jax.Array, seeds: jax.Array, streams: jax.Array, positions: jax.Array) -> jax.Array:
    """A key per row from (episode seed, stream ordinal, position), folded in one after another:
    sampling is independent of row placement, and no two streams of any episodes share a key,
    however many streams an episode has (a single combined number such as episode * 64 + stream
    collides from stream 64 on). Stream 0 uses the episode key itself, so single-stream episodes
    draw exactly the samples they drew before streams had ordinals of their own."""

    def one(seed: jax.Array, stream: jax.Array, position: jax.Array) -> jax.Array:
        episode_key = jax.random.fold_in(key, seed)
        stream_key = jnp.where(stream > 0, jax.random.fold_in(episode_key, stream), episode_key)
        return jax.random.fold_in(stream_key, position)

    return jax.vmap(one)(seeds, streams, positions)


class ModelRunner:
    """The sampler's own copy of the weights (compute dtype, laid out for sampling on `mesh`: see
    rollout/placement.py) and the jitted prefill / decode functions (compiled per bucket)."""

    def __init__(self, model: nnx.Module, valid_vocab: int | None = None, mesh: Mesh | None = None):
        from rollout.placement import SamplerWeights

        self.graphdef, state = nnx.split(model)
        self.weights = SamplerWeights(state, model.dtype, mesh)
        self.state = self.weights.create(state)
        prefill, decode = compiled_functions(self.graphdef, valid_vocab)
        self.prefill, self.decode = on_mesh(prefill, mesh), on_mesh(decode, mesh)

    def update_state(self, model: nnx.Module) -> None:
        """New weights, same graph (e.g. after a training step): cast and resharded on the devices
        into the previous copy's buffers; no recompilation."""
        self.state = self.weights.refresh(nnx.state(model), self.state)


def decode_bucket(max_turn_tokens: int) -> int:
    """Static length of a decode segment: a power of two >= the turn budget (few compiles)."""
    size = 16
    while size < max_turn_tokens:
        size *= 2
    return size


@functools.lru_cache(maxsize=16)
def compiled_functions(graphdef: Any, valid_vocab: int | None = None) -> tuple[Any, Any]:
    """Jitted (prefill, decode) per model graph and vocabulary, shared by every engine on them."""
    prefill = jax.jit(functools.partial(_prefill, graphdef), donate_argnums=(4, 5))
    decode = jax.jit(
        functools.partial(_decode, graphdef, valid_vocab),
        static_argnames=("max_steps",),
        donate_argnums=(1, 2),
    )
    return prefill, decode


def _prefill(graphdef, state, rows, tokens, num_new, cache, next_logits, reset):
    """Append tokens[i, :num_new[i]] to cache row rows[i] (after resetting it where reset[i]).

    Only the R selected rows are computed and only their new slots are written (the donated cache
    is updated in place), so refilling one row of a large batch costs one row. rows int32 [R]
    (distinct); tokens int32 [R, T]; num_new int32 [R] (0 leaves a row untouched); reset bool [R];
    next_logits fp32 [B, V]. Returns (next_logits [B, V], cache). `rows=None` means every row in
    order (R = B): no row is gathered or scattered, so on a mesh each device extends its own rows.
    """
    model = nnx.merge(graphdef, state)
    if rows is None:
        cache = dataclasses.replace(cache, lengths=jnp.where(reset, 0, cache.lengths))
        last, cache = model.forward_cached(tokens, num_new, cache, last_only=True)
        return jnp.where((num_new > 0)[:, None], last, next_logits), cache
    lengths = cache.lengths.at[rows].set(jnp.where(reset, 0, cache.lengths[rows]))
    cache = dataclasses.replace(cache, lengths=lengths)
    last, cache = model.forward_cached(tokens, num_new, cache, last_only=True, rows=rows)  # fp32 [R, V]
    updated = jnp.where((num_new > 0)[:, None], last, next_logits[rows])
    return next_logits.at[rows].set(updated), cache


def _decode(
    graphdef,
    valid_vocab,
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
):
    """Decode up to `max_steps` tokens for every active row, one token per row per step.

    Ids >= valid_vocab (padded embedding rows) are never sampled and excluded from the log-probs.

    A row stops on a stop token or when it has produced `budget[b]` tokens; the loop returns when
    every row has stopped, or as soon as `stop_after` (int32 scalar, traced: any value, one
    compile; None = every active row) rows have stopped, leaving the others mid-turn
    (FINISH_NONE) for the next segment, so the host can start on the finished turns early.
    Every sampled token (stop token included) is fed back into the cache, so afterwards
    cache.lengths[b] == number of tokens in row b's record.
    Returns ids int32 [B, N], logprobs fp32 [B, N], count int32 [B], finish int32 [B],
    cache, next_logits [B, V].
    """
    batch = next_logits.shape[0]
    alive0 = active & (budget > 0)
    if stop_after is None:
        stop_after = jnp.sum(alive0, dtype=jnp.int32)

    def cond(carry):
        _, step, _, _, alive, *_ = carry
        stopped = jnp.sum(alive0 & ~alive, dtype=jnp.int32)
        return (step < max_steps) & jnp.any(alive) & (stopped < stop_after)

    def body(carry):
        # `state` rides in the carry: NNX refuses Variables whose values are tracers of an outer
        # trace level, so the model is merged from the loop's own copy.
        state, step, cache, logits, alive, count, finish, out_ids, out_lp = carry
        keys = row_keys(key, params.seed, params.stream, cache.lengths)
        tok, lp = sample_tokens(logits, keys, params.temperature, params.top_p, params.top_k, valid_vocab)
        out_ids = jax.lax.dynamic_update_slice(out_ids, jnp.where(alive, tok, 0)[:, None], (0, step))
        out_lp = jax.lax.dynamic_update_slice(out_lp, jnp.where(alive, lp, 0.0)[:, None], (0, step))
        count = count + alive.astype(jnp.int32)
        model = nnx.merge(graphdef, state)
        new_logits, cache = model.forward_cached(tok[:, None], alive.astype(jnp.int32), cache, last_only=True)
        logits = jnp.where(alive[:, None], new_logits, logits)
        is_stop = jnp.any(tok[:, None] == stop_ids[None, :], axis=-1)
        out_of_budget = count >= budget
        finish = jnp.where(
            alive & is_stop, FINISH_STOP, jnp.where(alive & out_of_budget, FINISH_BUDGET, finish)
        )
        alive = alive & ~is_stop & ~out_of_budget
        return state, step + 1, cache, logits, alive, count, finish, out_ids, out_lp

    carry = (
        state,
        jnp.int32(0),
        cache,
        next_logits,
        alive0,
        jnp.zeros(batch, jnp.int32),
        jnp.zeros(batch, jnp.int32),
        jnp.zeros((batch, max_steps), jnp.int32),
        jnp.zeros((batch, max_steps), jnp.float32),
    )
    _, _, cache, next_logits, _, count, finish, out_ids, out_lp = jax.lax.while_loop(cond, body, carry)
    return out_ids, out_lp, count, finish, cache, next_logits


def teacher_forced_logprobs(
    model: nnx.Module, ids: list[int], temperature: float, valid_vocab: int | None = None
) -> np.ndarray:
    """log p(ids[t] | ids[:t]) for t >= 1 from one full causal forward pass ([len(ids) - 1] fp32).

    The independent reference the sampler's recorded log-probs are checked against. The input is
    padded at the end to a power of two (causal: padding never changes earlier positions), so
    records of similar length share one compilation.
    """
    graphdef, state = nnx.split(model)
    width = 16
    while width < len(ids):
        width *= 2
    tokens = np.zeros((1, width), np.int32)
    tokens[0, : len(ids)] = ids
    out = _teacher_forced(graphdef, valid_vocab, state, jnp.asarray(tokens), jnp.float32(temperature))
    return np.asarray(out)[0, : len(ids) - 1]


@functools.partial(jax.jit, static_argnums=(0, 1))
def _teacher_forced(graphdef, valid_vocab, state, tokens, temperature):
    logits = nnx.merge(graphdef, state)(tokens)  # [1, W, V]
    return token_logprobs(logits[:, :-1], tokens[:, 1:], temperature, valid_vocab)  # [1, W - 1]
