"""Hugging Face and PEFT tensors checked against their config before anything is allocated.

A config.json whose `vocab_size` is 2^34 over a 1,024-row embedding once imported as a
"1099511.7M params" model, and a tensor of the right size but another shape (or an integer dtype)
loaded silently through `reshape`/`astype`. Every tensor's shape and dtype are read from the
safetensors header (no data) and compared with what the config implies, and the first that differs
is one line naming the tensor, its shape and the expected one. A file whose header does not parse
(a header length of 2^63, not a safetensors file) is one line too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from models.config import Qwen3Config

# safetensors dtype names our loaders convert exactly (floating point weights)
FLOAT_DTYPES = ("F16", "BF16", "F32", "F64")


class TensorFormatError(OSError, ValueError):
    """A weights or adapter file disagrees with its config; one line (an OSError, so the launch
    scripts report it like an unreadable file; a ValueError for callers that catch bad inputs)."""


def open_safetensors(path: str) -> Any:
    """`safe_open(path)` (numpy), with a file that is not safetensors as a TensorFormatError."""
    from safetensors import SafetensorError, safe_open

    try:
        return safe_open(path, framework="np")
    except SafetensorError as err:
        raise TensorFormatError(f"{path} is not a readable safetensors file ({err})") from None


def header(handle: Any, names: Iterable[str]) -> dict[str, tuple[tuple[int, ...], str]]:
    """name -> (shape, safetensors dtype) of `names` in an open file, read from its header."""
    from safetensors import SafetensorError

    out = {}
    for name in names:
        try:
            piece = handle.get_slice(name)
        except SafetensorError:  # an index naming a file that does not hold the tensor
            raise TensorFormatError(f"tensor {name} is not in the file its index names") from None
        out[name] = (tuple(piece.get_shape()), piece.get_dtype())
    return out


def linear_shapes(cfg: Qwen3Config) -> dict[str, tuple[int, int]]:
    """HF (out, in) of each adaptable nn.Linear of a layer, by target name."""
    h, i = cfg.hidden_size, cfg.intermediate_size
    q, kv = cfg.num_attention_heads * cfg.head_dim, cfg.num_key_value_heads * cfg.head_dim
    return {
        "q_proj": (q, h),
        "k_proj": (kv, h),
        "v_proj": (kv, h),
        "o_proj": (h, q),
        "gate_proj": (i, h),
        "up_proj": (i, h),
        "down_proj": (h, i),
    }


def hf_shapes(cfg: Qwen3Config) -> dict[str, tuple[int, ...]]:
    """The HF shape of every tensor a Qwen3 checkpoint of `cfg` holds."""
    linear = linear_shapes(cfg)
    q, kv = linear["q_proj"][0], linear["k_proj"][0]
    per_layer: dict[str, tuple[int, ...]] = {
        "input_layernorm.weight": (cfg.hidden_size,),
        "post_attention_layernorm.weight": (cfg.hidden_size,),
        "self_attn.q_norm.weight": (cfg.head_dim,),
        "self_attn.k_norm.weight": (cfg.head_dim,),
    }
    for target, shape in linear.items():
        module = "self_attn" if target in ("q_proj", "k_proj", "v_proj", "o_proj") else "mlp"
        per_layer[f"{module}.{target}.weight"] = shape
    if cfg.attention_bias:
        per_layer.update(
            {
                "self_attn.q_proj.bias": (q,),
                "self_attn.k_proj.bias": (kv,),
                "self_attn.v_proj.bias": (kv,),
                "self_attn.o_proj.bias": (cfg.hidden_size,),
            }
        )
    shapes = {
        "model.embed_tokens.weight": (cfg.vocab_size, cfg.hidden_size),
        "model.norm.weight": (cfg.hidden_size,),
    }
    if not cfg.tie_word_embeddings:
        shapes["lm_head.weight"] = (cfg.vocab_size, cfg.hidden_size)
    dense_mlp = {k: per_layer.pop(k) for k in list(per_layer) if k.startswith("mlp.")}
    sparse = cfg.moe.sparse_layers(cfg.num_hidden_layers) if cfg.moe else (False,) * cfg.num_hidden_layers
    for layer in range(cfg.num_hidden_layers):
        mlp = _expert_shapes(cfg) if sparse[layer] else dense_mlp
        shapes.update({f"model.layers.{layer}.{k}": v for k, v in {**per_layer, **mlp}.items()})
    return shapes


def _expert_shapes(cfg: Qwen3Config) -> dict[str, tuple[int, ...]]:
    """A Qwen3-MoE sparse layer's router and per-expert SwiGLU tensors (HF names under the layer)."""
    h, i, e = cfg.hidden_size, cfg.moe.moe_intermediate_size, cfg.moe.num_experts
    shapes: dict[str, tuple[int, ...]] = {"mlp.gate.weight": (e, h)}
    for j in range(e):
        shapes |= {f"mlp.experts.{j}.{n}.weight": (i, h) for n in ("gate_proj", "up_proj")}
        shapes[f"mlp.experts.{j}.down_proj.weight"] = (h, i)
    return shapes


def check_tensors(
    found: Mapping[str, tuple[tuple[int, ...], str]], expected: Mapping[str, tuple[int, ...]], where: str
) -> None:
    """Every expected tensor in `found` with its expected shape and a floating dtype."""
    for name, shape in expected.items():
        if name not in found:
            continue  # the caller reports missing tensors (all of them at once)
        got, dtype = found[name]
        if got != shape:
            raise TensorFormatError(
                f"{where}: tensor {name} has shape {list(got)}, its config implies {list(shape)}"
            )
        if dtype not in FLOAT_DTYPES:
            raise TensorFormatError(
                f"{where}: tensor {name} has dtype {dtype}, expected one of {list(FLOAT_DTYPES)}"
            )


def check_array(name: str, value: Any, expected: Mapping[str, tuple[int, ...]], where: str) -> None:
    """A fetched tensor's shape (an in-memory state dict has no header to check first)."""
    shape = tuple(getattr(value, "shape", ()))
    if name in expected and shape != expected[name]:
        raise TensorFormatError(
            f"{where}: tensor {name} has shape {list(shape)}, its config implies {list(expected[name])}"
        )
