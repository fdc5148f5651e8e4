"""A run's LoRA / QLoRA model: the base it starts from, the adapters on it, and the base's identity.

`model.init: hf:DIR` may name a PEFT adapter directory; the base is then the adapter's
`base_model_name_or_path` and training continues the adapter. A LoRA run's checkpoints hold the
adapters and their optimizer state only, plus the base's identity (path and a content hash),
which `--resume` compares with the base it loads: adapters mean nothing on another base.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import Mesh

from b2tjax.config.schema import ModelConfig
from b2tjax.errors import UserError
from b2tjax.run.resume import ResumePoint
from models import lora, peft
from models.checksums import verify_manifest
from models.config import Qwen3Config
from models.qwen3 import Qwen3ForCausalLM, on_mesh


def adapter_dir(init: str) -> str | None:
    """The PEFT adapter directory `init` names (hf:DIR holding adapter_config.json), else None."""
    if init.startswith("hf:") and peft.is_adapter_dir(init[3:]):
        return init[3:]
    return None


def base_init(model: ModelConfig) -> str:
    """The `model.init` of the base weights: a PEFT adapter's base, else `model.init` itself."""
    lora_cfg = model.lora
    return _base_init(model.init, lora_cfg.rank, lora_cfg.alpha, tuple(lora_cfg.targets))


@functools.cache
def _base_init(init: str, rank: int, alpha: float, targets: tuple[str, ...]) -> str:
    """Cached: the launcher, the model build and the base's identity each need the base, and an
    adapter's tensors are read and checked against it once per process, not at each."""
    path = adapter_dir(init)
    if path is None:
        return init
    base = peft.read_config(path)["base_model_name_or_path"]
    base = base if os.path.isabs(base) else os.path.join(path, base)
    if not os.path.isdir(base):
        raise UserError(f"the adapter {path} names base {base}, which is not a local directory")
    # the adapter's config and tensors against each other and the base, before anything is allocated
    saved = peft.check_adapter(path, Qwen3Config.from_hf(base))
    if (saved.rank, saved.alpha, sorted(saved.targets)) != (rank, alpha, sorted(targets)):
        raise UserError(
            f"model.lora (rank {rank}, alpha {alpha}, targets {list(targets)}) "
            f"differs from the adapter {path} "
            f"(rank {saved.rank}, alpha {saved.alpha}, targets {saved.targets})"
        )
    return f"hf:{base}"


def with_adapters(model: nnx.Module, cfg: Any, mesh: Mesh | None) -> nnx.Module:
    """`model` (the base, already in the compute dtype) with `model.lora`'s adapters: quantized
    first under QLoRA, adapters from the PEFT directory of `model.init` if it is one."""
    lora_cfg = cfg.model.lora
    if not lora_cfg.enabled:
        return model
    if lora_cfg.quant == "int8":
        lora.quantize_base(model, mesh)
    lora.add_lora(model, lora_cfg, seed=cfg.seed, mesh=mesh)
    path = adapter_dir(cfg.model.init)
    return peft.load_adapter(model, path) if path else model


def _hash_files(files: list[Path], root: Path) -> str:
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(root)).encode())
        with open(file, "rb") as f:
            while chunk := f.read(1 << 24):
                digest.update(chunk)
    return digest.hexdigest()


def base_identity(cfg: Any) -> dict[str, str]:
    """{"path", "sha256"} of the base weights: a hash of the checkpoint's files (hf: safetensors and
    config.json; ckpt: every file), or of the preset, overrides and seed of a random init; the
    QLoRA storage is part of the hash (a quantized base is another base)."""
    init = base_init(cfg.model)
    lora_cfg = cfg.model.lora
    if init:
        root = Path(init.split(":", 1)[1]).absolute()
        pattern = ("*.safetensors", "config.json") if init.startswith("hf:") else ("**/*",)
        files = sorted({p for glob in pattern for p in root.glob(glob) if p.is_file()})
        content = _hash_files(files, root)
        path = f"{init.split(':', 1)[0]}:{root}"
    else:
        recipe = {"preset": cfg.model.preset, "overrides": cfg.model.overrides, "seed": cfg.seed}
        content = hashlib.sha256(json.dumps(recipe, sort_keys=True, default=str).encode()).hexdigest()
        path = f"preset:{cfg.model.preset}"
    storage = f"{content}/{cfg.model.compute_dtype}/{lora_cfg.quant}"
    return {"path": path, "sha256": hashlib.sha256(storage.encode()).hexdigest()}


def check_base(saved: dict | None, current: dict | None, step: int, action: str = "--resume") -> None:
    """Refuse, in one line, to use adapters on another base than theirs (or a LoRA / full mismatch)."""
    if saved == current or (saved or {}).get("sha256") == (current or {}).get("sha256"):
        return
    what = lambda b: "full fine-tuning (no base)" if not b else f"{b['path']} (sha256 {b['sha256'][:12]})"  # noqa: E731
    raise UserError(
        f"{action} refused: checkpoint step {step} was trained on {what(saved)}, "
        f"this run loads {what(current)}"
    )


def run_items(directory: str | os.PathLike, step: int | None = None) -> tuple[int, dict, ResumePoint] | None:
    """(step, run config, resume point) of a training run's checkpoint directory (`step`, default the
    newest), or None when `directory` is not one (a plain model checkpoint)."""

    directory = Path(directory).absolute()
    if (directory / "params").is_dir() or not directory.is_dir():
        return None
    with ocp.CheckpointManager(directory) as manager:
        steps = manager.all_steps()
        if not steps:
            return None
        step = max(steps) if step is None else step
        verify_manifest(directory / str(step), hashes=False)  # the files, not a FIFO; no hashing
        items = manager.restore(
            step,
            args=ocp.args.Composite(config=ocp.args.JsonRestore(), train_state=ocp.args.JsonRestore()),
        )
    return step, items["config"], ResumePoint.from_json(items["train_state"])


def is_lora_run(directory: str | os.PathLike) -> bool:
    """Whether `directory` is the checkpoint directory of a run with `model.lora.rank > 0`."""
    try:
        found = run_items(directory)
    except Exception:  # a damaged newest step: the model loader reports it in one line, not a traceback here
        return False
    return found is not None and found[1].get("model", {}).get("lora", {}).get("rank", 0) > 0


def abstract_run_model(cfg: Any, model_cfg: Any, mesh: Mesh | None = None) -> nnx.Module:
    """The model a run trains, shapes only (launch/plan.py): the base in the compute dtype under
    LoRA (int8 projections under QLoRA) with its adapters, else the plain model in param_dtype;
    its attention the one for `mesh`'s platform (the plan's target, not this host), its paged cache
    read as the rollout's engine reads it (`rollout.paged_attention`)."""

    lora_cfg = cfg.model.lora
    runtime = on_mesh(cfg.model.runtime(paged_attention=cfg.rollout.paged_attention), mesh)

    def build() -> nnx.Module:
        model = Qwen3ForCausalLM(model_cfg, rngs=nnx.Rngs(0), runtime=runtime)
        if lora_cfg.quant == "int8":
            lora.quantize_base(model)
        return lora.add_lora(model, lora_cfg)

    return nnx.eval_shape(build)
