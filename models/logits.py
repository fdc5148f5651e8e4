"""A token's probability under the model's distribution: the one definition the sampler
(rollout/sampling.py) and the trainer (b2tjax/step/logprobs.py) both call, so a recorded log-prob
and the trainer's recomputation of it are the same number. Here, below both, so that neither
imports the other.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


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
