"""RolloutConfig: every knob of the sampler and of the episodes it runs, each under one name.

The same object configures the trainer (`TrainConfig.rollout`, YAML key `rollout:`), the
RolloutEngine, launch/rollouts.py (`--config FILE rollout.key=value`), the memory plan and the
notebook. Choice fields are `Literal` types and ranges `Annotated[int, Range(...)]` (PosInt = >= 1,
NonNegInt = >= 0); models.fields.field_errors checks a value against them, so the allowed values
are written once, in the annotation (the config loader uses the same one).

Defaults are small values every part runs with (what unit tests and RolloutConfig() get), not a
recipe; configs/base.yaml lists them with the training config's.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Literal

from models.fields import NonNegInt, PosInt, Range, field_errors
from models.frozen import Freezable
from sandbox.python_tool import Isolation

TurnCap = Literal["stop", "close"]
PromptStyle = Literal["tool_agent", "react"]  # a benchmark may offer fewer (Benchmark.prompt_variants)
CacheDtype = Literal["auto", "float32", "bfloat16"]  # "auto" = the model's compute dtype
# How the paged cache is read (models/paged_kernel.py PAGED_ATTENTION_IMPLS): "auto" the Pallas decode
# kernel in programs for a TPU with a bf16 pool, else "gather"; "kernel" forces it (interpreted off TPU).
PagedAttention = Literal["auto", "gather", "kernel"]
ResumeKV = Literal["keep", "recompute"]
RouterReplay = Literal["off", "replay"]


@dataclasses.dataclass
class RolloutConfig(Freezable):
    # -- what one training step rolls out (the trainer's; the engine takes any list of episodes)
    group_size: PosInt = 4  # G rollouts per prompt
    prompts_per_step: PosInt = 2
    # -- the episode and its limits (each limit ends a stream with its StopReason)
    max_turns: PosInt = 4
    max_turn_tokens: PosInt = 96  # sampled tokens per assistant turn; also the decode segment length
    max_seq_len: Annotated[int, Range(ge=2)] = 1024  # whole stream, prompt included
    max_prompt_tokens: NonNegInt = 0  # trajectory events are dropped to fit; 0 = max_seq_len // 2
    turn_cap: TurnCap = "stop"  # at max_turn_tokens: "stop" ends the episode; "close" appends a
    # forced <|im_end|> (mask 0) and lets the environment answer
    max_response_chars: PosInt = 6000  # per tool/memory response, truncated in the middle
    prompt_style: PromptStyle = "tool_agent"  # "tool_agent" (tools + memory, Figure 11) | "react" (ReAct)
    memory_enabled: bool = True  # ablation: memory module off
    python_tool: bool = False
    # "full": refuse to start the Python tool without its kernel jail (root, mount/network namespaces);
    # "unsafe-ok": run it anyway with only an in-process audit hook, which model-written code can escape.
    python_tool_isolation: Isolation = "full"
    # Context budget (rollout/context.py): when a stream's next turn would not fit this many tokens,
    # its oldest tool replies become short stubs until the context is at most half of it, and the
    # stream goes on in a new record (segment) from the folded context. 0 = off. Replies to the
    # last `context_keep_turns` turns, memory replies and the prompt never fold.
    context_budget: NonNegInt = 0
    context_keep_turns: PosInt = 2
    # -- sampling
    temperature: float = 1.0  # <= 0: greedy (the trainer needs > 0)
    top_p: Annotated[float, Range(gt=0, le=1)] = 1.0
    top_k: NonNegInt = 0  # 0 = off
    # -- device memory of the sampler (sized with launch/plan.py): episodes stream through
    # `batch_rows` rows (continuous batching), each row's stream up to `cache_len` tokens long, fed at
    # most `prefill_chunk` tokens per row per prefill call. The KV cache is a pool of `kv_pages` pages
    # of `page_size` slots: a row holds the pages its tokens fill and streams sharing a prefix share
    # its pages (models/paged_kv.py, rollout/pages.py). kv_pages 0 = batch_rows x cache_len slots.
    batch_rows: PosInt = 8
    cache_len: NonNegInt = 0  # 0 = max_seq_len; else >= max_seq_len (a stream lives in one row)
    cache_dtype: CacheDtype = "auto"
    page_size: PosInt = 16
    kv_pages: NonNegInt = 0
    paged_attention: PagedAttention = "auto"
    # "replay" (a Qwen3-MoE only): each record keeps the experts every MoE layer chose for each of its
    # tokens (`EpisodeRecord.routes`), and training routes through them (docs/concepts/moe.md)
    router_replay: RouterReplay = "off"
    prefill_chunk: PosInt = 1024
    prefill_min_bucket: PosInt = 16  # prefill widths are powers of two >= this (fewer compiles)
    # -- engine schedule (continuous batching: a free row takes the next stream at once)
    # A stream starting a row copies the KV of its record's longest prefix that another row holds
    # (a GRPO group's prompt, a HiMAP team's system + tools, a parked stream's old row) instead of
    # prefilling it (rollout/prefix.py); shared prefixes shorter than prefix_min_tokens are prefilled.
    prefix_reuse: bool = True
    prefix_min_tokens: PosInt = 32
    tool_workers: PosInt = 8  # thread pool running episodes' environment steps
    # A decode segment returns once this share of its active rows has ended its turn, so their tool
    # calls run in the pool while the rest keep decoding (rollout/schedule.py); in (0, 1]. 1.0: every
    # row ends its turn in the segment, nothing is left to decode meanwhile, so host work runs
    # between segments, in a fixed order (records and streaming versions reproducible bit for bit).
    segment_return_share: Annotated[float, Range(gt=0, le=1)] = 1.0
    # -- streaming across training steps (rollout/session.py)
    # A step trains on records whose oldest sampled token is at most this many weight updates old;
    # the engine keeps decoding the next steps' episodes meanwhile. 0: every step rolls out its
    # episodes to their end under one policy (today's synchronous loop, exactly).
    max_staleness: NonNegInt = 0
    # After a weight update, episodes still running "keep" the KV their rows hold (computed by the
    # older weights; slime) or "recompute" it under the new weights (re-prefilled; AReaL).
    resume_kv: ResumeKV = "keep"
    # The next step's episodes decode while the trainer updates the weights, under the weights from
    # before the update: one update of max_staleness (needs >= 1). With the split placement
    # (mesh.rollout_devices) decoding and the update run at once; co-located they take turns in the
    # same order, so both placements give the same records (b2tjax/run/streaming.py).
    decode_during_update: bool = False

    def __post_init__(self) -> None:
        errors = self.errors()
        if errors:
            raise ValueError("invalid rollout config: " + "; ".join(errors))

    @property
    def cache_slots(self) -> int:
        """KV-cache slots per row: what the engine allocates and the memory plan counts."""
        return self.cache_len or self.max_seq_len

    @property
    def pages_per_row(self) -> int:
        """Pages of a row's page table: a whole stream's cache_slots."""
        return -(-self.cache_slots // self.page_size)

    @property
    def pool_pages(self) -> int:
        """Pages of the pool (kv_pages, or batch_rows x cache_slots in pages)."""
        return self.kv_pages or self.batch_rows * self.pages_per_row

    @property
    def prompt_budget(self) -> int:
        """Tokens the prompt may take (max_prompt_tokens, or half the stream)."""
        return self.max_prompt_tokens or self.max_seq_len // 2

    def errors(self, prefix: str = "") -> list[str]:
        """Every value outside its range or choices, one line each naming the key (`prefix` + name)."""
        return field_errors(self, prefix) + self.length_errors(prefix)

    def length_errors(self, prefix: str = "") -> list[str]:
        """The rules between the length knobs (their ranges are in the annotations)."""
        errors = []
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
        if self.context_budget and not (
            self.prompt_budget + self.max_turn_tokens < self.context_budget <= self.max_seq_len
        ):
            errors.append(
                f"{prefix}context_budget ({self.context_budget}) must be 0 or hold the prompt and a whole "
                f"turn ({prefix}max_prompt_tokens {self.prompt_budget} + {prefix}max_turn_tokens "
                f"{self.max_turn_tokens}) and be <= {prefix}max_seq_len ({self.max_seq_len})"
            )
        if self.kv_pages and self.kv_pages < self.pages_per_row:
            errors.append(
                f"{prefix}kv_pages ({self.kv_pages}) must hold one whole stream: >= {self.pages_per_row} "
                f"pages of {prefix}page_size {self.page_size} for {self.cache_slots} slots"
            )
        return errors
