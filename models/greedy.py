"""Minimal jitted greedy decoding on the KV cache: a reference for tests and the model benchmark
(the real sampler, with stopping and tool turns, lives in rollout/)."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from models.kv_cache import init_cache


def greedy_generate(
    model,
    prompt: jax.Array,
    prompt_lens: jax.Array,
    max_new_tokens: int,
    max_len: int | None = None,
    cache_dtype: Any = None,
) -> jax.Array:
    """prompt int32 [B, P] (row b's prompt is prompt[b, :prompt_lens[b]]) -> int32 [B, max_new_tokens]
    argmax continuations (no early stop). One jit: prefill, then a lax.scan of one-token decodes."""
    b, p = prompt.shape
    max_len = p + max_new_tokens if max_len is None else max_len
    if max_len < p + max_new_tokens:
        raise ValueError(f"max_len {max_len} < prompt {p} + new tokens {max_new_tokens}")
    graphdef, state = nnx.split(model)
    run = _compiled(graphdef, b, max_len, max_new_tokens, cache_dtype or model.dtype)
    return run(state, jnp.asarray(prompt, jnp.int32), jnp.asarray(prompt_lens, jnp.int32))


@functools.lru_cache(maxsize=16)
def _compiled(graphdef, batch: int, max_len: int, max_new: int, cache_dtype: Any):
    @jax.jit
    def run(state, prompt, prompt_lens):
        model = nnx.merge(graphdef, state)
        cache = init_cache(model.config, batch, max_len, cache_dtype)
        logits, cache = model.forward_cached(prompt, prompt_lens, cache, last_only=True)  # [B, V]
        first = jnp.argmax(logits, axis=-1).astype(jnp.int32)
        ones = jnp.ones((batch,), jnp.int32)

        def step(carry, _):
            token, cache = carry
            logits, cache = model.forward_cached(token[:, None], ones, cache, last_only=True)
            return (jnp.argmax(logits, axis=-1).astype(jnp.int32), cache), token

        _, tokens = jax.lax.scan(step, (first, cache), None, length=max_new)
        return tokens.T  # [B, max_new]

    return run
