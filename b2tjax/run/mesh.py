"""Multi-host start-up and the device mesh of a training run.

`maybe_initialize_distributed` must run before any other JAX call. On TPU VMs
`jax.distributed.initialize()` discovers everything itself; on multi-node GPU it reads
JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID (see docs/TRAINING.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import jax
from jax.sharding import Mesh

from b2tjax.config import MeshConfig
from b2tjax.errors import UserError
from models.sharding import make_mesh

_GPU_ENV = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


def maybe_initialize_distributed(enabled: bool) -> None:
    """Initialise the JAX distributed runtime when asked to or when the GPU variables are set."""
    from_env = all(os.environ.get(k) for k in _GPU_ENV)
    if not (enabled or from_env):
        return
    if from_env:
        jax.distributed.initialize(
            coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
            num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
            process_id=int(os.environ["JAX_PROCESS_ID"]),
        )
    else:
        jax.distributed.initialize()  # TPU pods / SLURM: auto-detected


def build_mesh(cfg: MeshConfig) -> Mesh | None:
    """The (data, fsdp, tensor) mesh, or None on a single device (plain jit, no sharding)."""
    if jax.device_count() == 1 and cfg.data in (1, -1) and cfg.fsdp in (1, -1) and cfg.tensor in (1, -1):
        return None
    return make_mesh(cfg.data, cfg.fsdp, cfg.tensor)


def check_rows_split(batch_rows: int, mesh_shape: Mapping[str, int] | None, processes: int) -> None:
    """At start-up: on several processes each one drives the KV-cache rows on its own devices, so
    `rollout.batch_rows` must split evenly over the mesh's data x fsdp devices (on one process an
    uneven count only shards less). A one-line error now, not after the SFT phase."""
    if mesh_shape is None or processes == 1:
        return
    split = mesh_shape["data"] * mesh_shape["fsdp"]
    if batch_rows % split:
        raise UserError(
            f"rollout.batch_rows={batch_rows} must be a multiple of the mesh's data x fsdp size ({split}) "
            f"on {processes} processes: each process drives the cache rows of its own devices"
        )
