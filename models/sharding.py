"""Logical axis names -> mesh axes (`data`, `fsdp`, `expert`, `tensor`), mesh construction, sharded
model creation.

Parameters carry logical names in their `out_sharding` metadata (see models/layers.py); activations
are constrained with `constrain`, which is a no-op unless a mesh is set with `jax.set_mesh`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from flax import nnx
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

# tensor innermost (neighbouring devices).
MESH_AXES = ("data", "fsdp", "expert", "tensor")
# Left out of a mesh at size 1, so a dense model's mesh, shardings and programs (and their compile
# cache keys: a spec naming a size-1 axis is another sharding to jit) are those without it.
OPTIONAL_AXES = ("expert",)
# The axes a batch's rows are split over: the expert axis' devices are data-parallel outside the
# experts (as MaxText's), so a Qwen3-MoE layer's tokens are spread over its expert shards.
ROW_AXES = ("data", "fsdp", "expert")

# One table for parameters and activations. A logical name maps to one mesh axis, a tuple of mesh
# axes, or None (replicated). Parameters: FSDP shards the model dim, tensor parallelism shards
# heads / MLP / vocab, expert parallelism the experts. Activations: batch over ROW_AXES, everything
# else local.
LOGICAL_RULES: tuple[tuple[str, str | tuple[str, ...] | None], ...] = (
    ("batch", ROW_AXES),
    ("seq", None),
    ("embed", "fsdp"),
    ("vocab", "tensor"),
    ("heads", "tensor"),
    ("kv_heads", "tensor"),
    ("head_dim", None),
    ("mlp", "tensor"),
    ("expert", "expert"),  # the stacked experts of a Qwen3-MoE layer (models/moe.py)
    ("layers", None),
    ("norm", None),
    ("lora_rank", None),  # LoRA adapters: the rank axis is small, replicated
    ("act_embed", None),
    ("act_vocab", "tensor"),
    ("act_heads", "tensor"),
    ("act_kv_heads", "tensor"),
    ("act_mlp", "tensor"),
    ("cache_seq", None),
)

Logical = Sequence[str | None] | None


def make_mesh(
    data: int = -1,
    fsdp: int = 1,
    tensor: int = 1,
    devices: Sequence[jax.Device] | None = None,
    *,
    expert: int = 1,
) -> Mesh:
    """A ('data', 'fsdp', 'expert', 'tensor') mesh over `devices` (default: all), without the
    OPTIONAL_AXES of size 1. One size may be -1 (= the rest)."""
    devices = list(jax.devices() if devices is None else devices)
    named = {"data": data, "fsdp": fsdp, "expert": expert, "tensor": tensor}
    sizes = [named[a] for a in MESH_AXES]
    described = " ".join(f"{a}={n}" for a, n in named.items())
    if sizes.count(-1) > 1:
        raise ValueError(f"at most one mesh axis may be -1, got {described}")
    known = math.prod(s for s in sizes if s != -1)
    if known <= 0 or len(devices) % known:
        raise ValueError(f"mesh {described} does not divide {len(devices)} devices")
    sizes = [len(devices) // known if s == -1 else s for s in sizes]
    if math.prod(sizes) != len(devices):
        raise ValueError(
            f"mesh {dict(zip(MESH_AXES, sizes))} needs {math.prod(sizes)} devices, have {len(devices)}"
        )
    kept = {a: n for a, n in zip(MESH_AXES, sizes) if n != 1 or a not in OPTIONAL_AXES}
    grid = np.asarray(devices, dtype=object).reshape(list(kept.values()))
    return Mesh(grid, tuple(kept), axis_types=(AxisType.Auto,) * len(kept))


def row_axes(mesh_shape: dict[str, int]) -> tuple[str, ...]:
    """The ROW_AXES a mesh of `mesh_shape` has."""
    return tuple(a for a in ROW_AXES if a in mesh_shape)


def row_devices(mesh_shape: dict[str, int] | None) -> int:
    """Devices a batch's rows are split over (ROW_AXES) on a mesh of `mesh_shape`; 1 without one."""
    return 1 if mesh_shape is None else math.prod(mesh_shape[a] for a in row_axes(mesh_shape))


