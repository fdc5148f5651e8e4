"""`CausalLM`: the surface of a model that the sampler (rollout/) uses, and nothing more.

The sampler splits the model into graph and state (an `nnx.Module`), casts and places the state
(rollout/placement.py), and inside its jitted programs calls only what is listed here. Any model
that has these members can be rolled out; `Qwen3ForCausalLM` is the one the project ships
(tests/models/test_causal_lm.py checks that it has them).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import jax

from models.config import Qwen3Config
from models.kv_cache import KVCache
from models.paged_kv import PagedKVCache


@runtime_checkable
class CausalLM(Protocol):
    """A decoder-only LM as the sampler sees it: an `nnx.Module` with these members."""

    config: Qwen3Config  # the shapes: the KV cache is sized from it, the vocabulary bounds sampling

    @property
    def dtype(self) -> Any:
        """The compute dtype: the sampler's copy of the weights and an "auto" KV cache take it."""
        ...

    def __call__(
        self, input_ids: jax.Array, positions: jax.Array | None = None, segment_ids: jax.Array | None = None
    ) -> jax.Array:
        """int32 [B, T] -> fp32 logits [B, T, V] without a cache (the teacher-forced reference)."""
        ...

    def hidden_states(
        self, input_ids: jax.Array, positions: jax.Array | None = None, segment_ids: jax.Array | None = None
    ) -> jax.Array:
        """int32 [B, T] -> final-normed hidden [B, T, H] (a served token's alternatives take the
        head at a few positions only)."""
        ...

    def logits(self, hidden: jax.Array) -> jax.Array:
        """hidden [B, T, H] -> fp32 logits [B, T, V]."""
        ...

    def forward_cached(
        self,
        tokens: jax.Array,
        num_new: jax.Array,
        cache: KVCache | PagedKVCache,
        last_only: bool = False,
        rows: jax.Array | None = None,
        layer_states: list[Any] | None = None,
        table_first_head: bool = False,
    ) -> tuple[jax.Array, KVCache | PagedKVCache]:
        """Append tokens to cache rows; the logits and the new cache (prefill and decode alike)."""
        ...

    def layer_weights(self) -> list[Any]:
        """One state per layer, for a decode loop that runs the layers unrolled (CPU)."""
        ...
