"""Load a LoRA run's checkpoint as a model: the base rebuilt from the run's own recipe with the
trained adapters restored onto it. Its own module because it builds the model the way the trainer
does (b2tjax.run.trainer.build_model), while the trainer itself needs b2tjax.run.adapters: keeping this here
keeps the two free of an import cycle."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp
from flax import nnx

from b2tjax.config import config_from_dict, freeze
from b2tjax.errors import UserError
from b2tjax.run.adapters import base_identity, check_base, run_items
from b2tjax.run.model_build import build_model
from models.checksums import verify_manifest
from models.config import Qwen3Config


def load_lora_run(directory: str | os.PathLike, step: int | None = None) -> tuple[nnx.Module, Any]:
    """(base + trained adapters, run config) of a LoRA run's checkpoint directory: the base is
    rebuilt from the run's `model.init` (refused when its identity is not the one trained on) and
    the adapters of `step` (default: the newest) restored onto it."""

    found = run_items(directory, step)
    if found is None:
        raise UserError(f"{directory} is not a training run's checkpoint directory")
    step, config, train_state = found
    verify_manifest(directory)  # the run's config.json (read for the vocabulary below)
    cfg = freeze(config_from_dict(config))  # the run's record, read once
    if not cfg.model.lora.enabled:
        raise UserError(f"{directory} is a full fine-tuning run (model.lora.rank = 0), it has no adapters")
    check_base(train_state.base, base_identity(cfg), step, action="export")
    model = build_model(cfg, vocab_size=Qwen3Config.from_hf(os.fspath(directory)).vocab_size)
    adapters = nnx.state(model, nnx.LoRAParam)
    target = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), nnx.to_pure_dict(adapters)
    )
    verify_manifest(Path(directory).absolute() / str(step))  # a flipped byte: Orbax reads it silently
    with ocp.StandardCheckpointer() as ckptr:
        restored = ckptr.restore(Path(directory).absolute() / str(step) / "params", target)
    nnx.replace_by_pure_dict(adapters, restored)
    nnx.update(model, adapters)
    return model, cfg
