"""LoRA adapters <-> a Hugging Face PEFT adapter directory (adapter_config.json +
adapter_model.safetensors), the format `peft.PeftModel.from_pretrained(base, DIR)` loads.

PEFT stores, per adapted nn.Linear, lora_A.weight [r, in] and lora_B.weight [out, r] and adds
(lora_alpha / r) * B A x. Ours are stacked [L, *in, r] and [L, r, *out] with the input and output
dims laid out as the base weight (models/hf.py), flattened in the same order as HF's Linear.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from models import lora

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"


def hf_module(target: str) -> str:
    """The HF module path of `target` under model.layers.{i}."""
    return f"self_attn.{target}" if target in lora.ATTENTION_TARGETS else f"mlp.{target}"


def tensor_name(layer: int, target: str, which: str) -> str:
    return f"base_model.model.model.layers.{layer}.{hf_module(target)}.lora_{which}.weight"


def is_adapter_dir(path: str | os.PathLike) -> bool:
    return os.path.exists(os.path.join(os.fspath(path), CONFIG_FILE))


def read_config(path: str | os.PathLike) -> dict[str, Any]:
    """adapter_config.json of a PEFT directory, checked to be a plain LoRA we can load."""
    with open(os.path.join(os.fspath(path), CONFIG_FILE)) as f:
        cfg = json.load(f)
    if cfg.get("peft_type") != "LORA" or cfg.get("use_dora") or cfg.get("use_rslora"):
        raise ValueError(f"{path}: only plain LoRA adapters load (no DoRA / rsLoRA / other PEFT types)")
    if cfg.get("rank_pattern") or cfg.get("alpha_pattern") or cfg.get("layers_to_transform"):
        raise ValueError(f"{path}: per-layer rank/alpha patterns and layer subsets are not supported")
    return cfg


def lora_config_of(peft_cfg: dict[str, Any]) -> lora.LoraConfig:
    """Our `model.lora` equivalent of a PEFT adapter config."""
    targets = peft_cfg["target_modules"]
    targets = [t for t in lora.TARGETS if t in targets] if isinstance(targets, list) else targets
    return lora.LoraConfig(rank=int(peft_cfg["r"]), alpha=float(peft_cfg["lora_alpha"]), targets=targets)


def adapter_tensors(model: nnx.Module) -> Iterator[tuple[str, np.ndarray]]:
    """(PEFT tensor name, fp32 numpy tensor) of every adapter of `model`, layer by layer."""
    for target in lora.adapter_config(model)["targets"]:
        module = lora.module_of(model, target)
        a = np.asarray(jax.device_get(getattr(module, f"{target}_lora_a")[...]), np.float32)
        b = np.asarray(jax.device_get(getattr(module, f"{target}_lora_b")[...]), np.float32)
        rank = a.shape[-1]
        for i in range(a.shape[0]):
            yield tensor_name(i, target, "A"), np.ascontiguousarray(a[i].reshape(-1, rank).T)
            yield tensor_name(i, target, "B"), np.ascontiguousarray(b[i].reshape(rank, -1).T)


def save_adapter(model: nnx.Module, out_dir: str | os.PathLike, base_path: str) -> None:
    """Write `model`'s adapters as a PEFT LoRA directory whose base is `base_path`."""
    from safetensors.numpy import save_file

    info = lora.adapter_config(model)
    if not info:
        raise ValueError("the model has no LoRA adapters to export")
    out_dir = os.fspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    save_file(dict(adapter_tensors(model)), os.path.join(out_dir, WEIGHTS_FILE), metadata={"format": "pt"})
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base_path,
        "r": info["rank"],
        "lora_alpha": info["alpha"],
        "target_modules": info["targets"],
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "use_dora": False,
        "init_lora_weights": True,
        "inference_mode": True,
        "modules_to_save": None,
    }
    with open(os.path.join(out_dir, CONFIG_FILE), "w") as f:
        json.dump(config, f, indent=2)


def load_adapter(model: nnx.Module, path: str | os.PathLike) -> nnx.Module:
    """Set the adapters of `model` (attached with the directory's rank and targets) from a PEFT
    directory, in place, keeping each adapter's dtype and sharding."""
    from safetensors import safe_open

    path = os.fspath(path)
    info = lora.adapter_config(model)
    with safe_open(os.path.join(path, WEIGHTS_FILE), framework="np") as f:
        names = set(f.keys())
        for target in info["targets"]:
            module = lora.module_of(model, target)
            for which, var_name in (("A", f"{target}_lora_a"), ("B", f"{target}_lora_b")):
                var = getattr(module, var_name)
                layers = []
                for i in range(var.shape[0]):
                    name = tensor_name(i, target, which)
                    if name not in names:
                        raise ValueError(f"{path}: adapter has no tensor {name}")
                    t = f.get_tensor(name).astype(np.float32).T  # [in, r] or [r, out]
                    layers.append(t.reshape(var.shape[1:]))
                value = jnp.asarray(np.stack(layers), var.dtype)
                sharding = getattr(var[...], "sharding", None)
                setattr(
                    module,
                    var_name,
                    var.replace(value if sharding is None else jax.device_put(value, sharding)),
                )
    return model
