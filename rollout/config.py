"""RolloutConfig: every knob of the sampler and of the episodes it runs, each under one name.

The same object configures the trainer (`TrainConfig.rollout`, YAML key `rollout:`), the
RolloutEngine, launch/rollouts.py (`--config FILE rollout.key=value`), the memory plan and the
notebook. Choice fields are `Literal` types; sandbox.fields.choice_error checks a value against the
type, so the allowed values are written once, in the annotation (the config loader uses the same one).

Defaults describe the tiny CPU run (configs/tiny_cpu.yaml).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from sandbox.fields import choice_error, field_types
from sandbox.python_tool import Isolation

TurnCap = Literal["stop", "close"]
PromptStyle = Literal["tool_agent", "react"]  # a benchmark may offer fewer (Benchmark.prompt_variants)
CacheDtype = Literal["auto", "float32", "bfloat16"]  # "auto" = the model's compute dtype


@dataclasses.dataclass
class RolloutConfig:
    # -- what one training step rolls out (the trainer's; the engine takes any list of episodes)
    group_size: int = 4  # G rollouts per prompt
    prompts_per_step: int = 2
    # -- the episode and its limits (each limit ends a stream with its StopReason)
    max_turns: int = 4
    max_turn_tokens: int = 96  # sampled tokens per assistant turn; also the decode segment length
    max_seq_len: int = 1024  # whole stream, prompt included
    max_prompt_tokens: int = 0  # trajectory events are dropped to fit; 0 = max_seq_len // 2
    turn_cap: TurnCap = "stop"  # at max_turn_tokens: "stop" ends the episode; "close" appends a
    # forced <|im_end|> (mask 0) and lets the environment answer
    max_response_chars: int = 6000  # per tool/memory response, truncated in the middle
    prompt_style: PromptStyle = "tool_agent"  # "tool_agent" (tools + memory, Figure 11) | "react" (ReAct)
    memory_enabled: bool = True  # ablation: memory module off
    python_tool: bool = False
    # "full": refuse to start the Python tool without its kernel jail (root, mount/network namespaces);
    # "unsafe-ok": run it anyway with only an in-process audit hook, which model-written code can escape.
    python_tool_isolation: Isolation = "full"
    # -- sampling
    temperature: float = 1.0  # <= 0: greedy (the trainer needs > 0)
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    # -- device memory of the sampler (sized with launch/plan.py): episodes stream through
    # `batch_rows` rows of KV cache (continuous batching), each `cache_len` slots long, fed at most
    # `prefill_chunk` tokens per row per prefill call.
    batch_rows: int = 8
    cache_len: int = 0  # 0 = max_seq_len; else >= max_seq_len (a stream lives in one row)
    cache_dtype: CacheDtype = "auto"
    prefill_chunk: int = 1024
    prefill_min_bucket: int = 16  # prefill widths are powers of two >= this (fewer compiles)
    # -- engine schedule
    refill: bool = True  # continuous batching; False = static batching (waves)
    reprefill: bool = False  # baseline: re-feed the whole record every turn (benchmarks)
    # A stream starting a row copies the KV of its record's longest prefix that another row holds
    # (a GRPO group's prompt, a HiMAP team's system + tools, a parked stream's old row) instead of
    # prefilling it (rollout/prefix.py); shared prefixes shorter than prefix_min_tokens are prefilled.
    prefix_reuse: bool = True
    prefix_min_tokens: int = 32
    tool_workers: int = 8  # thread pool running episodes' environment steps
    # Host work hidden behind decoding: finished turns go to the pool while the device decodes the
    # rows still sampling; False = the synchronous engine (host and device take turns).
    async_host: bool = True
    # A decode segment returns once this share of its active rows has ended its turn (1.0: every
    # row), so their tool calls can start while the rest keep decoding; in (0, 1].
    segment_return_share: float = 1.0

    def __post_init__(self) -> None:
        errors = self.errors()
        if errors:
            raise ValueError("invalid rollout config: " + "; ".join(errors))

    @property
    def cache_slots(self) -> int:
        """KV-cache slots per row: what the engine allocates and the memory plan counts."""
        return self.cache_len or self.max_seq_len

    @property
    def prompt_budget(self) -> int:
        """Tokens the prompt may take (max_prompt_tokens, or half the stream)."""
        return self.max_prompt_tokens or self.max_seq_len // 2

    def errors(self, prefix: str = "") -> list[str]:
        """Every value outside its range or choices, one line each naming the key (`prefix` + name)."""
        errors = [
            err
            for name, hint in field_types(type(self)).items()
            if (err := choice_error(prefix + name, getattr(self, name), hint)) is not None
        ]
        for name, low in _AT_LEAST.items():
            if getattr(self, name) < low:
                errors.append(f"{prefix}{name} must be >= {low}, got {getattr(self, name)!r}")
        for name in ("top_p", "segment_return_share"):
            if not 0.0 < getattr(self, name) <= 1.0:
                errors.append(f"{prefix}{name} must be in (0, 1], got {getattr(self, name)!r}")
        if self.max_prompt_tokens >= self.max_seq_len:
            errors.append(
                f"{prefix}max_prompt_tokens must be < {prefix}max_seq_len ({self.max_seq_len}), "
                f"got {self.max_prompt_tokens}"
            )
        if self.cache_len and self.cache_len < self.max_seq_len:
            errors.append(
                f"{prefix}cache_len ({self.cache_len}) must be 0 or >= {prefix}max_seq_len "
                f"({self.max_seq_len}): a stream's record lives in one cache row"
            )
        return errors


# Lower bounds of the numeric knobs (0 where 0 means "default" or "off").
_AT_LEAST: dict[str, int] = {
    "group_size": 1,
    "prompts_per_step": 1,
    "max_turns": 1,
    "max_turn_tokens": 1,
    "max_seq_len": 2,
    "max_prompt_tokens": 0,
    "max_response_chars": 1,
    "top_k": 0,
    "batch_rows": 1,
    "cache_len": 0,
    "prefill_chunk": 1,
    "prefill_min_bucket": 1,
    "prefix_min_tokens": 1,
    "tool_workers": 1,
}
