"""Compile targets of the memory plan: TPU slices and NVIDIA GPUs by name, compiled without them.

JAX compiles for hardware it does not have: `jax.experimental.topologies.get_topology_desc` gives
compile-only devices of a TPU slice (libtpu, the `jax[tpu]` extra) or of NVIDIA GPUs described by
a GpuTargetConfigProto (the CUDA PJRT plugin), and `jit(...).lower(...).compile()` on a mesh of
them runs that target's own compiler on this CPU machine (MaxText's ahead-of-time compile works
the same way). `cpu` is the fallback: N fake XLA:CPU devices.

Names: `v5e-16`, `v6e-8` (chips), `v4-16`, `v5p-32` (TensorCores: two per chip, as Google Cloud
names them), `2xv5e-16` (two slices over the data-center network), `h100-8`, `2xh200-8` (GPUs per
node, nodes), `l4-1`, `rtx4090-1`, `cpu`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
from collections.abc import Sequence

import jax
import numpy as np
from jax.experimental import mesh_utils, topologies
from jax.sharding import Mesh

from models.sharding import MESH_AXES, make_mesh

# generation -> (libtpu topology prefix, chip config, TensorCores per chip, HBM GiB per chip, 3-D torus)
TPU_GENERATIONS = {
    "v4": ("v4", "megacore", 2, 32.0, True),
    "v5p": ("v5", "megacore", 2, 95.0, True),
    "v5e": ("v5e", "default", 1, 16.0, False),
    "v6e": ("v6e", "default", 1, 32.0, False),
}
# GPU -> (device_description_str, memory bytes as CUDA reports them, SMs, shared memory per SM,
# compute capability, threads per SM); the other figures of gpu_target_config (bandwidth, L2,
# clock) are an H100 SXM's for all: the memory plan does not depend on them.
GPUS = {
    "h100": ("NVIDIA H100 80GB HBM3", 84_942_979_072, 132, 233_472, (9, 0), 2048),
    "h200": ("NVIDIA H200", 150_754_820_096, 132, 233_472, (9, 0), 2048),
    "l4": ("NVIDIA L4", 23_034 * 1024**2, 58, 102_400, (8, 9), 1536),
    "rtx4090": ("NVIDIA GeForce RTX 4090", 24_564 * 1024**2, 128, 102_400, (8, 9), 1536),
}
GIB = 1024**3


@dataclasses.dataclass(frozen=True)
class Target:
    """A machine to compile for: `slices` x `chips_per_slice` devices of `hbm_gib` each."""

    name: str
    platform: str  # "tpu" | "cuda" | "cpu"
    device_kind: str
    chips_per_slice: int
    hbm_gib: float
    slices: int = 1
    topology: str = ""  # libtpu's topology name of one slice, e.g. "v5e:4x4"
    chip_config: str = "default"
    host_bounds: tuple[int, int, int] = (2, 2, 1)

    @property
    def chips(self) -> int:
        return self.slices * self.chips_per_slice

    def describe(self) -> str:
        compiler = {"tpu": "TPU compiler", "cuda": "CUDA compiler", "cpu": "XLA:CPU fallback"}
        slices = f"{self.slices} x " if self.slices > 1 else ""
        return f"{self.name}: {slices}{self.chips_per_slice} x {self.device_kind} ({compiler[self.platform]})"


# chips of one slice -> its chip grid, as Google Cloud builds slices (2-D: v5e, v6e; 3-D: v4, v5p)
GRID_2D = {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16", 256: "16x16"}
GRID_3D = {4: "2x2x1", 8: "2x2x2", 16: "2x2x4", 32: "2x4x4", 64: "4x4x4", 128: "4x4x8", 256: "4x8x8"}


def parse_target(name: str, devices: int = 1, hbm_gib: float = 0.0) -> Target:
    """The Target called `name`; `devices` and `hbm_gib` only size the `cpu` fallback."""
    match = re.fullmatch(r"(?:(\d+)x)?([a-z0-9]+)-(\d+)", name.strip().lower())
    if name == "cpu":
        return Target("cpu", "cpu", "cpu (fake XLA:CPU devices)", devices, hbm_gib)
    if match is None or match.group(2) not in {**TPU_GENERATIONS, **GPUS}:
        raise ValueError(
            f"unknown target {name!r}: use cpu, a TPU slice ({', '.join(TPU_GENERATIONS)}: e.g. v5e-16, "
            f"v5p-32, 2xv6e-16) or GPUs per node ({', '.join(GPUS)}: e.g. h100-8, 2xh100-8)"
        )
    slices, kind, count = int(match.group(1) or 1), match.group(2), int(match.group(3))
    if slices < 1 or count < 1:
        raise ValueError(f"target {name!r}: slice count and size must be >= 1")
    if kind in GPUS:
        return Target(name, "cuda", GPUS[kind][0], count, GPUS[kind][1] / GIB, slices)
    prefix, chip_config, cores, hbm, cube = TPU_GENERATIONS[kind]
    if count % cores:
        raise ValueError(f"target {name!r}: {kind} slices are named by TensorCores, a multiple of {cores}")
    chips, grids = count // cores, GRID_3D if cube else GRID_2D
    if chips not in grids:
        raise ValueError(f"target {name!r}: a {kind} slice has {', '.join(str(c * cores) for c in grids)}")
    topology = f"{prefix}:{grids[chips]}"
    bounds = (2, 4, 1) if chips == 8 and not cube else (1, 1, 1) if chips == 1 else (2, 2, 1)
    return Target(name, "tpu", f"TPU {kind}", chips, hbm, slices, topology, chip_config, bounds)


def gpu_target_config(kind: str) -> str:
    """A GpuTargetConfigProto (text format) describing one GPU, for the deviceless CUDA compile."""
    description, memory, cores, smem, (major, minor), threads = next(v for v in GPUS.values() if v[0] == kind)
    return (
        "gpu_device_info {\n  threads_per_block_limit: 1024\n  threads_per_warp: 32\n"
        f"  shared_memory_per_block: 49152\n  shared_memory_per_core: {smem}\n"
        f"  threads_per_core_limit: {threads}\n  core_count: {cores}\n  fpus_per_core: 128\n"
        "  block_dim_limit_x: 2147483647\n  block_dim_limit_y: 65535\n  block_dim_limit_z: 65535\n"
        "  memory_bandwidth: 3352320000000\n  l2_cache_size: 52428800\n  clock_rate_ghz: 1.98\n"
        f"  device_memory_size: {memory}\n  shared_memory_per_block_optin: {smem - 1024}\n"
        f"  cuda_compute_capability {{ major: {major} minor: {minor} }}\n  registers_per_core_limit: 65536\n"
        "  registers_per_block_limit: 65536\n}\n"
        'platform_name: "CUDA"\ndnn_version_info { major: 9 minor: 8 }\n'
        f'device_description_str: "{description}"\n'
    )


def target_devices(target: Target) -> list[jax.Device]:
    """Compile-only devices of the whole target (every slice); `cpu`: the host's (fake) devices."""

    if target.platform == "cpu":
        return jax.devices("cpu")
    # Compile-only use touches no chip: several plans (or test workers) may load libtpu at once,
    # and the CUDA plugin needs no CUDA runtime (its version check would refuse to load without one).
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ.setdefault("JAX_SKIP_CUDA_CONSTRAINTS_CHECK", "1")
    try:
        if target.platform == "tpu":
            topo = topologies.get_topology_desc(
                platform="tpu",
                topology_name=target.topology,
                chip_config_name=target.chip_config,
                chips_per_host_bounds=target.host_bounds,
                num_slices=target.slices,
            )
        else:
            topo = topologies.get_topology_desc(
                platform="cuda",
                topology=f"{target.slices}x1x{target.chips_per_slice}",
                target_config=gpu_target_config(target.device_kind),
            )
    except (RuntimeError, NotImplementedError) as err:
        extra = "tpu" if target.platform == "tpu" else "plan-cuda"
        raise ValueError(
            f"cannot compile for {target.name}: {str(err).splitlines()[0]} "
            f"(install the [{extra}] extra, or plan with --target cpu)"
        ) from None
    return list(topo.devices)


