"""Multi-host start-up and the device mesh of a training run.

`maybe_initialize_distributed` must run before any other JAX call. On TPU VMs
`jax.distributed.initialize()` discovers everything itself; on multi-node GPU it reads
JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID (see docs/guides/gpu-slurm.md), and the
coordinator binds that address only (b2tjax/run/coordinator.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import jax
from jax.sharding import Mesh

from b2tjax.config import MeshConfig, TrainConfig
from b2tjax.errors import UserError
from b2tjax.run.coordinator import bind_address
from models.sharding import make_mesh, row_devices

_GPU_ENV = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


def maybe_initialize_distributed(enabled: bool) -> None:
    """Initialise the JAX distributed runtime when asked to or when the GPU variables are set."""
    from_env = all(os.environ.get(k) for k in _GPU_ENV)
    if not (enabled or from_env):
        return
    if from_env:
        address, process_id = os.environ["JAX_COORDINATOR_ADDRESS"], int(os.environ["JAX_PROCESS_ID"])
        jax.distributed.initialize(
            coordinator_address=address,
            num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
            process_id=process_id,
            # not JAX's default [::]: only the given interface, and never a port another job holds
            coordinator_bind_address=bind_address(address, process_id),
        )
    else:
        jax.distributed.initialize()  # TPU pods / SLURM: auto-detected


def build_mesh(cfg: MeshConfig) -> Mesh | None:
    """The (data, fsdp, expert, tensor) mesh the trainer runs on: every device, or with
    `mesh.rollout_devices` the train sub-mesh; None on a single device (plain jit, no sharding)."""
    if cfg.rollout_devices:
        return split_meshes(cfg)[0]
    if jax.device_count() == 1 and {cfg.data, cfg.fsdp, cfg.tensor, cfg.expert} <= {1, -1}:
        return None
    return make_mesh(cfg.data, cfg.fsdp, cfg.tensor, expert=cfg.expert)


def rollout_mesh(cfg: MeshConfig) -> Mesh | None:
    """The mesh the sampler decodes on: the run's mesh (co-located), or with `mesh.rollout_devices`
    the rollout sub-mesh, shaped as the train sub-mesh (same mesh sizes: the weight
    hand-over, rollout/handover.py, pairs each train device with one rollout device)."""
    if not cfg.rollout_devices:
        return build_mesh(cfg)
    return split_meshes(cfg)[1]


def split_meshes(cfg: MeshConfig, devices: Sequence[jax.Device] | None = None) -> tuple[Mesh, Mesh]:
    """(train sub-mesh, rollout sub-mesh) of `mesh.rollout_devices`, both shaped by `mesh`, over
    `devices` (default: every process's; launch/plan.py passes a target's compile-only devices)."""
    train, rollout = split_devices(cfg.rollout_devices, devices)
    return (
        make_mesh(cfg.data, cfg.fsdp, cfg.tensor, devices=train, expert=cfg.expert),
        make_mesh(cfg.data, cfg.fsdp, cfg.tensor, devices=rollout, expert=cfg.expert),
    )


def split_devices(
    rollout_devices: int, devices: Sequence[jax.Device] | None = None
) -> tuple[list[jax.Device], list[jax.Device]]:
    """(train devices, rollout devices) of `devices` (default: every process's): on each process
    (host) the last `rollout_devices` of its devices decode, the others train, so both sub-meshes
    span every process. Only an even split is supported (the sub-meshes must have one shape);
    anything else is a one-line UserError."""
    devices = list(jax.devices() if devices is None else devices)
    train: list[jax.Device] = []
    rollout: list[jax.Device] = []
    for process in sorted({d.process_index for d in devices}):
        local = [d for d in devices if d.process_index == process]
        if 2 * rollout_devices != len(local):
            raise UserError(
                f"mesh.rollout_devices={rollout_devices} must be half of each process's devices "
                f"(process {process} has {len(local)}): the train and rollout sub-meshes need one shape"
            )
        train += local[: len(local) - rollout_devices]
        rollout += local[len(local) - rollout_devices :]
    return train, rollout


def check_placement(cfg: TrainConfig, mesh: Mesh | None) -> None:
    """The placement checks a trainer makes at start-up, before any phase runs."""
    processes = jax.process_count()
    mesh_shape = None if mesh is None else dict(mesh.shape)
    check_rows_split(cfg.rollout.batch_rows, mesh_shape, processes)
    during = cfg.rollout.decode_during_update and cfg.rollout.max_staleness > 0
    check_concurrent_split(cfg.mesh.rollout_devices, during, jax.devices()[0].platform, processes)


def check_rows_split(batch_rows: int, mesh_shape: Mapping[str, int] | None, processes: int) -> None:
    """At start-up: on several processes each one drives the KV-cache rows on its own devices, so
    `rollout.batch_rows` must split evenly over the mesh's data x fsdp x expert devices (on one process an
    uneven count only shards less). A one-line error now, not after the SFT phase."""
    if mesh_shape is None or processes == 1:
        return
    split = row_devices(mesh_shape)
    if batch_rows % split:
        raise UserError(
            f"rollout.batch_rows={batch_rows} must be a multiple of the mesh's data x fsdp x expert size "
            f"({split}) on {processes} processes: each process drives the cache rows of its own devices"
        )


def check_concurrent_split(
    rollout_devices: int, decode_during_update: bool, platform: str, processes: int
) -> None:
    """At start-up: XLA:CPU's cross-process (gloo) collectives deadlock when two programs with
    several local devices each run at once (measured on the local cluster, JAX 0.10.2; one device
    per side per process runs), which is what decoding during the update does on a split
    placement. A one-line error rather than a hung run."""
    if decode_during_update and rollout_devices > 1 and processes > 1 and platform == "cpu":
        raise UserError(
            f"rollout.decode_during_update with mesh.rollout_devices={rollout_devices} on {processes} CPU "
            "processes: XLA:CPU's cross-process collectives deadlock when both sub-meshes run at once with "
            "several devices per process; use mesh.rollout_devices=1 (2 devices per process)"
        )
