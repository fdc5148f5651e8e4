"""The split placement's weight hand-over: train sub-mesh -> rollout sub-mesh in one jitted program.

Under multi-controller JAX `jax.device_put` between disjoint meshes fails (JAX 0.10.2 on the local
2-process cluster: "For a cross-host reshard in multi-controller JAX, input and target sharding
should have the same set of devices"; marin-community/marin#3947), and one jit cannot take arrays
of two meshes. So the sub-meshes (one shape) are stacked into a union mesh with a leading 'side'
axis (0 = train, 1 = rollout), and each parameter is viewed, without a copy, as one global array on
it: dim 0 doubled and split over 'side' first, so side s holds rows [s * n, (s + 1) * n) laid out as
on its own sub-mesh. `src` pairs the train parameter's shards (side 0) with a resident filler on the
rollout devices (side 1); `dst` pairs a resident scratch on the train devices (side 0) with the old
sampler array's shards (side 1). One program casts to the sampler dtype where the shards lie, swaps
the sides (a collective permute over 'side') and reshards to the sampler layout, writing into
`dst`'s donated buffers; side 1's shards are then the new sampler array, side 0's the next scratch.

Memory: the filler is one train shard of each parameter per rollout device (train dtype), the
scratch one sampler shard per train device: what a co-located device holds for its sampler copy.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec


class Handover:
    """Hands a train-layout state (on `train`) to sampler arrays (on `rollout`) in one program."""

    def __init__(self, train: Mesh, rollout: Mesh, dtype: Any):
        if dict(train.shape) != dict(rollout.shape):
            raise ValueError(
                f"weight hand-over needs sub-meshes of one shape, got {train.shape} and {rollout.shape}"
            )
        self.train, self.rollout, self.dtype = train, rollout, jnp.dtype(dtype)
        self.union = Mesh(
            np.stack([train.devices, rollout.devices]),
            ("side", *train.axis_names),
            axis_types=(jax.sharding.AxisType.Auto,) * (1 + len(train.axis_names)),
        )
        self.checks = 0  # hand-overs checked (every one is)
        self.filler: list[list[jax.Array]] | None = None  # per leaf: side 1 shards of `src`
        self.scratch: list[list[jax.Array]] | None = None  # per leaf: side 0 shards of `dst`
        self.program: Any = None
        self.layouts: list = []  # per leaf (src, dst sharding, rank) the program was built for

    def __call__(self, src: Any, dst: Any) -> Any:
        """`src` cast to the sampler dtype, in `dst`'s layout and (donated) buffers; `dst` is consumed."""
        check_handover(src, dst, self.dtype, self.train, self.rollout)
        if not self.checks:  # once per sampler: a run's log shows the split placement at work
            print(
                f"weight hand-over checked: {len(jax.tree.leaves(src))} arrays, tree, shapes, dtypes, "
                f"shardings (train {self.train.devices.size} -> rollout {self.rollout.devices.size} devices)",
                flush=True,
            )
        self.checks += 1
        leaves, treedef = jax.tree.flatten(src)
        olds = jax.tree.leaves(dst)
        if self.program is None:
            self._prepare(leaves, olds)
        if not _same_layouts(_layouts(leaves, olds), self.layouts):
            raise ValueError("weight hand-over: the shardings differ from those the program was built for")
        srcs = [self._view(x, x.addressable_shards, f) for x, f in zip(leaves, self.filler, strict=True)]
        # the old sampler arrays' buffers are donated through `dsts`: XLA writes the new weights there
        dsts = [self._view(x, s, x.addressable_shards) for x, s in zip(olds, self.scratch, strict=True)]
        outs = self.program(srcs, dsts)
        rollout_set = set(self.rollout.devices.flat)
        new, self.scratch = [], []
        for out, old in zip(outs, olds, strict=True):
            shards = {s.device: s.data for s in out.addressable_shards}
            mine = [a for d, a in shards.items() if d in rollout_set]
            new.append(jax.make_array_from_single_device_arrays(old.shape, old.sharding, mine))
            self.scratch.append([a for d, a in shards.items() if d not in rollout_set])
        return jax.tree.unflatten(treedef, new)

    def _view(self, x: jax.Array, side0: Any, side1: Any) -> jax.Array:
        """The union-mesh array of shards `side0` (train devices) and `side1` (rollout devices),
        each side laid out as `x` (no copy)."""
        parts = [*_datas(side0), *_datas(side1)]
        union = self.on_union(x)
        return jax.make_array_from_single_device_arrays(union.shape, union.sharding, parts)

    def on_union(self, x: Any) -> jax.ShapeDtypeStruct:
        """`x` (an array or ShapeDtypeStruct on a sub-mesh) as the union mesh's abstract array:
        dim 0 doubled and split over 'side' first, each side laid out as `x`."""
        sharding = NamedSharding(self.union, side_spec(x.sharding.spec, len(x.shape)))
        return jax.ShapeDtypeStruct((2 * x.shape[0], *x.shape[1:]), x.dtype, sharding=sharding)

    def _prepare(self, leaves: list[jax.Array], olds: list[jax.Array]) -> None:
        """The resident filler and scratch, and the program (compiled once per model)."""
        self.layouts = _layouts(leaves, olds)
        self.filler = [_zeros(self.rollout, x.sharding.spec, x.shape, x.dtype) for x in leaves]
        self.scratch = [_zeros(self.train, o.sharding.spec, o.shape, o.dtype) for o in olds]
        self.program = self.build_program(olds)

    def lower(self, src: Any, dst: Any) -> Any:
        """The hand-over program lowered for abstract `src` and `dst` (ShapeDtypeStructs with their
        sub-meshes' shardings), checked as a real hand-over is: launch/plan.py compiles it."""
        check_handover(src, dst, self.dtype, self.train, self.rollout)
        olds = jax.tree.leaves(dst)
        srcs = [self.on_union(x) for x in jax.tree.leaves(src)]
        return self.build_program(olds).lower(srcs, [self.on_union(o) for o in olds])

    def build_program(self, olds: list[Any]) -> Any:
        """The jitted swap into the layouts of the sampler leaves `olds` (arrays or abstract)."""
        out_shardings = [self.on_union(o).sharding for o in olds]
        dtypes = [o.dtype for o in olds]

        def swap(srcs: list[jax.Array], dsts: list[jax.Array]) -> list[jax.Array]:
            # cast where the train shards lie (only sampler-dtype bytes move), then side 0 -> side 1
            return [jnp.roll(x.astype(t), x.shape[0] // 2, axis=0) for x, t in zip(srcs, dtypes, strict=True)]

        # keep_unused: `dsts` is never read, only donated so the new arrays are written into it
        return jax.jit(swap, out_shardings=out_shardings, donate_argnums=(1,), keep_unused=True)


def _layouts(leaves: list[jax.Array], olds: list[jax.Array]) -> list:
    return [(x.sharding, o.sharding, x.ndim) for x, o in zip(leaves, olds, strict=True)]


def _same_layouts(a: list, b: list) -> bool:
    """Equivalent shardings leaf by leaf (P("fsdp") and P("fsdp", None) lay a matrix out alike)."""
    return len(a) == len(b) and all(
        x.is_equivalent_to(y, n) and o.is_equivalent_to(p, n)
        for (x, o, n), (y, p, _) in zip(a, b, strict=True)
    )


def _datas(shards: Any) -> list[jax.Array]:
    """Single-device arrays of `shards` (a list of them, or an array's addressable shards)."""
    return [getattr(s, "data", s) for s in shards]


def _zeros(mesh: Mesh, spec: PartitionSpec, shape: tuple[int, ...], dtype: Any) -> list[jax.Array]:
    """The addressable shards of a zero array laid out by `spec` on `mesh`."""
    zeros = jax.jit(lambda: jnp.zeros(shape, dtype), out_shardings=NamedSharding(mesh, spec))()
    return [s.data for s in zeros.addressable_shards]


def side_spec(spec: PartitionSpec, ndim: int) -> PartitionSpec:
    """`spec` on the union mesh: dim 0 split over 'side' first, then as on the sub-mesh."""
    entries = [*spec, *([None] * (ndim - len(spec)))]
    first = entries[0]
    axes = () if first is None else (first,) if isinstance(first, str) else tuple(first)
    return PartitionSpec(("side", *axes), *entries[1:])


def check_handover(src: Any, dst: Any, dtype: Any, train: Mesh, rollout: Mesh) -> None:
    """As Tunix does before a transfer: one tree structure, and per leaf the same shape, the sampler
    dtype (floating leaves; others kept), `src` on `train` and `dst` on `rollout` (NamedShardings).
    A one-line ValueError naming the first leaf that differs."""
    if jax.tree.structure(src) != jax.tree.structure(dst):
        raise ValueError("weight hand-over: the train and sampler states have different tree structures")
    for (path, s), d in zip(jax.tree.leaves_with_path(src), jax.tree.leaves(dst), strict=True):
        problem = _leaf_problem(s, d, dtype, train, rollout)
        if problem:
            raise ValueError(f"weight hand-over: {jax.tree_util.keystr(path)}: {problem}")


def _leaf_problem(s: jax.Array, d: jax.Array, dtype: Any, train: Mesh, rollout: Mesh) -> str | None:
    """What makes `s` unfit to be handed to `d`, or None."""
    want = jnp.dtype(dtype) if jnp.issubdtype(s.dtype, jnp.floating) else s.dtype
    if s.shape != d.shape:
        return f"shape {s.shape} -> {d.shape}"
    if not s.shape:
        return "a scalar leaf (the hand-over splits dim 0 over the sides)"
    if d.dtype != want:
        return f"dtype {s.dtype} -> {d.dtype}, want {want}"
    if not _on(s, train):
        return f"source not on the train sub-mesh ({s.sharding})"
    if not _on(d, rollout):
        return f"destination not on the rollout sub-mesh ({d.sharding})"
    return None


def _on(x: jax.Array, mesh: Mesh) -> bool:
    sharding = getattr(x, "sharding", None)
    return isinstance(sharding, NamedSharding) and sharding.mesh == mesh
