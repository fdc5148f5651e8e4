"""Memory plan of a recipe: compile its programs ahead of time for N devices and check they fit.

    python launch/plan.py --config configs/qwen3_8b.yaml                 # the recipe's stated hardware
    python launch/plan.py --config configs/qwen3_0.6b.yaml --devices 8 --hbm-gib 80
    python launch/plan.py --config configs/qwen3_8b.yaml rollout.batch_rows=64 rollout.cache_len=20480

The SFT step, GRPO step, sampler weight refresh, rollout prefill and rollout decode of the recipe
are lowered with abstract arrays and compiled on a mesh of N fake CPU devices (nothing is
allocated), and one table per program shows per-device bytes of its arguments, outputs,
temporaries and what stays resident beside it,
against the device memory. Exits with status 1, naming program and bytes, when one does not fit
with 10% headroom; `key=value` overrides work as in launch/train.py.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from b2tjax.cli import UserError
from b2tjax.config import load_config
from b2tjax.outputs import check_outputs

PROGRAMS = (
    "sft_step",
    "grpo_step",
    "sampler_refresh",
    "rollout_prefill",
    "rollout_decode",
)  # = memory_plan's


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", type=Path, required=True, help="YAML recipe")
    parser.add_argument(
        "--devices", type=int, default=None, help="devices (default: the recipe's hardware.devices)"
    )
    parser.add_argument(
        "--hbm-gib",
        type=float,
        default=None,
        help="memory per device in GiB (default: the recipe's hardware.hbm_gib)",
    )
    parser.add_argument(
        "--programs",
        default=",".join(PROGRAMS),
        help=f"comma-separated subset of {','.join(PROGRAMS)} (default: all)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures (bytes) to this file")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        check_outputs([("--json", args.json)], inputs=[("--config", args.config)])
        cfg = load_config(args.config, args.overrides)
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
    devices = args.devices or cfg.hardware.devices
    hbm_gib = cfg.hardware.hbm_gib if args.hbm_gib is None else args.hbm_gib
    if devices < 1 or hbm_gib < 0:
        print(
            f"error: --devices must be >= 1 and --hbm-gib >= 0, got {devices} and {hbm_gib}", file=sys.stderr
        )
        return 2
    # The device count is fixed when JAX starts: fake CPU devices stand in for the accelerators.
    os.environ["JAX_PLATFORMS"] = "cpu"
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split() if "host_platform_device_count" not in f]
    os.environ["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={devices}"])

    from b2tjax import memory_plan
    from b2tjax.mesh import build_mesh

    try:
        mesh = build_mesh(cfg.mesh)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    model = memory_plan.plan_model_config(cfg)
    hbm = int(hbm_gib * memory_plan.GIB)
    print(
        f"memory plan of {args.config}: {cfg.model.preset} ({model.num_params() / 1e9:.2f}B params, "
        f"{model.num_hidden_layers} layers), {memory_plan.mesh_summary(mesh)}, "
        f"{hbm_gib:g} GiB per device ({cfg.hardware.device_kind}); rollout {cfg.rollout.batch_rows} rows x "
        f"{cfg.cache_len} cache slots, {cfg.model.compute_dtype} compute, remat {cfg.model.remat}",
        flush=True,
    )
    started = time.perf_counter()
    programs = memory_plan.plan_programs(cfg, mesh, only)
    for program in programs:
        print("\n" + memory_plan.format_table(program, hbm))
    noun = "program" if len(programs) == 1 else "programs"
    print(f"\ncompiled {len(programs)} {noun} in {time.perf_counter() - started:.0f}s")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "devices": devices,
                    "hbm_bytes": hbm,
                    "programs": [memory_plan.as_dict(p) for p in programs],
                },
                indent=1,
            )
        )
    problems = memory_plan.failures(programs, hbm)
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
