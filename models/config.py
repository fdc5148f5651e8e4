"""Qwen3 model configuration: Hugging Face `config.json` <-> frozen dataclass, plus named presets."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from models.fields import NonNegFloat, NonNegInt, PosFloat, PosInt, check_fields, coerce, read_fields
from models.moe_config import MOE_MODEL_TYPE, MoeConfig
from models.rope_scaling import RopeScaling

# Qwen3 special-token ids (Qwen3 tokenizer_config.json): <|endoftext|> and <|im_end|>.
QWEN3_BOS_ID = 151643
QWEN3_EOS_ID = 151645


_REQUIRED = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")


class ConfigFileError(OSError, ValueError):
    """A config.json that is not a Qwen3 config. An OSError so that launch scripts report it in one
    line like an unreadable file; a ValueError for callers that catch bad configs."""


@dataclasses.dataclass(frozen=True)
class Qwen3Config:
    """Every field of a Qwen3 `config.json` that changes the math or the parameter shapes."""

    vocab_size: PosInt
    hidden_size: PosInt
    intermediate_size: PosInt
    num_hidden_layers: PosInt
    num_attention_heads: PosInt
    num_key_value_heads: PosInt
    head_dim: PosInt
    rope_theta: PosFloat = 1_000_000.0
    rms_norm_eps: PosFloat = 1e-6
    tie_word_embeddings: bool = False
    max_position_embeddings: PosInt = 40960
    attention_bias: bool = False
    initializer_range: NonNegFloat = 0.02
    bos_token_id: NonNegInt | None = QWEN3_BOS_ID
    eos_token_id: NonNegInt | None = QWEN3_EOS_ID
    # Every layer attends to the last `sliding_window` tokens only (itself included), as HF Qwen3 with
    # use_sliding_window and max_window_layers=0; None is full causal attention (the Qwen3 releases).
    sliding_window: PosInt | None = None
    # RoPE scaling (models/rope.py): linear or YaRN frequencies for contexts beyond the pretrained
    # window; HF `rope_scaling` (transformers 4.x) / `rope_parameters` (5.x).
    rope_scaling: RopeScaling = RopeScaling()
    # Qwen3-MoE (HF model_type "qwen3_moe"): routed experts in its sparse layers; None: dense Qwen3.
    moe: MoeConfig | None = None

    def __post_init__(self) -> None:
        check_fields(self)  # every number finite and in its declared range, as a file's is read
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads}) for grouped-query attention"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")

    @property
    def num_groups(self) -> int:
        """Query heads per KV head."""
        return self.num_attention_heads // self.num_key_value_heads

    @classmethod
    def from_hf(cls, source: dict[str, Any] | str | os.PathLike) -> Qwen3Config:
        """Build from a HF config dict, a `config.json` path, or a directory holding one. A file
        that is not a Qwen3 config (not JSON, not an object, fields missing) is a one-line
        ConfigFileError naming it."""
        if isinstance(source, dict):
            return cls._from_hf_dict(source)
        path = os.fspath(source)
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        if not os.path.exists(path):
            raise FileNotFoundError(f"no Qwen3 config.json at {path}")
        try:
            with open(path, encoding="utf-8") as f:
                hf = json.load(f)
            if not isinstance(hf, dict):
                raise ValueError(f"expected a JSON object, got {type(hf).__name__}")
            return cls._from_hf_dict(hf)
        except json.JSONDecodeError as err:
            raise ConfigFileError(f"{path} is not valid JSON ({err.msg} at line {err.lineno})") from None
        except (ValueError, TypeError) as err:  # UnicodeDecodeError is a ValueError
            raise ConfigFileError(f"{path}: {str(err).splitlines()[0][:200]}") from None

    @classmethod
    def _from_hf_dict(cls, hf: dict[str, Any]) -> Qwen3Config:
        """Every number converted and checked by its field's annotation (models.fields: finite,
        an integer where one is meant, in range), so NaN, Infinity or 2.5 layers is one line."""
        model_type = hf.get("model_type", "qwen3")
        if model_type not in ("qwen3", MOE_MODEL_TYPE):
            raise ValueError(
                f"expected a Qwen3 config (model_type 'qwen3' or {MOE_MODEL_TYPE!r}), "
                f"got model_type={model_type!r}"
            )
        missing = [k for k in _REQUIRED if k not in hf]
        if missing:
            raise ValueError(f"Qwen3 config is missing required fields: {missing}")
        raw = {k: v for k, v in hf.items() if k not in ("rope_scaling", "sliding_window", "head_dim")}
        # transformers >= 5 stores rope_theta under rope_parameters; older files keep it top-level.
        raw["rope_theta"] = (hf.get("rope_parameters") or {}).get("rope_theta", hf.get("rope_theta", 1e6))
        if isinstance(raw.get("eos_token_id"), list):
            raw["eos_token_id"] = raw["eos_token_id"][0] if raw["eos_token_id"] else None
        values = read_fields(cls, raw)
        values.setdefault("num_key_value_heads", values["num_attention_heads"])
        heads = values["num_attention_heads"]
        head_dim = hf.get("head_dim") or (values["hidden_size"] // heads if heads > 0 else 0)
        return cls(
            **values,
            head_dim=coerce(head_dim, int, "head_dim"),
            sliding_window=_sliding_window(hf),
            rope_scaling=RopeScaling.from_hf(hf),
            moe=MoeConfig.from_hf(hf) if model_type == MOE_MODEL_TYPE else None,
        )

    def to_hf(self, dtype: str = "float32") -> dict[str, Any]:
        """A `config.json` dict that `transformers.Qwen3Config` (4.51+ and 5.x) accepts: the RoPE
        settings both as 4.x's `rope_theta` + `rope_scaling` and as 5.x's `rope_parameters`."""
        scaling = self.rope_scaling.to_hf()
        moe = {} if self.moe is None else {**self.moe.to_hf(), "model_type": MOE_MODEL_TYPE}
        return {
            "architectures": ["Qwen3ForCausalLM" if self.moe is None else "Qwen3MoeForCausalLM"],
            "model_type": "qwen3",
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "hidden_act": "silu",
            "rope_theta": self.rope_theta,
            "rope_parameters": {**(scaling or {"rope_type": "default"}), "rope_theta": self.rope_theta},
            "rope_scaling": scaling,
            "rms_norm_eps": self.rms_norm_eps,
            "tie_word_embeddings": self.tie_word_embeddings,
            "max_position_embeddings": self.max_position_embeddings,
            "attention_bias": self.attention_bias,
            "attention_dropout": 0.0,
            "initializer_range": self.initializer_range,
            "use_sliding_window": self.sliding_window is not None,
            "sliding_window": self.sliding_window,
            "max_window_layers": 0 if self.sliding_window is not None else self.num_hidden_layers,
            "use_cache": True,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "torch_dtype": dtype,
            "dtype": dtype,
            **moe,
        }

    def num_params(self) -> int:
        """Parameter count (embedding counted once when tied)."""
        h, i, d = self.hidden_size, self.intermediate_size, self.head_dim
        nh, kvh = self.num_attention_heads, self.num_key_value_heads
        attn = h * d * (nh + 2 * kvh) + nh * d * h + 2 * d
        if self.attention_bias:
            attn += d * (nh + 2 * kvh) + h
        dense = 3 * h * i
        layers = self.num_hidden_layers
        moe = self.moe
        sparse = 0 if moe is None else moe.num_experts * (3 * h * moe.moe_intermediate_size + h)
        kinds = self.moe.sparse_layers(layers) if self.moe else (False,) * layers
        mlps = sum(sparse if s else dense for s in kinds)
        head = 0 if self.tie_word_embeddings else h * self.vocab_size
        return self.vocab_size * h + layers * (attn + 2 * h) + mlps + h + head

    def num_expert_params(self) -> int:
        """The routed experts' share of `num_params` (gate, up and down of every sparse layer, not
        the routers): what the mesh's expert axis splits; 0 for dense Qwen3."""
        moe = self.moe
        if moe is None:
            return 0
        per_layer = moe.num_experts * 3 * self.hidden_size * moe.moe_intermediate_size
        return per_layer * sum(moe.sparse_layers(self.num_hidden_layers))


