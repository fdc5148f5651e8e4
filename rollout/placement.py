"""Where the sampler's arrays live on a mesh: its own compute-dtype copy of the weights.

Training keeps fp32 master weights FSDP-sharded (the model dim split over `fsdp`); decoding with
that layout would all-gather every weight for every generated token. The sampler therefore holds a
second copy in the compute dtype, laid out for sampling: replicated over `data` and `fsdp`, still
split over `tensor` (heads / MLP / vocab), so a decode step needs no weight communication beyond
tensor parallelism. The KV cache rows are split over (data, fsdp) and its KV heads over `tensor`
(models.kv_cache.init_cache with a mesh), so every device decodes its own rows.

`SamplerWeights.refresh` rebuilds the copy from new training weights with one jitted cast +
reshard (an all-gather on the devices, never through the host), writing into the old copy's
buffers (donated), so a refresh needs no second copy's worth of memory.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from models.sharding import LOGICAL_RULES, logical_to_spec, variable_sharding

# The training rules without FSDP: parameters keep their tensor-parallel split only.
SAMPLER_RULES: tuple[tuple[str, Any], ...] = tuple(
    (name, None if name == "embed" else axes) for name, axes in LOGICAL_RULES
)


def sampler_shardings(state: nnx.State, mesh: Mesh) -> nnx.State:
    """NamedSharding per Variable of `state` under SAMPLER_RULES (same tree structure)."""
    mesh_shape = dict(mesh.shape)

    def place(var: nnx.Variable) -> NamedSharding:
        names = var.get_metadata().get("out_sharding")
        return NamedSharding(mesh, logical_to_spec(names, var.shape, mesh_shape, SAMPLER_RULES))

    return jax.tree.map(place, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def cast_floats(state: Any, dtype: Any) -> Any:
    """Every floating leaf in `dtype` (integer leaves, e.g. RNG counters, unchanged)."""
    return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, state)


class SamplerWeights:
    """The jitted functions that make (`create`) and update (`refresh`) the sampler's weights.

    Both take the model state of the trainer's layout (`nnx.state(model)`, any dtype and
    sharding) and return it in `dtype`, laid out by `sampler_shardings` on `mesh` (unchanged
    placement without a mesh).
    """

    def __init__(self, abstract_state: nnx.State, dtype: Any, mesh: Mesh | None = None):
        self.dtype, self.mesh = jnp.dtype(dtype), mesh
        self.shardings = None if mesh is None else sampler_shardings(abstract_state, mesh)
        self.create = jax.jit(self._cast, out_shardings=self.shardings)
        # keep_unused: `old` is never read, only donated so the new copy is written into its buffers.
        self.refresh = jax.jit(
            lambda state, old: self._cast(state),
            out_shardings=self.shardings,
            donate_argnums=(1,),
            keep_unused=True,
        )

    def _cast(self, state: nnx.State) -> nnx.State:
        if self.mesh is None:
            return cast_floats(state, self.dtype)

        # Cast each shard where it lies (training layout), then gather: the all-gather moves
        # compute-dtype bytes and no fp32 copy of the whole model is ever materialised.
        def cast_in_place(var: nnx.Variable) -> nnx.Variable:
            value = cast_floats(var.get_value(), self.dtype)
            return var.replace(jax.lax.with_sharding_constraint(value, variable_sharding(var, self.mesh)))

        return jax.tree.map(cast_in_place, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def new_rollout_arrays(
    model_config: Any, rows: int, cache_len: int, cache_dtype: Any, mesh: Mesh | None = None
) -> tuple[Any, jax.Array]:
    """The sampler's device state for `rows` rows: an empty KV cache of `cache_len` slots per row
    and the next-token logits fp32 [rows, V], both split by rows over (data, fsdp) on a mesh."""
    from models.kv_cache import init_cache

    cache = init_cache(model_config, rows, cache_len, jnp.dtype(cache_dtype), mesh=mesh)
    shape = (rows, model_config.vocab_size)
    if mesh is None:
        return cache, jnp.zeros(shape, jnp.float32)
    spec = logical_to_spec(("batch", "act_vocab"), shape, dict(mesh.shape))
    return cache, jax.jit(lambda: jnp.zeros(shape, jnp.float32), out_shardings=NamedSharding(mesh, spec))()
