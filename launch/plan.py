"""Memory plan of a recipe: compile its programs ahead of time for its target and check they fit.

    python launch/plan.py --config configs/qwen3_8b_tpu.yaml             # the recipe's hardware.target
    python launch/plan.py --config configs/qwen3_8b.yaml --target v5p-16 rollout.batch_rows=64
    python launch/plan.py --config configs/qwen3_0.6b.yaml --target cpu --devices 8 --hbm-gib 80

The SFT step, GRPO step, sampler weight refresh, rollout prefill and rollout decode of the recipe
are lowered with abstract arrays and compiled on a mesh of the target's devices (nothing is
allocated) by the target's own compiler: a TPU slice by name through libtpu, NVIDIA GPUs through
the CUDA plugin's deviceless compile, or N fake XLA:CPU devices (`cpu`, the fallback, which
overstates bf16 programs and plans "auto" attention by the blocked reference path;
b2tjax/plan/targets.py). One table per program shows per-device bytes of its arguments, outputs,
temporaries and what stays resident beside it, against the device memory.
Exits with status 1, naming program and bytes, when one does not fit with 10% headroom;
`key=value` overrides work as in launch/train.py.

With `mesh.rollout_devices: N` (the split placement) the target's devices are split as
the trainer splits them (on each host the last N decode, the others train; N must be half of each
host's devices): the train steps compile on the train sub-mesh (beside them the KL reference and
the hand-over's scratch, no sampler weights or KV cache), the rollout programs on the rollout
sub-mesh (beside them the hand-over's filler, no optimizer state), and the weight hand-over (in
place of the refresh) on the union mesh, with one table for a train device and one for a rollout
device; each side is checked against the device memory (b2tjax/plan/split_plan.py). The 8B TPU
recipe's halves need half its rows and micro-batches (docs/guides/memory-plan.md):

    python launch/plan.py --config configs/qwen3_8b_tpu.yaml mesh.rollout_devices=2 \\
        rollout.batch_rows=128 rollout.kv_pages=245760 sft.micro_batch_size=4 grpo.micro_batch_size=4

The rollout programs read and write the KV page pool of `rollout.pool_pages` pages; before them
the plan prints the pool's bytes per chip and the rows per chip it holds, contiguous vs paged at the
expert traces' mean and p90 live length (b2tjax/cli/kv_rows.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from b2tjax.cli.outputs import Paths, guard
from b2tjax.cli.script import quiet_compile_only_libtpu
from b2tjax.cli.trace_fit import check_trace_fit
from b2tjax.config import TrainConfig, freeze, load_config
from b2tjax.errors import UserError
from models.fields import finite_float

if TYPE_CHECKING:  # types only: these import JAX, which must start after use_cpu_host
    from b2tjax.plan.targets import Target
    from models.config import Qwen3Config

PROGRAMS = (
    "sft_step",
    "grpo_step",
    "sampler_refresh",  # co-located
    "weight_handover",  # split placement (mesh.rollout_devices)
    "rollout_prefill",
    "rollout_decode",
)  # = memory_plan's


PATHS = Paths(outputs=("--json",), inputs=("--config",))  # the one output guard (b2tjax/outputs.py)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", type=Path, required=True, help="YAML recipe")
    parser.add_argument(
        "--target",
        default=None,
        help="cpu, a TPU slice (v5e-16, v5p-32, 2xv6e-16) or GPUs (h100-8, 2xh100-8); "
        "default: the recipe's hardware.target, else cpu",
    )
    parser.add_argument(
        "--devices",
        type=int,
        default=None,
        help="cpu target: devices (default: the recipe's hardware.devices)",
    )
    parser.add_argument(
        "--hbm-gib",
        type=finite_float,
        default=None,
        help="memory per device in GiB (default: the target's; cpu: the recipe's hardware.hbm_gib)",
    )
    parser.add_argument(
        "--programs",
        default=",".join(PROGRAMS),
        help=f"comma-separated subset of {','.join(PROGRAMS)} (default: all)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures (bytes) to this file")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    return parser.parse_args(argv)


def resolve_target(args: argparse.Namespace, cfg) -> tuple:
    """The Target to compile for and its memory per device in GiB: --target, else the recipe's
    hardware.target, else cpu (sized by --devices / hardware.devices and hardware.hbm_gib)."""
    from b2tjax.plan.targets import parse_target  # JAX: only after use_cpu_host set its environment

    name = args.target or cfg.hardware.target or "cpu"
    devices = args.devices or cfg.hardware.devices
    target = parse_target(name, devices, cfg.hardware.hbm_gib)
    if target.platform != "cpu" and args.devices not in (None, target.chips):
        raise ValueError(f"--devices {args.devices} disagrees with target {name} ({target.chips} chips)")
    if name == cfg.hardware.target and cfg.hardware.devices != target.chips:
        raise ValueError(
            f"hardware.devices is {cfg.hardware.devices} but target {name} has {target.chips} chips"
        )
    hbm_gib = target.hbm_gib if args.hbm_gib is None else args.hbm_gib
    if target.chips < 1 or hbm_gib < 0:
        raise ValueError(f"--devices must be >= 1 and --hbm-gib >= 0, got {target.chips} and {hbm_gib}")
    return target, hbm_gib


def stand_in_attention(cfg: TrainConfig, target: Target) -> TrainConfig:
    """The cpu target stands in for an accelerator whose compiler is not here: "auto" attention is
    planned by the blocked reference path (auto's choice on a GPU in fp32; the fused kernels hold
    less), not by the unblocked [T, T] XLA form auto takes for programs that run on a CPU."""
    if target.platform != "cpu" or cfg.model.attention != "auto":
        return cfg
    model = dataclasses.replace(cfg.model, attention="reference")
    return freeze(dataclasses.replace(cfg, model=model))


def use_cpu_host(target: Target) -> None:
    """Before JAX starts: the host backend is always CPU (no accelerator is touched); the cpu
    target's fake devices are fixed when JAX starts, the others come from the target's
    compile-only topology (a TPU slice's: libtpu told the slice type, not left to ask the host)."""
    os.environ["JAX_PLATFORMS"] = "cpu"
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "host_platform_device_count" not in f]
    os.environ["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={target.chips}"])
    if target.platform == "tpu":  # "2xv5p-32": slices of type v5p-32
        quiet_compile_only_libtpu(target.name.partition("x")[2] if target.slices > 1 else target.name)