def _dcn_axis(sizes: Sequence[int], slices: int) -> int:
    """The mesh axis that spans the slices: data when it holds them, else fsdp."""
    for axis in (0, 1):
        if sizes[axis] % slices == 0:
            return axis
    raise ValueError(f"mesh {dict(zip(MESH_AXES, sizes))}: neither data nor fsdp splits over {slices} slices")


def device_grid(target: Target, sizes: Sequence[int], devices: Sequence[jax.Device]) -> np.ndarray:
    """`devices` arranged as the MESH_AXES grid `sizes`, following the topology: within a slice
    along the chip interconnect (ICI), across slices (DCN) on the data axis when it can."""
    if target.platform != "tpu":
        return np.asarray(devices, dtype=object).reshape(sizes)

    if target.slices == 1:
        return _ici_mesh(sizes, devices)
    axis = _dcn_axis(sizes, target.slices)
    dcn = [target.slices if a == axis else 1 for a in range(len(sizes))]
    ici = [s // d for s, d in zip(sizes, dcn, strict=True)]
    return mesh_utils.create_hybrid_device_mesh(ici, dcn, devices, allow_split_physical_axes=True)


def _ici_mesh(sizes: Sequence[int], devices: Sequence[jax.Device]) -> np.ndarray:
    """One slice's grid: each mesh axis on whole torus axes where it can, else (fsdp 8 x tensor 2
    on a 4x4 v6e-16) split across them, as MaxText's allow_split_physical_axes does."""

    try:
        return mesh_utils.create_device_mesh(sizes, devices)
    except NotImplementedError:
        return mesh_utils.create_device_mesh(sizes, devices, allow_split_physical_axes=True)


def target_mesh(target: Target, data: int, fsdp: int, tensor: int, expert: int = 1) -> Mesh | None:
    """The (data, fsdp, expert, tensor) mesh on `target`'s devices; None for one CPU device (plain jit)."""

    devices = target_devices(target)
    if target.platform == "cpu" and len(devices) == 1 and {data, fsdp, tensor, expert} <= {1, -1}:
        return None
    named = {"data": data, "fsdp": fsdp, "expert": expert, "tensor": tensor}
    sizes = [named[a] for a in MESH_AXES]
    if sizes.count(-1) == 1:
        known = math.prod(s for s in sizes if s != -1)
        sizes = [len(devices) // known if s == -1 else s for s in sizes]
    if math.prod(sizes) != len(devices):  # make_mesh names the problem
        return make_mesh(**named, devices=devices)
    grid = device_grid(target, sizes, devices)
    return make_mesh(**dict(zip(MESH_AXES, sizes)), devices=list(grid.reshape(-1)))
