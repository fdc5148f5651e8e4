"""The HF Qwen3 / Qwen3-MoE state-dict names and layouts <-> our stacked NNX params: one table.

A leaf of ours is one HF tensor, a stack of one tensor per layer (`{i}` in its name), or for the
routed experts a stack per layer and expert (`{i}` and `{e}`): HF keeps one tensor per expert,
we stack them for the grouped matmul and the layer scan, and unstack them on export.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from models.config import Qwen3Config

Path = tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class TensorMap:
    """One parameter leaf: its path in our pure dict, its HF name (with `{i}` for the layer index
    when stacked, `{e}` for the expert), the layout conversions of one HF tensor, the model layers
    its stack holds (None: all) and its number of experts (0: not per expert)."""

    path: Path
    hf_name: str
    to_ours: Callable[[np.ndarray], np.ndarray]
    to_hf: Callable[[np.ndarray], np.ndarray]
    layers: tuple[int, ...] | None = None
    experts: int = 0

    @property
    def stacked(self) -> bool:
        return "{i}" in self.hf_name

    def keys(self, num_layers: int) -> list[tuple[tuple[int, ...], str]]:
        """(index into our leaf, HF name) of each HF tensor of this leaf, in export order."""
        if not self.stacked:
            return [((), self.hf_name)]
        layers = range(num_layers) if self.layers is None else self.layers
        if not self.experts:
            return [((j,), self.hf_name.format(i=i)) for j, i in enumerate(layers)]
        return [
            ((j, e), self.hf_name.format(i=i, e=e)) for j, i in enumerate(layers) for e in range(self.experts)
        ]


def _same(w: np.ndarray) -> np.ndarray:
    return w


def _transpose(w: np.ndarray) -> np.ndarray:
    return w.T


def _attention_maps(cfg: Qwen3Config, stack: str, layers: tuple[int, ...] | None) -> list[TensorMap]:
    """Norms and attention of the layers of `stack` (HF [n*D, H] <-> ours [H, n, D])."""
    h, nh, kvh, d = cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim

    def proj_in(n: int) -> dict:
        return dict(to_ours=lambda w: w.T.reshape(h, n, d), to_hf=lambda k: k.reshape(h, n * d).T)

    lp = "model.layers.{i}."
    at = lambda *p: (stack, *p)  # noqa: E731
    return [
        TensorMap(at("input_norm", "scale"), lp + "input_layernorm.weight", _same, _same, layers),
        TensorMap(at("attn", "q_proj"), lp + "self_attn.q_proj.weight", **proj_in(nh), layers=layers),
        TensorMap(at("attn", "k_proj"), lp + "self_attn.k_proj.weight", **proj_in(kvh), layers=layers),
        TensorMap(at("attn", "v_proj"), lp + "self_attn.v_proj.weight", **proj_in(kvh), layers=layers),
        # HF [H, NH*D] <-> ours [NH, D, H]
        TensorMap(
            at("attn", "o_proj"),
            lp + "self_attn.o_proj.weight",
            to_ours=lambda w: w.T.reshape(nh, d, h),
            to_hf=lambda k: k.reshape(nh * d, h).T,
            layers=layers,
        ),
        TensorMap(at("attn", "q_norm", "scale"), lp + "self_attn.q_norm.weight", _same, _same, layers),
        TensorMap(at("attn", "k_norm", "scale"), lp + "self_attn.k_norm.weight", _same, _same, layers),
        TensorMap(
            at("post_attn_norm", "scale"), lp + "post_attention_layernorm.weight", _same, _same, layers
        ),
    ]


def _mlp_maps(cfg: Qwen3Config, stack: str, layers: tuple[int, ...] | None, sparse: bool) -> list[TensorMap]:
    """The dense MLP's three [H, I] / [I, H] kernels, or the router [H, E] and the experts' stacks."""
    lp = "model.layers.{i}.mlp."
    if not sparse:
        names = ("gate_proj", "up_proj", "down_proj")
        return [
            TensorMap((stack, "mlp", n), f"{lp}{n}.weight", _transpose, _transpose, layers) for n in names
        ]
    e = cfg.moe.num_experts
    experts = [
        TensorMap((stack, "mlp", n), f"{lp}experts.{{e}}.{n}.weight", _transpose, _transpose, layers, e)
        for n in ("gate_proj", "up_proj", "down_proj")
    ]
    return [TensorMap((stack, "mlp", "router"), lp + "gate.weight", _transpose, _transpose, layers), *experts]


def _bias_maps(cfg: Qwen3Config, stack: str, layers: tuple[int, ...] | None) -> list[TensorMap]:
    """Attention biases (HF [n*D] <-> ours [n, D])."""
    nh, kvh, d = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim

    def bias(n: int) -> dict:
        return dict(to_ours=lambda b: b.reshape(n, d), to_hf=lambda b: b.reshape(n * d), layers=layers)

    lp = "model.layers.{i}.self_attn."
    return [
        TensorMap((stack, "attn", "q_bias"), lp + "q_proj.bias", **bias(nh)),
        TensorMap((stack, "attn", "k_bias"), lp + "k_proj.bias", **bias(kvh)),
        TensorMap((stack, "attn", "v_bias"), lp + "v_proj.bias", **bias(kvh)),
        TensorMap((stack, "attn", "o_bias"), lp + "o_proj.bias", _same, _same, layers),
    ]


def layer_stacks(cfg: Qwen3Config) -> list[tuple[str, tuple[int, ...] | None, bool]]:
    """(our stack, the model layers it holds (None: all), whether they route to experts)."""
    if cfg.moe is None:
        return [("layers", None, False)]
    sparse = cfg.moe.sparse_layers(cfg.num_hidden_layers)
    dense = tuple(i for i, s in enumerate(sparse) if not s)
    stacks = [("layers", tuple(i for i, s in enumerate(sparse) if s), True)]
    return stacks + ([("dense_layers", dense, False)] if dense else [])


def tensor_maps(cfg: Qwen3Config) -> list[TensorMap]:
    """The complete HF <-> ours table for `cfg` (exactly the tensors transformers expects)."""
    maps = [TensorMap(("embed", "embedding"), "model.embed_tokens.weight", _same, _same)]
    for stack, layers, sparse in layer_stacks(cfg):
        maps += _attention_maps(cfg, stack, layers) + _mlp_maps(cfg, stack, layers, sparse)
    maps.append(TensorMap(("norm", "scale"), "model.norm.weight", _same, _same))
    if cfg.attention_bias:
        maps += [m for stack, layers, _ in layer_stacks(cfg) for m in _bias_maps(cfg, stack, layers)]
    if not cfg.tie_word_embeddings:
        maps.append(TensorMap(("lm_head", "kernel"), "lm_head.weight", _transpose, _transpose))
    return maps


def hf_names(cfg: Qwen3Config) -> list[str]:
    """Every HF tensor name of `cfg`, in export order."""
    return [name for m in tensor_maps(cfg) for _, name in m.keys(cfg.num_hidden_layers)]


def get_path(tree: dict, path: Path) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def set_path(tree: dict, path: Path, value: Any) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value