def describe(
    config: Path,
    cfg: TrainConfig,
    model: Qwen3Config,
    mesh_summary: str,
    target: Target,
    hbm_gib: float,
    decoding: int,
) -> str:
    """The plan's first line: model, mesh, memory per device, target and the rollout's shape
    (rows per chip of the `decoding` chips: all of them, or the rollout sub-mesh's)."""
    rope = model.rope_scaling
    scaled = f", RoPE {rope.kind} x{rope.factor:g} to {model.max_position_embeddings:,} positions"
    return (
        f"memory plan of {config}: {cfg.model.preset} ({model.num_params() / 1e9:.2f}B params, "
        f"{model.num_hidden_layers} layers{scaled if rope.scaled else ''}), {mesh_summary}, "
        f"{hbm_gib:g} GiB per device; target {target.describe()}; rollout {cfg.rollout.batch_rows} rows "
        f"({cfg.rollout.batch_rows / decoding:g} per chip) x "
        f"{cfg.cache_len} cache slots, {cfg.model.compute_dtype} compute, remat {cfg.model.remat}"
    )


def write_figures(
    path: Path, target: Target, hbm: int, programs: list[dict], placement: dict | None = None
) -> None:
    """--json: the target, the split placement (when `mesh.rollout_devices` > 0) and every
    program's figures (bytes)."""
    figures = {
        "target": target.name,
        "platform": target.platform,
        "devices": target.chips,
        "hbm_bytes": hbm,
        "programs": programs,
    }
    if placement is not None:
        figures["placement"] = placement
    path.write_text(json.dumps(figures, indent=1))


def split_summary(cfg: TrainConfig, train, rollout, programs: list, hbm: int) -> dict:
    """The split placement's devices and, per side, the program using the most of a device: one
    printed line per side and the --json `placement`."""
    from b2tjax.plan.program_memory import GIB
    from b2tjax.plan.split_plan import side_peaks

    placement = {
        "rollout_devices_per_host": cfg.mesh.rollout_devices,
        "mesh": dict(train.shape),
        "train_device_ids": [d.id for d in train.devices.flat],
        "rollout_device_ids": [d.id for d in rollout.devices.flat],
        "peak": {},
    }
    for side, p in side_peaks(programs).items():
        placement["peak"][side] = {"program": p.label, "total_bytes": p.total_bytes}
        share = f" ({p.total_bytes / hbm:.0%} of {hbm / GIB:g} GiB)" if hbm else ""
        print(f"{side} side: at most {p.total_bytes / GIB:.3f} GiB per device{share}, in {p.label}")
    return placement


