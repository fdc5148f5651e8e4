"""Train a Qwen3 travel-planning agent: SFT warm start on expert traces, then GRPO with the sandbox reward.

    python launch/train.py                                  # tiny CPU run, builds everything it needs
    python launch/train.py --config configs/qwen3_8b.yaml --out /mnt/shared/run1
    python launch/train.py --resume --out runs/tiny         # continue exactly where the run stopped
                                            # (b2tjax/run/resume.py: the few keys a resume may change)
    python launch/train.py --init hf:/models/Qwen3-0.6B --config configs/qwen3_0.6b.yaml
    python launch/train.py --benchmark travelplanner       # another benchmark (config key `benchmark`)
    python launch/train.py grpo.loss_mask=false rollout.memory_enabled=false   # ablations
    python launch/train.py --config configs/himap_tiny_cpu.yaml   # HiMAP team (agent: himap)
    python launch/cluster.py --processes 2 --devices-per-process 2 -- launch/train.py \\
        mesh.fsdp=2 mesh.tensor=2                           # a stand-in pod (docs/guides/tpu-pod.md)
    python launch/train.py mode=sft_only                    # SFT baseline; mode=eval with
                                                            # rollout.prompt_style=react: ReAct baseline

`key=value` arguments override the config (dotted paths, YAML values). --out is a filesystem path (on
a pod, one every host mounts); object-store URLs (gs://...) are refused: not supported yet. A SIGTERM
(TPU preemption) or a first Ctrl-C saves a checkpoint of the finished step and exits with status 143;
run again with --resume (a second Ctrl-C stops at once, without the save). The final evaluation
writes OUT/eval.json and OUT/report.html (the HTML report of its episodes, with this run's curves).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from b2tjax.cli.hardware import check_hardware
from b2tjax.cli.init_weights import check_init_agrees
from b2tjax.cli.outputs import Paths, guard
from b2tjax.cli.script import add_trust_option, check_recipe, run_main, setup_logging, trust_from_args
from b2tjax.cli.trace_fit import check_trace_fit
from b2tjax.config import TrainConfig, apply_overrides, dump_config, freeze, load_config, validate
from b2tjax.data.marker import read_marker
from b2tjax.errors import UserError
from b2tjax.run.adapters import base_init
from b2tjax.run.metrics import import_wandb
from b2tjax.run.resume import (
    check_changes,
    check_extension,
    checkpoint_record,
    config_changes,
    extension_note,
    record_resume,
)
from b2tjax.run.weights_tokenizer import weights_tokenizer

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CONFIG = ROOT / "configs" / "tiny_cpu.yaml"
PREEMPTED_EXIT = 143
RECORD = "config.yaml"  # the run's config as it started; a resume never rewrites it


# the one output guard's view (b2tjax/outputs.py); --out and model.init as the recipe resolves them
PATHS = Paths(outputs=("--out",), inputs=("--config", "--init"), dirs=True)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--config", type=Path, default=None, help=f"YAML recipe (default {DEFAULT_CONFIG.name})"
    )
    parser.add_argument("--out", default=None, help="run directory (overrides the config's `out`)")
    parser.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --out")
    parser.add_argument(
        "--benchmark",
        default=None,
        help="benchmark to train on (overrides the config's `benchmark`; default b2t)",
    )
    parser.add_argument("--init", default=None, help="initial weights: hf:DIR (Hugging Face) or ckpt:DIR")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (log files only)")
    add_trust_option(parser)
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    return parser.parse_intermixed_args(argv)  # overrides may sit before and after the options


def check_out_dir(out: Path, resume: bool) -> None:
    """A run directory that holds checkpoints is continued with --resume, never trained over; and
    --resume continues a run, never starts one (a mistyped --out would train from scratch)."""
    ckpt = out / "checkpoints"
    steps = sorted(int(p.name) for p in ckpt.iterdir() if p.name.isdigit()) if ckpt.is_dir() else []
    if resume and not steps and not (out / RECORD).is_file():
        raise UserError(
            f"--resume: {out} holds no run (no {RECORD}, no checkpoints); check --out, or drop "
            "--resume to start a new run there"
        )
    if steps and not resume:
        raise UserError(
            f"{out} already holds a run (checkpoint steps {steps}); pass --resume to continue it "
            "or choose another --out"
        )


def builds_missing_data(overrides: list[str], build_missing: bool) -> bool:
    """`data.build_missing` builds the recipe's own data directory only: one named on the command
    line (maybe a typo) is built only when the command line says `data.build_missing=true` too."""
    keys = {o.split("=", 1)[0] for o in overrides}
    return build_missing and ("data.data_dir" not in keys or "data.build_missing" in keys)


def model_banner(model: Any, cfg: TrainConfig) -> str:
    """'model: 2 layers, hidden 64, vocab 4096, 0.34M params', and with adapters on what is trained:
    ', LoRA rank 16 on [q_proj, ...] (1.23M trainable; base frozen[, int8])'."""
    c = model.config
    line = f"model: {c.num_hidden_layers} layers, hidden {c.hidden_size}, vocab {c.vocab_size}, "
    line += f"{c.num_params() / 1e6:.2f}M params"
    lora = cfg.model.lora
    if lora.enabled:
        from flax import nnx  # JAX: this script starts without it (make_data forks first)

        flat = nnx.state(model, nnx.Param).flat_state()
        adapters = sum(v.value.size for path, v in flat if "_lora_" in str(path[-1]))
        quant = ", int8" if lora.quant == "int8" else ""
        targets = ", ".join(lora.targets)
        line += f", LoRA rank {lora.rank} on {targets} ({adapters / 1e6:.2f}M trainable; base frozen{quant})"
    return line


def _load(config_path: Path | None, overrides: list[str], benchmark_chosen: bool) -> TrainConfig:
    """The recipe <- key=value; with no benchmark chosen, the one `data.data_dir` holds (its
    benchmark.json) when it names one, applied as the last override."""
    return _held_benchmark(load_config(config_path, overrides), overrides, benchmark_chosen)


def _held_benchmark(cfg: TrainConfig, overrides: list[str], benchmark_chosen: bool) -> TrainConfig:
    chosen = benchmark_chosen or any(o.startswith("benchmark=") for o in overrides)
    held = None if chosen else read_marker(cfg.data.data_dir)
    if held is not None and held != cfg.benchmark:
        return validate(apply_overrides(cfg, [f"benchmark={held}"]))
    return cfg


def _weights_tokenizer(cfg: TrainConfig) -> TrainConfig:
    """`cfg` with the tokenizer that comes with `model.init`'s weights (the travel task's)."""
    if cfg.task != "travel":
        return cfg
    tokenizer, why = weights_tokenizer(base_init(cfg.model), cfg.model.tokenizer)
    if why:
        print(why, flush=True)
    return dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, tokenizer=tokenizer))


def _recipe(args: argparse.Namespace) -> tuple[Path | None, list[str]]:
    """The recipe file (default configs/tiny_cpu.yaml) and the key=value overrides the options add."""
    config_path = (
        args.config if args.config is not None else (DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None)
    )
    overrides = list(args.overrides)
    if args.out is not None:
        overrides.append(f"out={args.out}")
    if args.init is not None:
        overrides.append(f"model.init={args.init}")
    if args.benchmark is not None:
        overrides.append(f"benchmark={args.benchmark}")
    return config_path, overrides


def guard_paths(args: argparse.Namespace, cfg: TrainConfig) -> None:
    """The output guard, before anything else reads the inputs (the weights' tokenizer included)."""
    init = cfg.model.init.split(":", 1)[1] if ":" in cfg.model.init else None
    if init is not None and not os.path.isdir(init):  # before the tokenizer is looked for in it
        raise UserError(f"model.init={cfg.model.init}: {init} is not a directory")
    guard(args, PATHS, out=cfg.out, init=init, data_dirs=[cfg.data.data_dir])


def read_recipe(args: argparse.Namespace) -> TrainConfig:
    """The recipe (default configs/tiny_cpu.yaml), then the options, then key=value: read once."""
    config_path, overrides = _recipe(args)
    check_recipe(args.config, ROOT / "configs")
    try:
        return _load(config_path, overrides, args.benchmark is not None)
    except ValueError as err:  # MarkerError included
        raise UserError(str(err)) from None


def resolve_config(args: argparse.Namespace, cfg: TrainConfig) -> tuple[TrainConfig, dict | None]:
    """(the run's config, the changes a resume makes to the recorded one, None when not resuming one)
    from `cfg`, the recipe as read_recipe read it, and its weights' tokenizer.

    `--resume` of a run with OUT/config.yaml (or, without it, with a checkpoint's recorded config)
    starts from that record instead (read once; unless --config names a recipe) and refuses any
    change outside b2tjax.run.resume.SAFE_TO_CHANGE but more `steps` (then says what the extension
    keeps). The config returned is frozen: nothing after this point changes it."""
    _, overrides = _recipe(args)
    try:
        recorded = Path(cfg.out) / RECORD
        if args.resume and not recorded.is_file():  # only checkpoints/ was kept
            recorded = checkpoint_record(Path(cfg.out) / "checkpoints") or recorded
        if not (args.resume and recorded.is_file()):
            return freeze(_weights_tokenizer(cfg)), None
        was = load_config(recorded)
        if args.config is None:  # the run's own record is the recipe of its resume
            cfg = validate(apply_overrides(copy.deepcopy(was), overrides))
            cfg = _held_benchmark(cfg, overrides, args.benchmark is not None)
        cfg = _weights_tokenizer(cfg)
        # both read as configs (typed: a checkpoint's JSON `1e-06` is a string to YAML), then as YAML
        changes = config_changes(*(yaml.safe_load(yaml.safe_dump(c.to_dict())) for c in (was, cfg)))
        check_changes(changes)
        check_extension(changes, cfg.mode)
        if note := extension_note(changes):
            print(note, flush=True)
        return freeze(cfg), changes
    except ValueError as err:  # MarkerError included
        raise UserError(str(err)) from None


def make_task(cfg: TrainConfig) -> tuple[Any, int]:
    """(the run's Task, its vocabulary size); a benchmark task's tokenizer is saved beside the
    checkpoints, where export_hf, rollouts and the notebook find it."""
    import jax  # JAX: this script starts without it (make_data forks first)

    if cfg.task == "toy":  # the tasks import JAX: loaded here, after make_data has forked
        from b2tjax.tasks.toy import DigitTask

        return DigitTask(cfg.toy, cfg.rollout.temperature), cfg.toy.vocab_size
    from b2tjax.run.task_build import build_task

    task = build_task(cfg)
    if jax.process_index() == 0:
        task.tokenizer.save_hf(Path(cfg.out) / "checkpoints")
    return task, task.vocab_size


def final_report(task: Any, table: str, out: Path, resume: bool) -> None:
    """OUT/report.html of the final evaluation's episodes (the tasks that keep them)."""
    from b2tjax.report import write_run_report

    line = write_run_report(task.eval_episodes(), table, out, resume)
    if line:
        print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    trust_from_args(args)
    loaded = read_recipe(args)
    guard_paths(args, loaded)
    cfg, changes = resolve_config(args, loaded)
    check_out_dir(Path(cfg.out), args.resume)
    check_init_agrees(base_init(cfg.model), cfg.model.preset, dict(cfg.model.overrides))
    if cfg.metrics.wandb:
        import_wandb()  # missing: one line now, not after the data and the model are built

    setup_logging()  # before make_data and JAX: their INFO chatter stays quiet
    if cfg.task == "travel":  # make_data forks workers: before JAX starts its threads
        from b2tjax.cli.prepare import build_or_wait  # loaded only for the travel task

        build = builds_missing_data(args.overrides, cfg.data.build_missing)
        build_or_wait(Path(cfg.data.data_dir), cfg.data.world_scale, cfg.benchmark, build)
        check_trace_fit(cfg)  # the share of expert traces the recipe holds whole; < 90%: refused

    from b2tjax.run.mesh import maybe_initialize_distributed  # JAX from here on (after the fork)

    maybe_initialize_distributed(cfg.distributed)  # before any other JAX call

    import jax

    recipe = args.config or (Path(cfg.out) / RECORD if changes is not None else DEFAULT_CONFIG)
    check_hardware(cfg.hardware, jax.devices()[0].platform, jax.device_count(), str(recipe))

    from b2tjax.run.trainer import Preempted, Trainer, build_model

    started = time.perf_counter()
    Path(cfg.out).mkdir(parents=True, exist_ok=True)
    if jax.process_index() == 0 and changes is None:  # a resumed run keeps its record
        dump_config(cfg, Path(cfg.out) / RECORD)
    task, vocab = make_task(cfg)
    model = build_model(cfg, vocab_size=vocab)
    if vocab > model.config.vocab_size:
        raise UserError(
            f"the tokenizer has {vocab} ids but the model only {model.config.vocab_size} "
            f"embeddings (model.init={cfg.model.init!r}, "
            f"model.tokenizer={cfg.model.tokenizer!r})"
        )
    devices = f"{jax.device_count()} x {jax.devices()[0].platform}"
    print(f"{model_banner(model, cfg)}; devices: {devices}", flush=True)
    trainer = Trainer(cfg, task, model, resume=args.resume, progress=not args.no_progress, valid_vocab=vocab)
    if jax.process_index() == 0 and changes is not None:  # accepted (the model matches): the history says how
        record_resume(Path(cfg.out), changes, sys.argv[1:] if argv is None else argv)
    try:
        result = trainer.run()
    except Preempted as stop:
        print(f"preempted at step {stop.args[0]}; resume with --resume --out {cfg.out}", flush=True)
        return PREEMPTED_EXIT
    if jax.process_index() == 0 and result.eval_table is not None:
        final_report(task, result.eval_table, Path(cfg.out), args.resume)
    print(
        f"done: {result.final_step} steps in {time.perf_counter() - started:.0f}s; run directory {cfg.out}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
