"""Abstract arrays of a memory plan and the compiled memory of a program lowered with them.

The plan lowers the run's jitted functions with jax.ShapeDtypeStructs carrying the run's shardings
(nothing is allocated) and reads `compiled.memory_analysis()`; these helpers make those arguments,
count the bytes one device holds of them, and turn a compile into a ProgramMemory
(b2tjax/plan/memory_plan.py, b2tjax/plan/split_plan.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh

from b2tjax.plan.program_memory import ProgramMemory
from models.sharding import on_mesh


def with_shardings(shapes: Any, shardings: Any) -> Any:
    """ShapeDtypeStructs of `shapes` carrying `shardings` (a tree of the same structure, whose
    NamedShardings may stand where `shapes` has an nnx.Variable; None = unplaced)."""
    if shardings is None:
        return jax.tree.map(lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype), shapes)

    def place(sharding, shape):
        if isinstance(shape, nnx.Variable):
            return shape.replace(place(sharding, shape.get_value()))
        return jax.ShapeDtypeStruct(shape.shape, shape.dtype, sharding=sharding)

    return jax.tree.map(place, shardings, shapes)


def abstract_outputs(fn: Callable, *args: Any, mesh: Mesh | None = None) -> Any:
    """What jitted `fn(*args)` returns, as ShapeDtypeStructs with the shardings the compiler gives
    them. Compiles (cheaply: initialisers and casts), allocates nothing."""
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    shapes = jax.eval_shape(jitted, *args)
    if mesh is None:
        return with_shardings(shapes, None)
    return with_shardings(shapes, on_mesh(jitted, mesh).lower(*args).compile().output_shardings)


def shard_bytes(tree: Any) -> int:
    """Bytes one device holds of the arrays in `tree` (ShapeDtypeStructs or arrays)."""
    total = 0
    for leaf in jax.tree.leaves(tree):
        shape = leaf.shape
        sharding = getattr(leaf, "sharding", None)
        if sharding is not None:
            shape = sharding.shard_shape(shape)
        total += math.prod(shape) * jnp.dtype(leaf.dtype).itemsize
    return total


def memory_of(
    name: str, lowered: Any, arguments: dict[str, Any], resident: dict[str, int], analytic: dict[str, int]
) -> ProgramMemory:
    """Compile `lowered` and read its memory analysis. The TPU compiler refuses a program that
    does not fit the chip (RESOURCE_EXHAUSTED); that refusal is the plan's answer, not a crash."""
    started = time.perf_counter()
    groups = {k: shard_bytes(v) for k, v in arguments.items()}
    try:
        stats = lowered.compile().memory_analysis()
    except jax.errors.JaxRuntimeError as err:
        if "RESOURCE_EXHAUSTED" not in str(err):
            raise
        message = " ".join(str(err).split())[:300]
        return ProgramMemory(name, groups, 0, 0, 0, 0, resident, analytic, error=message)
    return ProgramMemory(
        name=name,
        arguments=groups,
        argument_bytes=int(stats.argument_size_in_bytes),
        output_bytes=int(stats.output_size_in_bytes),
        alias_bytes=int(stats.alias_size_in_bytes),
        temp_bytes=int(stats.temp_size_in_bytes),
        resident=resident,
        analytic=analytic,
        compile_s=time.perf_counter() - started,
    )


def shards(mesh: Mesh | None, *axes: str) -> int:
    return 1 if mesh is None else math.prod(mesh.shape.get(a, 1) for a in axes)