def mesh_line(train, rollout, cfg: TrainConfig) -> str:
    """The mesh(es) of the plan's first line."""
    from b2tjax.plan.program_memory import mesh_summary

    if rollout is None:
        return mesh_summary(train)
    return (
        f"train sub-mesh {mesh_summary(train)} + rollout sub-mesh {mesh_summary(rollout)} "
        f"(mesh.rollout_devices={cfg.mesh.rollout_devices}: on each host the last {cfg.mesh.rollout_devices} "
        "devices decode, the others train)"
    )


def print_kv_budget(cfg, model, mesh, chips: int) -> None:
    """The KV budget per chip and the rows per chip it holds at the expert traces' live lengths."""
    from b2tjax.cli.kv_rows import kv_budget_lines
    from b2tjax.plan import memory_plan
    from b2tjax.sft.lengths import read_lengths
    from models.paged_kv import row_shards
    from rollout.placement import kv_bytes_per_slot

    data = Path(cfg.data.data_dir)
    kv_lines = kv_budget_lines(
        cfg,
        read_lengths(data) if data.is_dir() else None,
        row_shards(mesh, cfg.rollout.batch_rows),
        chips,
        kv_bytes_per_slot(model, memory_plan.DTYPES[cfg.cache_dtype]),
        memory_plan.analytic_sizes(cfg, model, mesh)["KV cache"],
    )
    print("\n".join(kv_lines), flush=True)


def compile_programs(cfg: TrainConfig, mesh, rollout, only: tuple[str, ...], hbm: int) -> list:
    """The programs of `only`, co-located on `mesh` or split between it and the `rollout` sub-mesh,
    each table printed as soon as its program is compiled (minutes each for a large model)."""
    from b2tjax.plan import memory_plan, program_memory
    from b2tjax.plan.split_plan import split_programs

    started = time.perf_counter()
    programs = []
    planned = (
        memory_plan.plan_programs(cfg, mesh, only)
        if rollout is None
        else split_programs(cfg, mesh, rollout, only)
    )
    for program in planned:
        programs.append(program)
        print("\n" + program_memory.format_table(program, hbm), flush=True)
    compiled = len({p.name for p in programs})  # the hand-over's two tables are one program
    noun = "program" if compiled == 1 else "programs"
    print(f"\ncompiled {compiled} {noun} in {time.perf_counter() - started:.0f}s")
    return programs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        guard(args, PATHS)
        cfg = freeze(load_config(args.config, args.overrides))
        check_trace_fit(cfg)  # the recipe's share of whole expert traces (DATA/trace_lengths.json)
    except (UserError, ValueError, FileNotFoundError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    only = tuple(p.strip() for p in args.programs.split(",") if p.strip())
    unknown = sorted(set(only) - set(PROGRAMS))
    if unknown or not only:
        print(
            f"error: --programs takes names from {', '.join(PROGRAMS)}; got {args.programs!r}",
            file=sys.stderr,
        )
        return 2
    try:
        target, hbm_gib = resolve_target(args, cfg)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    use_cpu_host(target)
    cfg = stand_in_attention(cfg, target)

    # JAX: imported only after use_cpu_host set the environment it reads at start-up
    from b2tjax.plan import memory_plan, program_memory
    from b2tjax.plan.split_plan import plan_meshes

    try:
        mesh, rollout = plan_meshes(target, cfg.mesh)  # rollout: the split placement's sub-mesh
        model = memory_plan.plan_model_config(cfg)
    except (ValueError, UserError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    hbm = int(hbm_gib * program_memory.GIB)
    decoding = target.chips if rollout is None else rollout.devices.size
    print(
        describe(args.config, cfg, model, mesh_line(mesh, rollout, cfg), target, hbm_gib, decoding),
        flush=True,
    )
    if cfg.task == "travel":
        print_kv_budget(cfg, model, mesh if rollout is None else rollout, decoding)
    programs = compile_programs(cfg, mesh, rollout, only, hbm)
    placement = None if rollout is None else split_summary(cfg, mesh, rollout, programs, hbm)
    if args.json is not None:
        write_figures(args.json, target, hbm, [program_memory.as_dict(p) for p in programs], placement)
    problems = program_memory.failures(programs, hbm)
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
