"""Every check of a loaded training config, in one place, each problem one line naming its key.

Types and choices are checked as values load (b2tjax.config.loader); what is left here is what one
field's annotation cannot say: ranges, and how sections must agree with each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # annotations only: TrainConfig.validate calls in here
    from b2tjax.config.schema import TrainConfig
    from rollout.config import RolloutConfig
    from sandbox.himap.options import HimapOptions


def config_errors(cfg: TrainConfig) -> list[str]:
    """Settings that would only fail deep inside a long run, one line each; [] when all is well."""
    batch = _batch_errors(cfg)
    rollout = cfg.rollout.errors("rollout.")
    if any(e.startswith("rollout.group_size ") for e in batch):  # GRPO's bound says it all: one line
        rollout = [e for e in rollout if not e.startswith("rollout.group_size ")]
    return (
        batch
        + _range_errors(cfg)
        + _benchmark_errors(cfg)
        + rollout
        + cfg.model.lora.errors()
        + _agent_errors(cfg)
    )


def _batch_errors(cfg: TrainConfig) -> list[str]:
    """The rollout batch splits into mini- and micro-batches; GRPO needs a group and a temperature."""
    mini_batches = max(cfg.grpo.mini_batches, 1)  # < 1 is reported below; no division by zero here
    checks = [
        (
            cfg.rollout.group_size >= 2,
            f"rollout.group_size must be >= 2, got {cfg.rollout.group_size} "
            "(GRPO's advantages are relative to the group)",
        ),
        (
            cfg.grpo.mini_batches >= 1 and cfg.grpo.epochs >= 1,
            "grpo.mini_batches and grpo.epochs must be >= 1",
        ),
        (
            cfg.rollout_batch % mini_batches == 0,
            f"rollout batch {cfg.rollout_batch} (prompts_per_step * group_size) must divide into "
            "grpo.mini_batches",
        ),
        (
            cfg.grpo.micro_batch_size <= 0
            or (cfg.rollout_batch // mini_batches) % cfg.grpo.micro_batch_size == 0,
            "grpo.micro_batch_size must divide the mini-batch size",
        ),
        (
            cfg.sft.micro_batch_size <= 0 or cfg.sft.batch_size % cfg.sft.micro_batch_size == 0,
            "sft.micro_batch_size must divide sft.batch_size",
        ),
        (cfg.grpo.clip_low >= 0 and cfg.grpo.clip_high >= 0, "clip epsilons must be >= 0"),
        (cfg.grpo.beta >= 0, "grpo.beta must be >= 0"),
        (cfg.rollout.temperature > 0, "rollout.temperature must be > 0"),
        (
            cfg.hardware.devices >= 1 and cfg.hardware.hbm_gib >= 0,
            "hardware.devices must be >= 1 and hardware.hbm_gib >= 0",
        ),
        (
            cfg.checkpoint.every_steps >= 1 and cfg.checkpoint.keep >= 1,
            "checkpoint.every_steps/keep must be >= 1",
        ),
    ]
    return [message for ok, message in checks if not ok]


def _range_errors(cfg: TrainConfig) -> list[str]:
    """Numbers outside their meaningful range, each reported with its key and the allowed range."""
    errors = []
    for key, allowed, ok in _RANGES:
        value = cfg.get(key)
        if not ok(value):
            errors.append(f"{key} must be {allowed}, got {value!r}")
    return errors


def _benchmark_errors(cfg: TrainConfig) -> list[str]:
    """The benchmark exists (and is installed) and offers the prompt style."""
    from sandbox.benchmarks import BenchmarkError, benchmark_class

    if cfg.task != "travel":
        return []
    try:
        variants = benchmark_class(cfg.benchmark).prompt_variants
    except BenchmarkError as err:
        return [str(err)]
    if cfg.rollout.prompt_style in variants:
        return []
    return [f"rollout.prompt_style must be one of {variants} for benchmark {cfg.benchmark!r}"]


def _agent_errors(cfg: TrainConfig) -> list[str]:
    """The HiMAP section, checked when it is used."""
    if cfg.agent != "himap":
        return []
    errors = himap_errors(cfg.himap, cfg.rollout)
    if cfg.task != "travel":
        errors.append(f"agent: himap needs task: travel, got task: {cfg.task}")
    elif cfg.benchmark not in (offered := _himap_benchmarks()):
        errors.append(f"agent: himap has no domain for benchmark {cfg.benchmark!r} ({', '.join(offered)})")
    return errors


def himap_errors(himap: HimapOptions, rollout: RolloutConfig) -> list[str]:
    """Settings a HiMAP rollout could not run with: the options' own rules, and a role's limits may
    not exceed the rollout's (the decode segment and the cache row are sized by the rollout section)."""
    errors = himap.errors("himap.")
    for role in ("coordinator", "executor"):
        errors += himap.limits(role).errors(f"himap.{role}_limits.", rollout, "rollout.")
    return errors


def _at_least(low: float) -> Callable[[Any], bool]:
    return lambda v: v >= low


def _positive(v: float) -> bool:
    return v > 0


# (dotted key, allowed range in words, predicate): checked when a config loads.
_RANGES: list[tuple[str, str, Callable[[Any], bool]]] = [
    ("steps", ">= 0", _at_least(0)),
    ("sft.steps", ">= 0", _at_least(0)),
    ("sft.batch_size", ">= 1", _at_least(1)),
    ("sft.micro_batch_size", ">= 0 (0 = whole batch)", _at_least(0)),
    ("sft.max_seq_len", ">= 2", _at_least(2)),
    ("sft.max_examples", ">= 0 (0 = all)", _at_least(0)),
    ("log_every", ">= 1", _at_least(1)),
    ("grpo.micro_batch_size", ">= 0 (0 = whole mini-batch)", _at_least(0)),
    ("grpo.fixed_length", ">= 0 (0 = rollout.max_seq_len)", _at_least(0)),
    ("grpo.logprob_chunk", ">= 1", _at_least(1)),
    ("grpo.adv_eps", "> 0", _positive),
    ("grpo.local_weight", ">= 0", _at_least(0)),
    ("data.max_train_instances", ">= 0 (0 = all)", _at_least(0)),
    ("data.eval_instances", ">= 0 (0 = whole split)", _at_least(0)),
    ("model.sp_vocab_size", ">= 64", _at_least(64)),
] + [
    (f"{prefix}{key}", allowed, ok)
    for prefix in ("optim.", "sft.optim.")
    for key, allowed, ok in [
        ("lr", "> 0", _positive),
        ("warmup_steps", ">= 0", _at_least(0)),
        ("final_lr_ratio", "in [0, 1]", lambda v: 0 <= v <= 1),
        ("weight_decay", ">= 0", _at_least(0)),
        ("b1", "in [0, 1)", lambda v: 0 <= v < 1),
        ("b2", "in [0, 1)", lambda v: 0 <= v < 1),
        ("eps", "> 0", _positive),
        ("max_grad_norm", "> 0", _positive),
    ]
]


def _himap_benchmarks() -> list[str]:
    """The registered benchmarks that offer HiMAP (a registry query: a new benchmark needs no edit here)."""
    from sandbox.benchmarks import BENCHMARKS, benchmark_class

    return [name for name in sorted(BENCHMARKS) if benchmark_class(name).offers_himap()]
