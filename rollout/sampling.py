"""Sampling math, shared by the rollout's jitted programs (rollout/programs.py) and the trainer:
per-row keys, top-p/top-k sampling, and the one log-prob definition; plus the teacher-forced
reference the sampler's log-probs are tested against, and the likeliest alternatives to tokens a
served request sampled (its `top_logprobs`).

Log-prob convention (shared with the trainer, b2tjax/step/logprobs.py): the log-probability of a token is
taken under the *tempered, unfiltered* distribution, log_softmax(logits / T)[id]. Top-p / top-k
only decide which tokens may be sampled; they do not renormalise the recorded log-probs, so the
trainer can recompute exactly the same number from logits alone. Greedy rows (T <= 0) record
log-probs at T = 1. `models.logits.token_logprobs` is the one definition both sides call. Ids at or
above the tokenizer's vocabulary size (the model's padded embedding rows) are masked on both sides
(`models.logits.mask_padded_vocab`): never sampled, and excluded from every log-softmax.

Sampling parameters are runtime arrays [B] (`SamplingArrays`), so changing them never recompiles.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from models.causal_lm import CausalLM
from models.logits import mask_padded_vocab, tempered_logits, token_logprobs
from rollout.buckets import pow2_bucket


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


@dataclasses.dataclass(frozen=True)
class StreamSampling:
    """One stream's own sampling parameters (a served request's), instead of the engine config's;
    `seed` replaces the episode's sampling seed. The programs take them as runtime arrays: no compile.
    `segment` (a streamed reply): while the stream samples, a decode segment runs at most that many
    steps, so its tokens reach the host that often (one more decode program, compiled once per
    value); None: the engine's segment. Tokens do not depend on it (keys follow positions)."""

    temperature: float
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    segment: int | None = None


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


def teacher_forced_logprobs(
    model: CausalLM, ids: list[int], temperature: float, valid_vocab: int | None = None
) -> np.ndarray:
    """log p(ids[t] | ids[:t]) for t >= 1 from one full causal forward pass ([len(ids) - 1] fp32).

    The independent reference the sampler's recorded log-probs are checked against. The input is
    padded at the end to a power of two (causal: padding never changes earlier positions), so
    records of similar length share one compilation.
    """
    graphdef, state = nnx.split(model)
    width = pow2_bucket(len(ids))
    tokens = np.zeros((1, width), np.int32)
    tokens[0, : len(ids)] = ids
    out = _teacher_forced(graphdef, valid_vocab, state, jnp.asarray(tokens), jnp.float32(temperature))
    return np.asarray(out)[0, : len(ids) - 1]


@functools.partial(jax.jit, static_argnums=(0, 1))
def _teacher_forced(graphdef, valid_vocab, state, tokens, temperature):
    logits = nnx.merge(graphdef, state)(tokens)  # [1, W, V]
    return token_logprobs(logits[:, :-1], tokens[:, 1:], temperature, valid_vocab)  # [1, W - 1]


TOP_LOGPROBS = 20  # the most alternatives a served token reports (OpenAI's top_logprobs bound)
HEAD_CHUNK = 128  # positions per head product in `alternatives`: [128, V] fp32 logits at a time


def alternatives_program(graphdef: Any, valid_vocab: int | None) -> Any:
    """jit(state, tokens [1, W], at [S], temperature) -> ([S, K] ids, [S, K] log-probs): after
    each position in `at`, the K = TOP_LOGPROBS likeliest next tokens under log_softmax(logits / T)
    (the records' convention). One causal forward; the head runs only at `at`, HEAD_CHUNK
    positions at a time, so no [W, V] logits exist (a 32k-token context's would be 19 GB)."""

    def run(state, tokens, at, temperature):
        model = nnx.merge(graphdef, state)
        hidden = model.hidden_states(tokens)[0, at]  # [S, H]
        chunk = min(HEAD_CHUNK, hidden.shape[0])  # S and HEAD_CHUNK are powers of two

        def head(h: jax.Array) -> tuple[jax.Array, jax.Array]:
            scaled = tempered_logits(model.logits(h[None])[0], temperature, valid_vocab)
            lps, ids = jax.lax.top_k(jax.nn.log_softmax(scaled, axis=-1), TOP_LOGPROBS)
            return ids.astype(jnp.int32), lps

        ids, lps = jax.lax.map(head, hidden.reshape(-1, chunk, hidden.shape[-1]))
        return ids.reshape(-1, TOP_LOGPROBS), lps.reshape(-1, TOP_LOGPROBS)

    return jax.jit(run)


def alternative_inputs(ids: list[int], start: int) -> tuple[np.ndarray, np.ndarray]:
    """`alternatives_program`'s tokens [1, W] and positions [S] for the tokens ids[start:] (the
    position before each; W and S powers of two, so similar requests share a compile)."""
    tokens = np.zeros((1, pow2_bucket(len(ids))), np.int32)
    tokens[0, : len(ids)] = ids
    at = np.zeros((pow2_bucket(len(ids) - start),), np.int32)
    at[: len(ids) - start] = np.arange(start - 1, len(ids) - 1)
    return tokens, at