def _sliding_window(hf: dict[str, Any]) -> int | None:
    """The window of a HF config whose layers all slide, None when none does. HF slides layer i iff
    use_sliding_window and i >= max_window_layers (or as `layer_types` says); a mix is rejected."""
    layers = coerce(hf.get("num_hidden_layers", 0), int, "num_hidden_layers")
    window = hf.get("sliding_window") if hf.get("use_sliding_window") else None
    types = hf.get("layer_types")
    if types is None:
        first = coerce(hf.get("max_window_layers", layers), int, "max_window_layers")
        types = [
            "sliding_attention" if window is not None and i >= first else "full_attention"
            for i in range(layers)
        ]
    sliding = sum(t == "sliding_attention" for t in types)
    if sliding == 0:
        return None
    if sliding != len(types) or window is None:
        raise ValueError(
            f"sliding-window attention on {sliding} of {len(types)} layers is not supported; "
            "only all layers (max_window_layers=0) or none"
        )
    return coerce(window, int, "sliding_window")


def _qwen3(hidden: int, inter: int, layers: int, heads: int, tied: bool) -> Qwen3Config:
    return Qwen3Config(
        vocab_size=151936,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=8,
        head_dim=128,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=tied,
        max_position_embeddings=40960,
    )


def _qwen3_moe(hidden: int, inter: int, layers: int, heads: int, moe_inter: int) -> Qwen3Config:
    """A Qwen3-MoE release: 4 KV heads, 128 experts, top-8 renormalised, every layer sparse."""
    moe = MoeConfig(
        num_experts=128, num_experts_per_tok=8, moe_intermediate_size=moe_inter, norm_topk_prob=True
    )
    return dataclasses.replace(
        _qwen3(hidden, inter, layers, heads, tied=False), num_key_value_heads=4, moe=moe
    )


