"""LoRA adapters <-> a Hugging Face PEFT adapter directory (adapter_config.json +
adapter_model.safetensors), the format `peft.PeftModel.from_pretrained(base, DIR)` loads.

PEFT stores, per adapted nn.Linear, lora_A.weight [r, in] and lora_B.weight [out, r] and adds
(lora_alpha / r) * B A x. Ours are stacked [L, *in, r] and [L, r, *out] with the input and output
dims laid out as the base weight (models/hf.py), flattened in the same order as HF's Linear.

Qwen3-MoE: the experts' adapters ([L, E, in, r], [L, E, r, out]) are written one module per expert,
`model.layers.{i}.mlp.experts.{e}.gate_proj`, as transformers 4 names its expert Linears and the
PEFT adapters trained on it are stored; PEFT (0.22 tested) converts them on load for transformers 5,
whose experts are fused 3-D parameters (gate_up_proj at rank 2r, down_proj).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from models import lora
from models.config import Qwen3Config
from models.hf_check import TensorFormatError, check_tensors, header, linear_shapes, open_safetensors
from models.settings import MLP_TARGETS

CONFIG_FILE = "adapter_config.json"
WEIGHTS_FILE = "adapter_model.safetensors"


def hf_module(target: str) -> str:
    """The HF module path of `target` under model.layers.{i} (an expert's under mlp.experts.{e})."""
    return f"self_attn.{target}" if target in lora.ATTENTION_TARGETS else f"mlp.{target}"


def stack_paths(cfg: Qwen3Config, target: str) -> dict[str, list[list[str]]]:
    """Per layer stack of a model of `cfg` (models/stacks.py), per stacked layer, the HF module paths
    `target` adapts there: one per expert for a MoE layer's MLP targets, else one."""
    layers = range(cfg.num_hidden_layers)
    if cfg.moe is None:
        return {"layers": [[f"model.layers.{i}.{hf_module(target)}"] for i in layers]}
    sparse = cfg.moe.sparse_layers(cfg.num_hidden_layers)
    experts = range(cfg.moe.num_experts) if target in MLP_TARGETS else ()
    out = {
        "layers": [
            [f"model.layers.{i}.mlp.experts.{e}.{target}" for e in experts]
            or [f"model.layers.{i}.{hf_module(target)}"]
            for i in layers
            if sparse[i]
        ]
    }
    dense = [[f"model.layers.{i}.{hf_module(target)}"] for i in layers if not sparse[i]]
    return out | ({"dense_layers": dense} if dense else {})


def module_shape(cfg: Qwen3Config, path: str) -> tuple[int, int]:
    """HF (out, in) of the Linear at `path` (an expert's MLP has `moe_intermediate_size`)."""
    target = path.rsplit(".", 1)[1]
    out, into = linear_shapes(cfg)[target]
    if ".experts." not in path:
        return out, into
    i = cfg.moe.moe_intermediate_size
    return (out, i) if target == "down_proj" else (i, into)


def tensor_name(path: str, which: str) -> str:
    return f"base_model.model.{path}.lora_{which}.weight"


def is_adapter_dir(path: str | os.PathLike) -> bool:
    return os.path.exists(os.path.join(os.fspath(path), CONFIG_FILE))


def read_config(path: str | os.PathLike) -> dict[str, Any]:
    """adapter_config.json of a PEFT directory, checked to be a plain LoRA we can load."""
    file = os.path.join(os.fspath(path), CONFIG_FILE)
    try:
        with open(file, encoding="utf-8") as f:
            cfg = json.load(f)
    except ValueError as err:  # not JSON, not UTF-8
        raise TensorFormatError(f"{file} is not valid JSON ({str(err).splitlines()[0][:120]})") from None
    if not isinstance(cfg, dict):
        raise TensorFormatError(f"{file}: expected a JSON object")
    if cfg.get("peft_type") != "LORA" or cfg.get("use_dora") or cfg.get("use_rslora"):
        raise TensorFormatError(
            f"{path}: only plain LoRA adapters load (no DoRA / rsLoRA / other PEFT types)"
        )
    if cfg.get("rank_pattern") or cfg.get("alpha_pattern") or cfg.get("layers_to_transform"):
        raise TensorFormatError(f"{path}: per-layer rank/alpha patterns and layer subsets are not supported")
    r, alpha = cfg.get("r"), cfg.get("lora_alpha")
    if type(r) is not int or r < 1:  # bool is an int, 1e9 a float
        raise TensorFormatError(f"{file}: r must be a positive integer, got {r!r}")
    if type(alpha) not in (int, float) or not math.isfinite(alpha):
        raise TensorFormatError(f"{file}: lora_alpha must be a number, got {alpha!r}")
    return cfg


def peft_targets(raw: Any, cfg: Qwen3Config, where: str) -> list[str]:
    """PEFT's `target_modules` as our target names. As PEFT reads it: "all-linear" is every linear
    layer but the output head; another string is a regex each module path must match whole; a list
    entry matches a module whose path is the entry or ends with "." + entry."""
    paths = {
        t: [p for rows in stack_paths(cfg, t).values() for row in rows for p in row] for t in lora.TARGETS
    }
    if raw == "all-linear":
        return list(lora.TARGETS)
    if isinstance(raw, str):
        try:
            pattern = re.compile(raw)
        except re.error as err:
            raise TensorFormatError(f"{where}: target_modules {raw!r} is not a regex ({err})") from None
        hits = {t: [bool(pattern.fullmatch(p)) for p in ps] for t, ps in paths.items()}
        if any(any(h) and not all(h) for h in hits.values()):
            raise TensorFormatError(
                f"{where}: target_modules {raw!r} adapts only some layers (not supported)"
            )
        targets = [t for t, h in hits.items() if all(h)]
    elif isinstance(raw, list) and raw and all(isinstance(e, str) for e in raw):
        matches = {
            e: [t for t in lora.TARGETS if paths[t][0] == e or paths[t][0].endswith("." + e)] for e in raw
        }
        unknown = [e for e, ts in matches.items() if not ts]
        if unknown:
            raise TensorFormatError(
                f"{where}: target_modules {unknown} are not layer projections this loader adapts "
                f"({list(lora.TARGETS)})"
            )
        targets = [t for t in lora.TARGETS if any(t in ts for ts in matches.values())]
    else:
        raise TensorFormatError(f"{where}: target_modules must be a list of names or a string, got {raw!r}")
    if not targets:
        raise TensorFormatError(f"{where}: target_modules {raw!r} matches none of {list(lora.TARGETS)}")
    return targets


def lora_config_of(peft_cfg: dict[str, Any], cfg: Qwen3Config, where: str = CONFIG_FILE) -> lora.LoraConfig:
    """Our `model.lora` equivalent of a (read_config-checked) PEFT adapter config."""
    targets = peft_targets(peft_cfg.get("target_modules"), cfg, where)
    return lora.LoraConfig(rank=peft_cfg["r"], alpha=float(peft_cfg["lora_alpha"]), targets=targets)


def check_adapter(path: str | os.PathLike, base: Qwen3Config) -> lora.LoraConfig:
    """The adapter's LoraConfig, once its config and every tensor's shape and dtype (from the
    safetensors header, no data) agree with each other and with the base: one line naming the
    first tensor that does not, before anything is allocated."""
    path = os.fspath(path)
    cfg = lora_config_of(read_config(path), base, os.path.join(path, CONFIG_FILE))
    expected = {}
    for target in cfg.targets:
        for rows in stack_paths(base, target).values():
            for module in (p for row in rows for p in row):
                out, into = module_shape(base, module)
                expected[tensor_name(module, "A")] = (cfg.rank, into)
                expected[tensor_name(module, "B")] = (out, cfg.rank)
    weights = os.path.join(path, WEIGHTS_FILE)
    with open_safetensors(weights) as f:
        names = set(f.keys())
        missing = sorted(set(expected) - names)
        if missing:
            raise TensorFormatError(f"{weights}: adapter has no tensor {missing[0]} ({len(missing)} missing)")
        extra = sorted(names - set(expected))
        if extra:
            raise TensorFormatError(
                f"{weights}: tensor {extra[0]} is not one of the adapter config's targets"
            )
        check_tensors(header(f, expected), expected, f"{weights} (r={cfg.rank})")
    return cfg


def adapter_tensors(model: nnx.Module) -> Iterator[tuple[str, np.ndarray]]:
    """(PEFT tensor name, fp32 numpy tensor) of every adapter of `model`, layer by layer (expert by
    expert)."""
    for target in lora.adapter_config(model)["targets"]:
        paths = stack_paths(model.config, target)
        for stack, module in lora.modules_of(model, target):
            a = np.asarray(jax.device_get(getattr(module, f"{target}_lora_a")[...]), np.float32)
            b = np.asarray(jax.device_get(getattr(module, f"{target}_lora_b")[...]), np.float32)
            rank = a.shape[-1]
            for i, row in enumerate(paths[stack]):  # one module per expert: a[i] [E, in, r]
                a_i, b_i = a[i].reshape(len(row), -1, rank), b[i].reshape(len(row), rank, -1)
                for e, path in enumerate(row):
                    yield tensor_name(path, "A"), np.ascontiguousarray(a_i[e].T)
                    yield tensor_name(path, "B"), np.ascontiguousarray(b_i[e].T)


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
    saved = check_adapter(path, model.config)
    if (saved.rank, sorted(saved.targets)) != (info["rank"], sorted(info["targets"])):
        raise TensorFormatError(
            f"{path}: adapter rank {saved.rank}, targets {saved.targets}; the model's adapters have "
            f"rank {info['rank']}, targets {info['targets']}"
        )
    with safe_open(os.path.join(path, WEIGHTS_FILE), framework="np") as f:
        for target in info["targets"]:
            paths = stack_paths(model.config, target)
            for stack, module in lora.modules_of(model, target):
                for which, var_name in (("A", f"{target}_lora_a"), ("B", f"{target}_lora_b")):
                    var = getattr(module, var_name)
                    # per layer, per expert (or the one module): [in, r] or [r, out]; checked above
                    tensors = [[f.get_tensor(tensor_name(p, which)).T for p in row] for row in paths[stack]]
                    value = jnp.asarray(np.asarray(tensors, np.float32).reshape(var.shape), var.dtype)
                    sharding = getattr(var[...], "sharding", None)
                    setattr(
                        module,
                        var_name,
                        var.replace(value if sharding is None else jax.device_put(value, sharding)),
                    )
    return model
