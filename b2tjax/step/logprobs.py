"""Token log-probabilities over the vocabulary, computed in sequence chunks.

A [B, T, V] logits tensor for a 150k vocabulary is the largest activation of an LLM train step, so
it is never built: the final hidden states are projected chunk by chunk inside a `lax.scan`, and
each chunk is rematerialised in the backward pass (only [B, chunk, V] is alive at any time).

A sequence that fits in one chunk is projected directly, without the scan and without
rematerialisation: with one chunk the backward pass holds that chunk's [B, chunk, V] either way, so
recomputing it would only cost time.

Temperature convention: the sampler's `models.logits.token_logprobs` (log_softmax(logits / T)[id],
unfiltered by top-p/top-k) is called on each chunk, so trainer and sampler compute the same number;
`valid_vocab` (the tokenizer's size) excludes the model's padded embedding rows from the softmax
exactly as the sampler does.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from models.logits import tempered_logits, token_logprobs


def _chunk_logprobs(
    h: jax.Array, w: jax.Array, targets: jax.Array, temperature: float, valid_vocab: int | None
) -> tuple[jax.Array, jax.Array]:
    """h [B, C, H], w [H, V], targets [B, C] -> (log p(target) [B, C], entropy [B, C]) in fp32."""
    logits = jnp.einsum("bch,hv->bcv", h, w.astype(h.dtype), preferred_element_type=jnp.float32)
    # Entropy (logged, never differentiated) as logsumexp - E_p[scaled]: one fused pass over the
    # chunk's [B, C, V], no log-softmax materialised. Masked ids have p == 0 and a finite value.
    scaled = jax.lax.stop_gradient(tempered_logits(logits, temperature, valid_vocab))
    lse = jax.nn.logsumexp(scaled, axis=-1)
    entropy = lse - jnp.sum(jnp.exp(scaled - lse[..., None]) * scaled, axis=-1)
    return token_logprobs(logits, targets, temperature, valid_vocab), entropy


def hidden_logprobs(
    hidden: jax.Array,
    lm_head: jax.Array,
    targets: jax.Array,
    *,
    temperature: float = 1.0,
    chunk_size: int = 128,
    valid_vocab: int | None = None,
) -> tuple[jax.Array, jax.Array]:
    """log p(targets[b, t] | hidden[b, t]) and the entropy there, both [B, T] fp32.

    hidden [B, T, H] (any float dtype), lm_head [H, V], targets [B, T] int32; ids >= valid_vocab
    (padded embedding rows) are outside the distribution.
    T is padded up to a multiple of `chunk_size`; the padding is dropped from the result.
    """
    batch, length, width = hidden.shape
    chunk = max(1, min(chunk_size, length))
    num_chunks = -(-length // chunk)
    if num_chunks == 1:
        return _chunk_logprobs(hidden, lm_head, targets, temperature, valid_vocab)
    pad = num_chunks * chunk - length
    if pad:
        hidden = jnp.pad(hidden, ((0, 0), (0, pad), (0, 0)))
        targets = jnp.pad(targets, ((0, 0), (0, pad)))
    # [num_chunks, B, chunk, ...] so the scan walks over sequence chunks.
    h_chunks = hidden.reshape(batch, num_chunks, chunk, width).swapaxes(0, 1)
    t_chunks = targets.reshape(batch, num_chunks, chunk).swapaxes(0, 1)

    body = jax.checkpoint(_chunk_logprobs, static_argnums=(3, 4))

    def step(carry, xs):
        h, t = xs
        return carry, body(h, lm_head, t, temperature, valid_vocab)

    _, (lp, ent) = jax.lax.scan(step, None, (h_chunks, t_chunks))
    lp = lp.swapaxes(0, 1).reshape(batch, num_chunks * chunk)[:, :length]
    ent = ent.swapaxes(0, 1).reshape(batch, num_chunks * chunk)[:, :length]
    return lp, ent


def forward(model, ids: jax.Array, segments: tuple[Any, ...] | None) -> tuple[jax.Array, Any]:
    """The final hidden states [B, T, H] and the routers' statistics (models/router_stats.py; None
    for a dense model); `segments` = (segment_ids, token_positions, routes) of packed rows
    (b2tjax.step.packing): attention within a segment, RoPE at the record's own positions, padding
    (segment 0) unrouted, each token through the experts `routes` gives (router replay; None: top-k)."""
    with jax.named_scope("forward"):
        if segments is None:
            return model.hidden_and_router(ids)
        segment_ids, token_positions, routes = segments
        return model.hidden_and_router(ids, token_positions, segment_ids, routes)


def sequence_logprobs(
    model,
    ids: jax.Array,
    *,
    temperature: float = 1.0,
    chunk_size: int = 128,
    valid_vocab: int | None = None,
    segments: tuple[jax.Array, jax.Array] | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Per-token log-probs aligned with `ids` [B, T]: out[b, t] = log p(ids[b, t] | ids[b, :t]).

    Position 0 has no prediction and gets 0.0 (it is always a prompt token). This matches the
    EpisodeRecord convention (one log-prob per id). Returns (logprobs, entropy), both [B, T] fp32.
    In packed rows a record's first token is predicted from the previous record's last: its mask
    is 0 (as position 0's), so that value is never read.
    """
    hidden = forward(model, ids, segments)[0]
    return sequence_head(
        model, hidden, ids, temperature=temperature, chunk_size=chunk_size, valid_vocab=valid_vocab
    )


