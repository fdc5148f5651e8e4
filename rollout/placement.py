"""Where the sampler's arrays live on a mesh: its own compute-dtype copy of the weights.

Training keeps fp32 master weights FSDP-sharded (the model dim split over `fsdp`); decoding with
that layout would all-gather every weight for every generated token. The sampler therefore holds a
second copy in the compute dtype, laid out for sampling: replicated over `data` and `fsdp`, still
split over `tensor` (heads / MLP / vocab), so a decode step needs no weight communication beyond
tensor parallelism. The KV cache's rows are split over (data, fsdp) and its KV heads over `tensor`:
the page pool puts each row shard's pages on that shard's devices (models/paged_kv.py), so every
device decodes its own rows.

`SamplerWeights.refresh` rebuilds the copy from new training weights with one jitted cast +
reshard (an all-gather on the devices, never through the host), writing into the old copy's
buffers (donated), so a refresh needs no second copy's worth of memory. With the split placement
(`mesh.rollout_devices`) the training weights lie on a train sub-mesh disjoint from the sampler's
`mesh`; creating and refreshing then go through rollout/handover.py's one union-mesh program.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh, NamedSharding

from models.paged_kv import init_paged_cache
from models.sharding import LOGICAL_RULES, logical_to_spec, variable_sharding
from rollout.handover import Handover

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
    placement without a mesh). A LoRA model's frozen base (`kept_in_place`) is used as it is when
    it already has the sampler's dtype and layout: it never changes and is never donated, so the
    sampler needs no copy of it and a refresh casts the adapters only.
    """

    def __init__(self, abstract_state: nnx.State, dtype: Any, mesh: Mesh | None = None):
        self.dtype, self.mesh = jnp.dtype(dtype), mesh
        # split placement: the state lies on a train sub-mesh disjoint from `mesh` (rollout/handover.py)
        train = split_from(abstract_state, mesh)
        self.handover = None if train is None else Handover(train, mesh, self.dtype)
        self.keep = nnx.Nothing if train is not None else kept_in_place(abstract_state, self.dtype, mesh)
        own = self.split(abstract_state)[1]
        self.shardings = None if mesh is None else sampler_shardings(own, mesh)
        self.create_own = jax.jit(self._cast, out_shardings=self.shardings)
        # keep_unused: `old` is never read, only donated so the new copy is written into its buffers.
        self.refresh_own = jax.jit(
            lambda state, old: self._cast(state),
            out_shardings=self.shardings,
            donate_argnums=(1,),
            keep_unused=True,
        )

    def split(self, state: nnx.State) -> tuple[nnx.State, nnx.State]:
        """(leaves used in place, leaves the sampler holds its own copy of)."""
        return nnx.split_state(state, self.keep, ...)

    def create(self, state: nnx.State) -> nnx.State:
        kept, own = self.split(state)
        if self.handover is not None:  # handed into fresh buffers on the rollout sub-mesh
            abstract = jax.eval_shape(lambda s: cast_floats(s, self.dtype), own)
            zeros = jax.jit(
                lambda: jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), abstract),
                out_shardings=self.shardings,
            )
            return self.handover(own, zeros())
        return nnx.merge_state(kept, self.create_own(own))

    def refresh(self, state: nnx.State, old: nnx.State) -> nnx.State:
        kept, own = self.split(state)
        if self.handover is not None:
            return self.handover(own, self.split(old)[1])
        return nnx.merge_state(kept, self.refresh_own(own, self.split(old)[1]))

    def _cast(self, state: nnx.State) -> nnx.State:
        if self.mesh is None:
            return cast_floats(state, self.dtype)

        # Cast each shard where it lies (training layout), then gather: the all-gather moves
        # compute-dtype bytes and no fp32 copy of the whole model is ever materialised.
        def cast_in_place(var: nnx.Variable) -> nnx.Variable:
            value = cast_floats(var.get_value(), self.dtype)
            return var.replace(jax.lax.with_sharding_constraint(value, variable_sharding(var, self.mesh)))

        return jax.tree.map(cast_in_place, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def split_from(state: nnx.State, mesh: Mesh | None) -> Mesh | None:
    """The train sub-mesh of a split placement: the mesh `state`'s arrays lie on when its devices
    are not `mesh`'s (co-located, or abstract leaves without a sharding: None)."""
    sharding = getattr(next(iter(jax.tree.leaves(state)), None), "sharding", None)
    if mesh is None or not isinstance(sharding, NamedSharding):
        return None
    if set(sharding.mesh.devices.flat) & set(mesh.devices.flat):
        return None
    return sharding.mesh


def kept_in_place(state: nnx.State, dtype: Any, mesh: Mesh | None) -> Any:
    """Filter of the Variables the sampler can use as they are: the frozen base of a LoRA model
    (Params that are not adapters) already in `dtype` (or not floating, e.g. int8) and laid out as
    the sampler lays it out. Nothing when the model has no adapters: trained weights change and
    are donated by the train step."""
    if not jax.tree.leaves(nnx.filter_state(state, nnx.LoRAParam)):
        return nnx.Nothing
    mesh_shape = None if mesh is None else dict(mesh.shape)

    def split_by(spec: Any) -> tuple:
        # Axes of size 1 split nothing: P("fsdp", None) on fsdp 1 is the layout of P(None, None).
        axes = [(a,) if isinstance(a, str) else tuple(a or ()) for a in spec]
        return tuple(tuple(x for x in dim if mesh_shape[x] > 1) for dim in axes)

    def same_layout(var: nnx.Variable) -> bool:
        if mesh_shape is None:
            return True
        names = var.get_metadata().get("out_sharding")
        train = logical_to_spec(names, var.shape, mesh_shape)
        sampler = logical_to_spec(names, var.shape, mesh_shape, SAMPLER_RULES)
        return split_by(train) == split_by(sampler)

    def keep(path: Any, var: Any) -> bool:
        if not isinstance(var, nnx.Param) or isinstance(var, nnx.LoRAParam):
            return False
        floating = jnp.issubdtype(var.dtype, jnp.floating)
        return (not floating or jnp.dtype(var.dtype) == dtype) and same_layout(var)

    return keep


def new_rollout_arrays(
    model_config: Any,
    rows: int,
    cache_len: int,
    cache_dtype: Any,
    pages: tuple[int, int],
    mesh: Mesh | None = None,
) -> tuple[Any, jax.Array]:
    """The sampler's device state for `rows` rows: an empty KV page pool, `pages` = (page_size, pool
    pages), whose page tables give each row up to `cache_len` slots (models/paged_kv.py), and the
    next-token logits fp32 [rows, V], both split by rows over (data, fsdp) on a mesh."""
    dtype = jnp.dtype(cache_dtype)
    cache = init_paged_cache(model_config, rows, cache_len, pages[0], pages[1], dtype, mesh=mesh)
    shape = (rows, model_config.vocab_size)
    if mesh is None:
        return cache, jnp.zeros(shape, jnp.float32)
    spec = logical_to_spec(("batch", "act_vocab"), shape, dict(mesh.shape))
    return cache, jax.jit(lambda: jnp.zeros(shape, jnp.float32), out_shardings=NamedSharding(mesh, spec))()


def kv_bytes_per_slot(model_config: Any, cache_dtype: Any) -> int:
    """Bytes of K and V of one token in every layer: what a cache slot (or a page's slot) costs."""
    c = model_config
    return 2 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim * jnp.dtype(cache_dtype).itemsize