def mesh_platform(mesh: Mesh | None) -> str:
    """The platform programs on `mesh` compile for: its devices' (a deviceless TPU or GPU topology's
    when launch/plan.py plans a run from a CPU host), else this host's default backend."""
    return jax.default_backend() if mesh is None else mesh.devices.flat[0].platform


def logical_to_spec(
    names: Logical,
    shape: Sequence[int] | None = None,
    mesh_shape: dict[str, int] | None = None,
    rules: Sequence[tuple[str, Any]] = LOGICAL_RULES,
) -> PartitionSpec:
    """PartitionSpec for logical `names`. Mesh axes that do not divide the dim (given `shape` and
    `mesh_shape`), are absent from the mesh, or are already used by an earlier dim are dropped, so
    any config runs on any mesh (it just shards less). An unknown logical name is an error: a
    misspelled one would otherwise replicate that dimension without a word."""
    if names is None:
        return PartitionSpec()
    table = dict(rules)
    unknown = sorted({n for n in names if n is not None and n not in table})
    if unknown:
        raise ValueError(f"unknown logical axis name(s) {unknown}; known: {', '.join(table)}")
    used: set[str] = set()
    spec = []
    for i, name in enumerate(names):
        target = table.get(name) if name is not None else None
        axes = (target,) if isinstance(target, str) else tuple(target or ())
        kept, product = [], 1
        dim = None if shape is None else shape[i]
        for ax in axes:
            if ax in used or (mesh_shape is not None and ax not in mesh_shape):
                continue
            size = 1 if mesh_shape is None else mesh_shape[ax]
            if dim is not None and dim % (product * size):
                continue
            kept.append(ax)
            product *= size
        used.update(kept)
        spec.append(None if not kept else kept[0] if len(kept) == 1 else tuple(kept))
    return PartitionSpec(*spec)


def constrain(x: jax.Array, names: Logical) -> jax.Array:
    """with_sharding_constraint by logical names under the current mesh (`jax.set_mesh`); else no-op."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh.empty:
        return x
    spec = logical_to_spec(names, x.shape, dict(mesh.shape))
    return jax.lax.with_sharding_constraint(x, spec)


class MeshBound:
    """A jitted function that runs, and lowers, with `mesh` set, so the model's activation sharding
    constraints apply. `lower` lets launch/plan.py compile the very program a run executes."""

    def __init__(self, fn: Callable, mesh: Mesh):
        self.fn, self.mesh = fn, mesh
        functools.update_wrapper(self, fn)

    def __call__(self, *args, **kwargs):
        with jax.set_mesh(self.mesh):
            return self.fn(*args, **kwargs)

    def lower(self, *args, **kwargs):
        with jax.set_mesh(self.mesh):
            return self.fn.lower(*args, **kwargs)


def on_mesh(fn: Callable, mesh: Mesh | None) -> Callable:
    """`fn` bound to `mesh` (MeshBound), or `fn` itself without one."""
    return fn if mesh is None else MeshBound(fn, mesh)


def variable_sharding(var: nnx.Variable, mesh: Mesh) -> NamedSharding:
    """Where a parameter lives on `mesh`, from the logical names in its `out_sharding` metadata."""
    names = var.get_metadata().get("out_sharding")
    return NamedSharding(mesh, logical_to_spec(names, var.shape, dict(mesh.shape)))


def state_shardings(state: nnx.State, mesh: Mesh) -> Any:
    """A pure-dict tree of NamedShardings matching `nnx.to_pure_dict(state)`."""
    shardings = jax.tree.map(
        lambda v: variable_sharding(v, mesh), state, is_leaf=lambda x: isinstance(x, nnx.Variable)
    )
    return nnx.to_pure_dict(shardings)