def sequence_head(model, hidden: jax.Array, ids: jax.Array, **kw: Any) -> tuple[jax.Array, jax.Array]:
    """`sequence_logprobs` from the forward's `hidden` [B, T, H]; `kw`: its head settings."""
    with jax.named_scope("logprobs"):  # the chunked lm-head projection and log-softmax
        lp, ent = hidden_logprobs(hidden[:, :-1], model.lm_head_weight(), ids[:, 1:], **kw)
    zeros = jnp.zeros((ids.shape[0], 1), jnp.float32)
    return jnp.concatenate([zeros, lp], axis=1), jnp.concatenate([zeros, ent], axis=1)


def position_logprobs(
    model,
    ids: jax.Array,
    positions: jax.Array,
    *,
    temperature: float = 1.0,
    chunk_size: int = 128,
    valid_vocab: int | None = None,
    segments: tuple[jax.Array, jax.Array] | None = None,
) -> tuple[jax.Array, jax.Array]:
    """`sequence_logprobs` at `positions` [B, K] only: out[b, k] = log p(ids[b, p] | ids[b, :p])
    with p = positions[b, k] >= 1 (and the entropy there), both [B, K] fp32.

    The hidden states before those tokens are gathered first, so the output head is projected at
    K positions, not at all T (its backward is a scatter-add of [B, K, H] into [B, T, H]). Entries
    with p = 0 (padding of `train_batch.loss_positions`) hold the prediction of ids[b, 0] from
    itself: finite, meaningless, and weighted 0 by the caller's mask.
    """
    hidden = forward(model, ids, segments)[0]
    kw = dict(temperature=temperature, chunk_size=chunk_size, valid_vocab=valid_vocab)
    return position_head(model, hidden, ids, positions, **kw)


def position_head(
    model, hidden: jax.Array, ids: jax.Array, positions: jax.Array, **kw: Any
) -> tuple[jax.Array, jax.Array]:
    """`position_logprobs` from the forward's `hidden` [B, T, H]; `kw`: its head settings."""
    with jax.named_scope("logprobs"):
        before = jnp.maximum(positions - 1, 0)  # the state that predicts token p is at p - 1
        picked = jnp.take_along_axis(hidden, before[..., None], axis=1)  # [B, K, H]
        targets = jnp.take_along_axis(ids, positions, axis=1)
        return hidden_logprobs(picked, model.lm_head_weight(), targets, **kw)


def spread_positions(values: jax.Array, positions: jax.Array, length: int) -> jax.Array:
    """[B, K] values at `positions` -> [B, T] with 0.0 everywhere else (position 0 included)."""
    rows = jnp.arange(values.shape[0])[:, None]
    values = jnp.where(positions > 0, values, 0.0)  # padding entries all point at position 0
    return jnp.zeros((values.shape[0], length), values.dtype).at[rows, positions].add(values)
