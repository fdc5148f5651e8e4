"""Rotary position embedding and its scaling kinds (linear, YaRN), as transformers computes them.

`RopeScaling` is the typed form of a HF config's `rope_scaling` (transformers 4.x) /
`rope_parameters` (5.x). The math follows transformers' `modeling_rope_utils`
(`_compute_linear_scaling_rope_parameters`, `_compute_yarn_parameters`), in the same fp32 order:

- linear: inv_freq / factor (positions interpolated by the factor);
- YaRN ("NTK-by-parts", arXiv 2309.00071): each frequency blends its interpolated (/ factor) and
  extrapolated (unchanged) value by a linear ramp over the dimensions whose wavelength rotates
  between beta_slow and beta_fast times in the original window; the rotated q and k are multiplied
  by the attention factor (0.1 ln(factor) + 1 unless given; transformers multiplies cos and sin),
  which scales q.k by its square.

Dynamic NTK is refused: it recomputes the frequencies from the length of each call, so keys already
in a KV cache (rollout, prefix reuse, parking) would carry other frequencies than new queries.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from models.rope_scaling import RopeScaling

F32 = jnp.float32


def inv_freq(scaling: RopeScaling, head_dim: int, theta: float) -> jax.Array:
    """fp32 [head_dim / 2] inverse frequencies (a few ops on constants: XLA folds them)."""
    pos_freqs = theta ** (jnp.arange(0, head_dim, 2, dtype=F32) / head_dim)
    if scaling.kind == "default":
        return 1.0 / pos_freqs
    if scaling.kind == "linear":
        return (1.0 / pos_freqs) / F32(scaling.factor)
    low, high = scaling.ramp_range(head_dim, theta)
    if low == high:
        high += 0.001  # as transformers: no division by zero
    ramp = jnp.clip((jnp.arange(head_dim // 2, dtype=F32) - F32(low)) / F32(high - low), 0.0, 1.0)
    extrapolated = 1.0 - ramp  # 1 on the fast (high-frequency) dimensions: left unchanged
    interpolation = 1.0 / (F32(scaling.factor) * pos_freqs)
    return interpolation * (1.0 - extrapolated) + (1.0 / pos_freqs) * extrapolated


def apply_rope(
    x: jax.Array, positions: jax.Array, theta: float, scaling: RopeScaling | None = None
) -> jax.Array:
    """Rotary embedding, rotate-half layout. x: [B, T, N, D]; positions: [B, T] int. Angles, cos and
    sin in fp32; the result in x's dtype. `scaling` None is plain RoPE."""
    scaling = scaling or RopeScaling()
    d = x.shape[-1]
    half = d // 2
    angles = positions.astype(F32)[..., None] * inv_freq(scaling, d, theta)  # [B, T, D/2]
    cos = jnp.cos(angles)[:, :, None, :]
    sin = jnp.sin(angles)[:, :, None, :]
    x32 = x.astype(F32)
    x1, x2 = x32[..., :half], x32[..., half:]
    out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    if scaling.attention_scale != 1.0:
        # transformers scales cos and sin; scaling the rotated values is the same product, and the
        # plan's compile of a bf16 remat train step kept 0.25 GiB more temporaries for the former.
        out = out * F32(scaling.attention_scale)
    return out.astype(x.dtype)
