"""RoPE scaling as data: the typed form of a HF config's `rope_scaling` (transformers 4.x) /
`rope_parameters` (5.x), with its checks and the scalar parts of the math (YaRN's ramp range and
attention factor). No JAX: a training config that names a scaling loads without starting it; the
frequencies and the rotation are models/rope.py.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Any, Literal

from models.fields import PosFloat, PosInt, Range, check_fields, coerce, read_fields

RopeKind = Literal["default", "linear", "yarn"]
KINDS = ("default", "linear", "yarn")
# Keys of a HF rope dict we read; any other (e.g. longrope's factors) means a kind we do not have.
_YARN_KEYS = ("attention_factor", "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "truncate")


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """How RoPE frequencies are stretched beyond the pretrained window; kind "default" is plain RoPE.
    YaRN's optional fields default as transformers' do (None = not in the config file)."""

    kind: RopeKind = "default"
    factor: Annotated[float, Range(ge=1)] = 1.0
    original_max_position_embeddings: PosInt | None = None  # YaRN's pretrained window
    beta_fast: PosFloat = 32.0
    beta_slow: PosFloat = 1.0
    attention_factor: PosFloat | None = None  # None: from factor (and mscale / mscale_all_dim)
    mscale: float | None = None
    mscale_all_dim: float | None = None
    truncate: bool = True  # round the ramp's ends to whole dimensions

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"RoPE scaling kind must be one of {KINDS}, got {self.kind!r}")
        if self.kind == "default":
            defaults = {f.name: f.default for f in dataclasses.fields(self)}
            changed = {k: v for k, v in dataclasses.asdict(self).items() if v != defaults[k]}
            if changed:
                raise ValueError(f"RoPE kind 'default' takes no scaling parameters, got {changed}")
            return
        check_fields(self, f"RoPE {self.kind} scaling ")  # finite, in range (models.fields)
        if self.kind == "yarn":
            window = self.original_max_position_embeddings
            if window is None:
                raise ValueError(f"YaRN needs a positive original_max_position_embeddings, got {window}")
            if self.beta_fast < self.beta_slow:
                raise ValueError(f"YaRN beta_fast ({self.beta_fast}) must be >= beta_slow ({self.beta_slow})")

    @property
    def scaled(self) -> bool:
        return self.kind != "default"

    @property
    def attention_scale(self) -> float:
        """What cos and sin are multiplied by (1 except YaRN); transformers' `attention_scaling`."""
        if self.kind != "yarn":
            return 1.0
        if self.attention_factor is not None:
            return float(self.attention_factor)
        if self.mscale and self.mscale_all_dim:
            return _mscale(self.factor, self.mscale) / _mscale(self.factor, self.mscale_all_dim)
        return _mscale(self.factor)

    def ramp_range(self, head_dim: int, theta: float) -> tuple[float, float]:
        """The dimensions (in float64, as transformers) between which YaRN's ramp goes from 0 to 1:
        those that turn beta_fast and beta_slow times over the original window."""
        window = int(self.original_max_position_embeddings or 0)

        def dim_of(turns: float) -> float:
            return head_dim * math.log(window / (turns * 2 * math.pi)) / (2 * math.log(theta))

        low, high = dim_of(self.beta_fast), dim_of(self.beta_slow)
        if self.truncate:
            low, high = math.floor(low), math.ceil(high)
        return max(low, 0), min(high, head_dim - 1)

    def to_hf(self) -> dict[str, Any] | None:
        """The `rope_scaling` dict transformers 4.x reads (5.x adds rope_theta to it); None for plain RoPE."""
        if not self.scaled:
            return None
        out: dict[str, Any] = {"rope_type": self.kind, "factor": self.factor}
        if self.kind == "yarn":
            out["original_max_position_embeddings"] = self.original_max_position_embeddings
            defaults = RopeScaling(kind="yarn", factor=self.factor, original_max_position_embeddings=1)
            out.update((k, getattr(self, k)) for k in _YARN_KEYS if getattr(self, k) != getattr(defaults, k))
        return out

    @classmethod
    def from_hf(cls, hf: dict[str, Any]) -> RopeScaling:
        """From a HF config dict: `rope_scaling` wins over `rope_parameters`, as in transformers 5."""
        params = hf.get("rope_scaling") or hf.get("rope_parameters") or {}
        if not isinstance(params, dict):
            raise ValueError(f"rope_scaling / rope_parameters must be a JSON object, got {params!r}")
        kind = params.get("rope_type", params.get("type", "default"))
        if kind not in KINDS:
            why = " (its frequencies follow each call's length; a KV cache cannot)" * (kind == "dynamic")
            raise ValueError(f"RoPE scaling rope_type {kind!r} is not supported{why}; only {KINDS}")
        if coerce(params.get("partial_rotary_factor", 1.0), float, "partial_rotary_factor") != 1.0:
            raise ValueError(f"partial_rotary_factor is not supported, got {params['partial_rotary_factor']}")
        if kind == "default":
            return cls()
        if params.get("factor") is None:
            raise ValueError(f"RoPE {kind} scaling needs a factor, got {params}")
        where = "rope_scaling."
        if kind == "linear":
            return cls(kind="linear", **read_fields(cls, {"factor": params["factor"]}, where))
        if params.get("original_max_position_embeddings") is None:
            raise ValueError("YaRN needs original_max_position_embeddings (the pretrained window), got none")
        raw = {k: params.get(k) for k in ("factor", "original_max_position_embeddings", *_YARN_KEYS)}
        raw["beta_fast"] = raw["beta_fast"] or 32.0  # `or`: transformers reads 0 as unset too
        raw["beta_slow"] = raw["beta_slow"] or 1.0
        raw["truncate"] = True if raw["truncate"] is None else raw["truncate"]
        return cls(kind="yarn", **read_fields(cls, raw, where))


def _mscale(factor: float, mscale: float = 1.0) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0
