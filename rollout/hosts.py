"""Multi-host helpers of the rollout (JAX multi-controller: one Python process per host).

Why these few: on a pod every process calls each jitted program with global arrays, but each
process only knows its own rows' data and may only read its own (addressable) shards. Rows a
process does not own are zero in what it feeds (masked no-op rows); what it reads back holds only
its rows. Small agreements ("anything left to decode?") are one all-gather of a few ints (`allgather`).
With one process every function is the plain single-host operation.

Agreements run on every device by default. A thread that runs programs while another thread runs
others on disjoint devices (the split placement decoding during the update, b2tjax/run/streaming.py)
must agree on its own devices only (`agreeing_on`): an agreement over every device would queue
behind the other thread's programs in an order that may differ from process to process, which
deadlocks the collectives.
"""

from __future__ import annotations

import contextlib
import functools
import pickle
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from models.sharding import logical_to_spec, row_devices


def multihost() -> bool:
    return jax.process_count() > 1


def episode_owner(index: int, group_size: int, processes: int, step: int = 0) -> int:
    """The process that drives episode `index` of a run: a pure function of (step, episode index,
    process count). The G episodes of one prompt (a GRPO group; a HiMAP team is one episode) stay
    on one process, and groups are dealt round-robin from a step-dependent start, so no host is
    always handed the first (often longest) prompt."""
    return (step + index // max(group_size, 1)) % processes


def row_sharding(mesh: Mesh, shape: tuple[int, ...]) -> NamedSharding:
    """Per-row arrays [B, ...]: rows split like the KV cache's rows (logical "batch")."""
    names = ("batch",) + (None,) * (len(shape) - 1)
    return NamedSharding(mesh, logical_to_spec(names, shape, dict(mesh.shape)))


def owned_rows(mesh: Mesh | None, rows: int) -> list[int]:
    """The batch rows whose cache lives on this process' devices (every row on one process)."""
    if mesh is None or not multihost():
        return list(range(rows))
    sharding = row_sharding(mesh, (rows,))
    if sharding.is_fully_replicated:
        raise ValueError(
            f"rollout.batch_rows={rows} must be a multiple of the mesh's data x fsdp x expert devices "
            f"({row_devices(dict(mesh.shape))}) to split rows over {jax.process_count()} processes"
        )
    owned: set[int] = set()
    for device, index in sharding.devices_indices_map((rows,)).items():
        if device.process_index == jax.process_index():
            owned.update(range(rows)[index[0]])
    return sorted(owned)


def put_rows(x: np.ndarray, mesh: Mesh | None) -> jax.Array:
    """A per-row host array [B, ...] as a device argument. Several processes: each supplies only
    the shards of its own devices (its own rows; the rest of `x` is never read)."""
    if mesh is None or not multihost():
        return jnp.asarray(x)
    return jax.make_array_from_callback(x.shape, row_sharding(mesh, x.shape), lambda index: x[index])


def read_local(x: jax.Array) -> np.ndarray:
    """`x` on the host, filled from this process' addressable shards only (other entries 0)."""
    if x.is_fully_addressable:
        return np.asarray(x)
    out = np.zeros(x.shape, x.dtype)
    for shard in x.addressable_shards:
        out[shard.index] = np.asarray(shard.data)
    return out


_scope = threading.local()  # .devices: the devices this thread's agreements run on (None: every device)


@contextlib.contextmanager
def agreeing_on(devices: Sequence[jax.Device] | None) -> Iterator[None]:
    """This thread's agreements (`agree`, `gather_objects`) run on `devices` only (every process
    must have some); None: on every device."""
    previous = getattr(_scope, "devices", None)
    _scope.devices = None if devices is None else tuple(devices)
    try:
        yield
    finally:
        _scope.devices = previous


def allgather(x: np.ndarray) -> np.ndarray:
    """Every process' `x` (same shape everywhere), stacked [processes, ...]: one collective on this
    thread's agreement devices (`agreeing_on`)."""
    if not multihost():
        return x[None]
    mesh = _agreement_mesh(getattr(_scope, "devices", None) or tuple(jax.devices()))
    mine = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
    stacked = jax.make_array_from_single_device_arrays(
        (jax.process_count(), *x.shape),
        NamedSharding(mesh, PartitionSpec("processes")),
        [jax.device_put(x[None], d) for d in mine],
    )
    return np.asarray(_replicate(mesh)(stacked).addressable_data(0))


@functools.cache
def _agreement_mesh(devices: tuple[jax.Device, ...]) -> Mesh:
    """[processes, local] grid of `devices` (the same number on each process)."""
    by_process = [[d for d in devices if d.process_index == p] for p in range(jax.process_count())]
    return Mesh(np.array(by_process), ("processes", "local"))


@functools.cache
def _replicate(mesh: Mesh):  # noqa: ANN202 (a jitted function)
    return jax.jit(lambda x: x, out_shardings=NamedSharding(mesh, PartitionSpec()))


def agree(values: Sequence[int]) -> np.ndarray:
    """Every process' `values` (int64 [processes, k]); one small collective."""
    return allgather(np.asarray(values, np.int64)).reshape(jax.process_count(), -1)


def gather_objects(obj: Any) -> list[Any]:
    """Every process' `obj` (picklable), in process order: how records and their scores, made by
    the process that drove their episodes, reach every host."""
    if not multihost():
        return [obj]
    data = np.frombuffer(pickle.dumps(obj), np.uint8)
    sizes = agree([len(data)])[:, 0]
    padded = np.zeros(int(sizes.max()), np.uint8)
    padded[: len(data)] = data
    everyone = allgather(padded)
    return [pickle.loads(everyone[p, : sizes[p]].tobytes()) for p in range(len(sizes))]


def merge_by_owner(owners: Sequence[int], parts: Sequence[Sequence[Any]]) -> list[Any]:
    """Items gathered per process (`parts[p]`: the items of p's episodes, in episode order) back in
    episode order, given each episode's owner."""
    iters = [iter(part) for part in parts]
    return [next(iters[owner]) for owner in owners]
