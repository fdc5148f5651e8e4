"""Multi-host start-up and the device mesh of a training run.

`maybe_initialize_distributed` must run before any other JAX call. On TPU VMs
`jax.distributed.initialize()` discovers everything itself; on multi-node GPU it reads
JAX_COORDINATOR_ADDRESS, JAX_NUM_PROCESSES and JAX_PROCESS_ID (see docs/TRAINING.md).
"""

from __future__ import annotations

import os

import jax
from jax.sharding import Mesh

from b2tjax.config import MeshConfig
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
