"""The model's user-facing choices as plain values, importable without JAX: the training config's
schema reads them when it loads a YAML recipe, which must not start JAX (launch scripts fork
make_data's workers before JAX starts, and `launch/plan.py --help` stays instant)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

AttentionImpl = Literal["auto", "reference", "xla", "cudnn", "splash"]
ATTENTION_IMPLS: tuple[str, ...] = get_args(AttentionImpl)

# Activation rematerialisation inside the layer scan. "none": keep everything (fastest, most
# memory); "full": recompute the whole layer in the backward pass; "dots": keep matmul outputs
# without batch dims (recompute elementwise ops); "dots_all": keep every matmul output.
Remat = Literal["none", "full", "dots", "dots_all"]

ATTENTION_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
MLP_TARGETS = ("gate_proj", "up_proj", "down_proj")
TARGETS = ATTENTION_TARGETS + MLP_TARGETS
Quant = Literal["none", "int8"]

# A Qwen3-MoE layer's expert computation (models/moe.py): "ragged" grouped matmuls, "dense" every
# expert on every token (the reference; the faster one on a CPU), "auto" the one for the platform.
ExpertsImpl = Literal["auto", "ragged", "dense"]
EXPERT_IMPLS: tuple[str, ...] = get_args(ExpertsImpl)


@dataclass(frozen=True)
class LoraConfig:
    """`model.lora` of a recipe; rank 0 = full fine-tuning. Targets use the Hugging Face names.
    Frozen like ModelRuntime: the config loader writes its fields as it builds it, nothing after."""

    rank: int = 0
    alpha: float = 16.0
    targets: list = field(default_factory=lambda: list(TARGETS))
    # Dropout on the adapter input is refused: GRPO's importance ratio compares the trainer's
    # forward with the sampler's, and a dropped-out forward would make it differ from 1 on-policy.
    dropout: float = 0.0
    quant: Quant = "none"  # QLoRA: the frozen base projections stored as int8 (models/quant.py)

    @property
    def enabled(self) -> bool:
        return self.rank > 0

    @property
    def scale(self) -> float:
        return self.alpha / self.rank

    def errors(self, prefix: str = "model.lora.") -> list[str]:
        """Settings the adapters cannot be built with, one line each naming the key."""
        errors = [] if self.rank >= 0 else [f"{prefix}rank must be >= 0 (0 = off), got {self.rank}"]
        unknown = sorted(set(self.targets) - set(TARGETS))
        if unknown or (self.enabled and not self.targets):
            errors.append(
                f"{prefix}targets must be a non-empty subset of {list(TARGETS)}, got {self.targets}"
            )
        if self.dropout != 0.0:
            errors.append(f"{prefix}dropout must be 0 (a dropped-out forward breaks GRPO's ratio)")
        if self.quant != "none" and not self.enabled:
            errors.append(f"{prefix}quant={self.quant} needs adapters (rank > 0): the base is frozen")
        return errors


@dataclass(frozen=True)
class ModelRuntime:
    """How a Qwen3 model executes, as opposed to what it is (models.config.Qwen3Config): one frozen
    value handed from the recipe to every place a model is built, so a new execution setting is one
    field here, not an argument threaded through each constructor and loader.

    `dtype` / `param_dtype`: compute and stored dtypes (a name or a dtype); `remat`: the layer scan's
    rematerialisation; `attention`: the implementation of attention without a cache, resolved for
    `platform`; `attention_block`: the query block bounding attention-score memory (None = never
    block); `cache_block`: the key block of attention over a KV cache (only blocks holding live
    tokens are read); `platform`: what the programs compile for (a mesh's devices', None = this
    host's backend); `paged_attention`: how decode steps read a paged cache
    (models/paged_kernel.py); `moe_experts`: a Qwen3-MoE layer's expert computation (models/moe.py)."""

    dtype: Any = "float32"
    param_dtype: Any = "float32"
    remat: Remat = "none"
    attention: AttentionImpl = "auto"
    attention_block: int | None = 1024
    cache_block: int = 512
    platform: str | None = None
    paged_attention: str = "auto"
    moe_experts: ExpertsImpl = "auto"


DEFAULT_RUNTIME = ModelRuntime()  # float32, no remat, attention chosen for the host