# Numbers from the official Qwen/Qwen3-* config.json files.
PRESETS: dict[str, Qwen3Config] = {
    "qwen3-0.6b": _qwen3(1024, 3072, 28, 16, tied=True),
    "qwen3-1.7b": _qwen3(2048, 6144, 28, 16, tied=True),
    "qwen3-4b": _qwen3(2560, 9728, 36, 32, tied=True),
    "qwen3-8b": _qwen3(4096, 12288, 36, 32, tied=False),
    "qwen3-14b": _qwen3(5120, 17408, 40, 40, tied=False),
    "qwen3-32b": _qwen3(5120, 25600, 64, 64, tied=False),
    "qwen3-30b-a3b": _qwen3_moe(2048, 6144, 48, 32, 768),
    "qwen3-235b-a22b": _qwen3_moe(4096, 12288, 94, 64, 1536),
    # Test sizes: 2 layers, hidden 64, GQA 4 query heads over 2 KV heads, rope_theta != 1e6.
    "tiny": Qwen3Config(
        vocab_size=1024,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        rope_theta=10_000.0,
        tie_word_embeddings=True,
        max_position_embeddings=4096,
        bos_token_id=None,
        eos_token_id=None,
    ),
    "tiny-untied": Qwen3Config(
        vocab_size=768,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        rope_theta=500_000.0,
        tie_word_embeddings=False,
        max_position_embeddings=4096,
        bos_token_id=None,
        eos_token_id=None,
    ),
}


# The Qwen3 releases are pretrained on 32,768 positions; their config.json says 40,960 (room for a
# long answer, Qwen's model cards), and Qwen documents YaRN with original_max_position_embeddings 32768.
QWEN3_CONFIG_POSITIONS, QWEN3_PRETRAINED_POSITIONS = 40960, 32768


def pretrained_window(cfg: Qwen3Config) -> int:
    """The positions `cfg` was pretrained on, which RoPE scaling stretches: a scaled config's own
    original window, 32,768 for a Qwen3 release, else max_position_embeddings."""
    if cfg.rope_scaling.original_max_position_embeddings:
        return int(cfg.rope_scaling.original_max_position_embeddings)
    if cfg.max_position_embeddings == QWEN3_CONFIG_POSITIONS:
        return QWEN3_PRETRAINED_POSITIONS
    return cfg.max_position_embeddings


def with_rope_scaling(cfg: Qwen3Config, kind: str, factor: float, original: int = 0) -> Qwen3Config:
    """`cfg` with `kind` ("none" | "linear" | "yarn") RoPE scaling over `original` positions (0 =
    pretrained_window), its max_position_embeddings factor x original. "none" and a config that
    already has this scaling are `cfg` as is; one with another scaling is a one-line ValueError."""
    if kind == "none":
        return cfg
    original = int(original) or pretrained_window(cfg)
    wanted = RopeScaling(kind, float(factor), original if kind == "yarn" else None)  # type: ignore[arg-type]
    have = cfg.rope_scaling
    if have.scaled:
        if (have.kind, have.factor, have.original_max_position_embeddings) == (
            wanted.kind,
            wanted.factor,
            wanted.original_max_position_embeddings,
        ):
            return cfg
        raise ValueError(
            f"RoPE scaling {kind} x{factor:g} over {original} conflicts with the model's own "
            f"{have.kind} x{have.factor:g} over {have.original_max_position_embeddings}"
        )
    return dataclasses.replace(cfg, rope_scaling=wanted, max_position_embeddings=round(factor * original))


def get_config(name: str, **overrides: Any) -> Qwen3Config:
    """A named preset (case-insensitive, 'Qwen/Qwen3-8B' style accepted), optionally with fields replaced."""
    key = name.lower().split("/")[-1]
    if key not in PRESETS:
        raise KeyError(f"unknown model preset {name!r}; known: {sorted(PRESETS)}")
    cfg = PRESETS[key]
    if not overrides:
        return cfg
    # a recipe's `model.overrides` are numbers from a user: converted and checked as a config.json's
    return dataclasses.replace(cfg, **{**overrides, **read_fields(Qwen3Config, overrides)})
