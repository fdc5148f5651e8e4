"""Build the model a run trains: a random init from a preset, or `hf:DIR` / `ckpt:DIR` weights, with
the recipe's RoPE scaling (`model.rope_scaling`) and LoRA adapters when the recipe asks for them.
Its own module so that both the trainer and the LoRA run loader (b2tjax/run/lora_run.py) build
exactly the same model without importing each other."""

from __future__ import annotations

from flax import nnx

from b2tjax.config import TrainConfig
from b2tjax.errors import UserError
from b2tjax.run.adapters import base_init, is_lora_run, with_adapters
from b2tjax.run.mesh import build_mesh
from models.checkpoint import load_model
from models.config import Qwen3Config, get_config, with_rope_scaling
from models.hf import load_pretrained
from models.qwen3 import create_model


def recipe_rope(cfg: TrainConfig, model_cfg: Qwen3Config) -> Qwen3Config:
    """`model_cfg` with the recipe's `model.rope_scaling` (kind none: as it is); scaling that
    conflicts with the checkpoint's own is a one-line UserError."""
    rope = cfg.model.rope_scaling
    try:
        return with_rope_scaling(model_cfg, rope.kind, rope.factor, rope.original_max_positions)
    except ValueError as err:
        raise UserError(f"model.rope_scaling: {err}") from None


def build_model(cfg: TrainConfig, vocab_size: int | None = None) -> nnx.Module:
    """Random init from a preset (vocab resized to the tokenizer), or `hf:DIR` / `ckpt:DIR` weights;
    with `model.lora`, the base in the compute dtype plus adapters (b2tjax/run/adapters.py)."""

    runtime, init, mesh = cfg.model.runtime(), base_init(cfg.model), build_mesh(cfg.mesh)
    # hf: and ckpt: weights load the same way: the recipe's runtime, mesh and RoPE
    loader_args = dict(runtime=runtime, mesh=mesh, edit_config=lambda c: recipe_rope(cfg, c))
    if init.startswith("hf:"):
        model = load_pretrained(init[3:], **loader_args)
    elif init.startswith("ckpt:"):
        if is_lora_run(init[5:]):
            raise UserError(
                f"model.init={init} is a LoRA run: continue it with --resume, or export its adapters "
                "(launch/export_hf.py --adapter) and pass hf:ADAPTER_DIR"
            )
        model = load_model(init[5:], **loader_args)
    elif init:
        raise ValueError(f"model.init must be '', 'hf:DIR' or 'ckpt:DIR', got {init!r}")
    else:
        overrides = dict(cfg.model.overrides)
        if vocab_size is not None and "vocab_size" not in overrides:
            overrides["vocab_size"] = vocab_size

        model = create_model(
            recipe_rope(cfg, get_config(cfg.model.preset, **overrides)),
            mesh,
            seed=cfg.seed,
            runtime=runtime,
        )
    return with_adapters(model, cfg, mesh)
