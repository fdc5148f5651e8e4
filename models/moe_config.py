"""The mixture-of-experts fields of a Qwen3-MoE `config.json` (HF `Qwen3MoeConfig`), as one value.

`Qwen3Config.moe` holds it (None: dense Qwen3); models/qwen3_moe.py builds the model it describes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from models.fields import NonNegFloat, NonNegInt, PosInt, check_fields, coerce, read_fields

MOE_MODEL_TYPE = "qwen3_moe"


@dataclasses.dataclass(frozen=True)
class MoeConfig:
    """Routing and expert shapes. Layer i is sparse (routed experts) iff i is not in
    `mlp_only_layers` and (i + 1) % `decoder_sparse_step` == 0, as transformers decides; the other
    layers keep the dense SwiGLU MLP of width `intermediate_size`."""

    num_experts: PosInt
    num_experts_per_tok: PosInt
    moe_intermediate_size: PosInt
    # top-k gate weights renormalised to sum to 1 (the Qwen3-MoE releases set it); False, transformers'
    # default for a file without it: the softmax's own
    norm_topk_prob: bool = False
    decoder_sparse_step: PosInt = 1
    mlp_only_layers: tuple[NonNegInt, ...] = ()
    # the load-balance loss weight the checkpoint was trained with (kept for export; training's own
    # weight is a training setting)
    router_aux_loss_coef: NonNegFloat = 0.001

    def __post_init__(self) -> None:
        check_fields(self)
        if any(i < 0 for i in self.mlp_only_layers):
            raise ValueError(f"mlp_only_layers must be layer indices >= 0, got {list(self.mlp_only_layers)}")
        if self.num_experts_per_tok > self.num_experts:
            raise ValueError(
                f"num_experts_per_tok ({self.num_experts_per_tok}) exceeds num_experts ({self.num_experts})"
            )

    def sparse_layers(self, num_layers: int) -> tuple[bool, ...]:
        """Per layer, whether it routes to experts (True) or runs the dense MLP."""
        return tuple(
            i not in self.mlp_only_layers and (i + 1) % self.decoder_sparse_step == 0
            for i in range(num_layers)
        )

    @classmethod
    def from_hf(cls, hf: dict[str, Any]) -> MoeConfig:
        """From a HF `qwen3_moe` config dict (transformers 5 writes `num_experts` as `num_local_experts`)."""
        raw = {k: v for k, v in hf.items() if k != "mlp_only_layers"}
        raw.setdefault("num_experts", hf.get("num_local_experts"))
        layers = hf.get("mlp_only_layers") or []
        if not isinstance(layers, list):
            raise ValueError(f"mlp_only_layers must be a list of layer indices, got {layers!r}")
        only = tuple(coerce(v, int, f"mlp_only_layers[{i}]") for i, v in enumerate(layers))
        return cls(**read_fields(cls, raw), mlp_only_layers=only)

    def to_hf(self) -> dict[str, Any]:
        """The MoE entries of a `config.json` that `transformers.Qwen3MoeConfig` reads."""
        return {
            "num_experts": self.num_experts,
            "num_experts_per_tok": self.num_experts_per_tok,
            "moe_intermediate_size": self.moe_intermediate_size,
            "norm_topk_prob": self.norm_topk_prob,
            "decoder_sparse_step": self.decoder_sparse_step,
            "mlp_only_layers": list(self.mlp_only_layers),
            "router_aux_loss_coef": self.router_aux_loss_coef,
            "output_router_logits": False,
        }
