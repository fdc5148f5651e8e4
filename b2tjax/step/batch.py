"""The typed training batch (what a jitted GRPO or SFT step reads) and the host-side helpers that
lay ragged records out as its fixed-shape arrays. Pure functions of their arguments: every JAX
process holds the whole global batch and lays it out alike, so none of them talks to the others."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import jax
import numpy as np

_FIELDS = [
    "ids",
    "mask",
    "old_logprobs",
    "advantages",
    "ref_logprobs",
    "positions",
    "segment_ids",
    "token_positions",
    "is_weights",
    "routes",
]


@functools.partial(jax.tree_util.register_dataclass, data_fields=_FIELDS, meta_fields=[])
@dataclasses.dataclass(frozen=True)
class TrainBatch:
    """One optimizer step's rows. A pytree, so jit, lax.scan, jax.tree.map and device_put see its
    arrays (an absent field is None and holds no leaf, so SFT and GRPO compile apart).

    The packer (b2tjax/step/packing.py) builds it flat, N rows of T tokens, then `split`s it into
    M micro-batches of b rows, the form the jitted steps read. T is a multiple of 64 (`pad_length`).

        ids           int32   [M, b, T]  the records' tokens; padding rows are all 0
        mask          float32 [M, b, T]  1 on the tokens trained on (position 0 never), else 0
        old_logprobs  float32 [M, b, T]  GRPO: log-probs under the policy that sampled; SFT: None
        advantages    float32 [M, b]     GRPO: each row's advantage (padding rows 0); SFT: None.
                              [M, b, T]  packed rows: each token's record's advantage
        ref_logprobs  float32 [M, b, T]  GRPO with grpo.beta > 0: the KL reference's; else None
        positions     int32   [M, b, K]  where the loss reads a log-prob (`loss_positions`), or
                                         None: the output head is then projected at every token
        segment_ids   int32   [M, b, T]  packed rows (b2tjax.step.packing): record k of a row is
                                         segment k (from 1), padding 0; None: one record per row
        token_positions int32 [M, b, T]  packed rows: each token's position in its own record
        is_weights         float32 [M, b, T]  streaming GRPO (rollout.max_staleness > 0): truncated
                                           importance weights (b2tjax/grpo/offpolicy.py); else None
        routes        int16   [M, b, T, L, k]  router replay (a Qwen3-MoE's records with routes):
                                         the experts each MoE layer uses per token, -1 where none
                                         was recorded (the router's own top-k); else None
    """

    ids: Any
    mask: Any
    old_logprobs: Any = None
    advantages: Any = None
    ref_logprobs: Any = None
    positions: Any = None
    segment_ids: Any = None
    token_positions: Any = None
    is_weights: Any = None
    routes: Any = None

    @property
    def segments(self) -> tuple[Any, Any, Any] | None:
        """(segment_ids, token_positions, routes) of packed rows, None for one record per row."""
        return None if self.segment_ids is None else (self.segment_ids, self.token_positions, self.routes)

    def split(self, micro_batches: int) -> TrainBatch:
        """Flat [N, ...] arrays -> [M, N / M, ...]."""
        return jax.tree.map(lambda x: to_micro(x, micro_batches), self)

    def take(self, rows: np.ndarray) -> TrainBatch:
        """The flat batch's rows `rows`, in that order."""
        return jax.tree.map(lambda x: x[rows], self)


def pad_length(length: int, multiple: int = 64) -> int:
    """Round sequence lengths up so jitted steps compile once per bucket, not once per batch."""
    return max(multiple, -(-length // multiple) * multiple)


def to_micro(x: np.ndarray, micro_batches: int) -> np.ndarray:
    """[N, ...] -> [M, N / M, ...]."""
    if x.shape[0] % micro_batches:
        raise ValueError(f"{x.shape[0]} rows do not split into {micro_batches} micro-batches")
    return x.reshape(micro_batches, x.shape[0] // micro_batches, *x.shape[1:])


def loss_positions(mask: np.ndarray) -> np.ndarray:
    """[N, T] mask -> [N, K] int32: each row's positions with mask != 0, ascending, then 0s.

    The train steps read the output head at these positions. Position 0 has no prediction, so
    its mask is 0: the padding entries point there and the loss, which reads the mask at the same
    positions, gives them weight 0. K is T whatever the rows train, so a run compiles one program
    per row shape: a K sized to each batch's trained tokens (a B2T record's ~2.5k prompt tokens
    and tool replies are never trained on) saved the head's projection of the rest, about 8% of
    an 8B step, but compiled a program per K, minutes each at 8B.
    """
    if mask.ndim != 2:
        raise ValueError(f"loss_positions needs a [rows, tokens] mask, got shape {mask.shape}")
    if np.any(mask[:, 0] != 0):
        raise ValueError("mask[:, 0] must be 0: position 0 has no prediction")
    out = np.zeros(mask.shape, np.int32)
    for row, keep in enumerate(mask != 0):
        where = np.flatnonzero(keep)
        out[row, : where.size] = where
    return out
