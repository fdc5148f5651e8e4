"""Training configuration: nested dataclasses, YAML files and `a.b=value` command-line overrides.

Defaults describe the tiny CPU run (`configs/tiny_cpu.yaml` spells them out). Unknown keys and
values of the wrong type are rejected with a message naming the key, before any work starts.
Choice fields are `Literal` types: a value outside one is rejected as it loads, with the allowed
values read from the annotation (rollout.config.choice_error), so they are written once.
The `rollout:` section is rollout.config.RolloutConfig, the object the RolloutEngine takes.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from b2tjax.credit import CreditMode
from b2tjax.grpo import AggregationMode
from models.lora import LoraConfig
from models.qwen3 import Remat
from rollout.config import RolloutConfig, choice_error, field_type

Dtype = Literal["float32", "bfloat16"]
Task = Literal["travel", "toy"]  # the agent task on `benchmark` | the digit task (b2tjax.toy)
Mode = Literal["sft_grpo", "grpo", "sft_only", "eval"]  # sft_only: baseline; eval: e.g. ReAct baseline
Agent = Literal["single", "himap"]  # one agent per episode | HiMAP team (coordinator + day executors)


@dataclass
class ModelConfig:
    preset: str = "tiny"  # models.config.get_config name, used when init is "" (random init)
    init: str = ""  # "" random | "hf:DIR" (Hugging Face checkpoint) | "ckpt:DIR" (models.checkpoint)
    overrides: dict = field(default_factory=dict)  # Qwen3Config fields over the preset (e.g. num_layers)
    compute_dtype: Dtype = "float32"  # "bfloat16" on GPU/TPU; master weights stay param_dtype
    param_dtype: Dtype = "float32"
    tokenizer: str = "sentencepiece"  # "sentencepiece" (trained on the generated corpus) | "qwen3" | path
    sp_vocab_size: int = 1024  # size of the SentencePiece vocabulary trained for the tiny model
    remat: Remat = "none"  # activation rematerialisation in the layer scan: none | full | dots | dots_all
    # LoRA / QLoRA (models/lora.py): rank > 0 trains adapters only on a base frozen in compute_dtype
    lora: LoraConfig = field(default_factory=LoraConfig)


@dataclass
class DataConfig:
    data_dir: str = "DATA"
    world_scale: str = "small"  # passed to launch/make_data.py when DATA is absent
    train_split: str = "train"
    eval_split: str = ""  # "" = the benchmark's own (B2T: test; TravelPlanner: dev, generated queries)
    difficulties: list = field(default_factory=lambda: ["easy", "medium", "hard"])
    max_train_instances: int = 0  # 0 = all
    eval_instances: int = 8  # instances in the final evaluation table (0 = whole split)
    shuffle_seed: int = 0


@dataclass
class GRPOConfig:
    adv_eps: float = 1e-6
    scale_by_std: bool = True  # False = the "no_std" variant
    clip_low: float = 0.2
    clip_high: float = 0.28
    beta: float = 0.0  # KL coefficient; 0 = no reference model at all
    aggregation: AggregationMode = "seq_mean_token_mean"  # see b2tjax.grpo.token_weights
    fixed_length: int = 0  # normaliser of "fixed_length"; 0 = rollout.max_seq_len
    loss_mask: bool = True  # ablation: False trains on environment tokens too
    action_penalty: bool = True  # ablation: P_action off
    format_gate: bool = True
    recompute_old_logprobs: bool = False  # default: old log-probs from the sampler
    mini_batches: int = 1  # optimizer steps per rollout batch and epoch
    epochs: int = 1  # passes over each rollout batch
    micro_batch_size: int = 0  # rows per forward/backward; 0 = whole mini-batch
    logprob_chunk: int = 128  # sequence chunk of the vocabulary projection
    # "team": every stream of an episode trains on the episode's group-normalised team reward;
    # "team_local": plus local_weight x a day executor's own normalised day score (docs/HIMAP.md).
    credit: CreditMode = "team"
    local_weight: float = 0.5
    # Train only on the records of groups whose rewards differ (DAPO's dynamic-sampling filter): a
    # flat group's advantages are all 0, so with sparse rewards most of a step's forward/backward
    # would be spent on rows that teach nothing. Sample more prompts per step to keep the batch full.
    drop_flat_groups: bool = False


@dataclass
class OptimConfig:
    lr: float = 1e-4
    warmup_steps: int = 2
    final_lr_ratio: float = 0.1
    weight_decay: float = 0.0
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    max_grad_norm: float = 1.0


@dataclass
class SFTConfig:
    steps: int = 40  # 0 = no SFT warm start
    batch_size: int = 4
    micro_batch_size: int = 0
    max_seq_len: int = 1024
    max_examples: int = 0  # 0 = all traces
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=2e-3, warmup_steps=4, weight_decay=0.0))


@dataclass
class CheckpointConfig:
    every_steps: int = 10
    keep: int = 2
    async_save: bool = True


@dataclass
class MeshConfig:
    data: int = 1
    fsdp: int = -1  # -1 = every device not used by the other axes
    tensor: int = 1


@dataclass
class HardwareConfig:
    """The machine a recipe is sized for; launch/plan.py checks every program fits it."""

    device_kind: str = "cpu"  # e.g. "H100 80GB", "TPU v5p" (for people; the plan uses the numbers)
    devices: int = 1  # accelerator chips in the whole job
    hbm_gib: float = 0.0  # memory per device in GiB; 0 = not stated (the plan then reports only)


@dataclass
class ToyConfig:
    """The digit task: prompt [BOS, k] -> the reward is 1 iff the answer token is digit k."""

    num_digits: int = 10
    vocab_size: int = 16
    answer_len: int = 1


@dataclass
class HimapRoleConfig:
    """Stream limits of one HiMAP role; 0 = the rollout section's value (never more than it: the
    decode segment and the cache row are sized by the rollout section)."""

    max_turns: int = 8
    max_turn_tokens: int = 0
    max_seq_len: int = 0


@dataclass
class HimapConfig:
    """The HiMAP team (`agent: himap`; docs/HIMAP.md). The switches are the paper's Table-7
    ablations; credit assignment is `grpo.credit`."""

    global_state: bool = True  # Σ: one budget, no venue twice, one intercity mode
    coordinator: bool = True  # false = flat: equal budget split, executors read the instruction
    bargaining: bool = True  # executors may reject a sub-goal; the coordinator re-plans that day
    early_detection: bool = True  # check/commit against Σ while planning (else only at merge)
    parallel: bool = True  # a round's executors run together (false: one after another)
    max_rounds: int = 3
    coordinator_limits: HimapRoleConfig = field(default_factory=lambda: HimapRoleConfig(max_turns=8))
    executor_limits: HimapRoleConfig = field(default_factory=lambda: HimapRoleConfig(max_turns=16))
    sft_instances: int = 0  # train instances the scripted HiMAP expert solves for SFT; 0 = all

    def options(self, max_response_chars: int) -> Any:
        """The sandbox.himap.options.HimapOptions these settings describe."""
        from sandbox.himap.options import HimapOptions, RoleLimits

        def limits(role: HimapRoleConfig) -> RoleLimits:
            return RoleLimits(role.max_turns, role.max_turn_tokens or None, role.max_seq_len or None)

        return HimapOptions(
            global_state=self.global_state,
            coordinator=self.coordinator,
            bargaining=self.bargaining,
            early_detection=self.early_detection,
            parallel=self.parallel,
            max_rounds=self.max_rounds,
            coordinator_limits=limits(self.coordinator_limits),
            executor_limits=limits(self.executor_limits),
            max_response_chars=max_response_chars,
        )

    def errors(self, rollout: RolloutConfig) -> list[str]:
        """Settings a HiMAP rollout could not run with, one line each naming the key."""
        errors = [] if self.max_rounds >= 1 else [f"himap.max_rounds must be >= 1, got {self.max_rounds}"]
        for role in ("coordinator", "executor"):
            limits: HimapRoleConfig = getattr(self, f"{role}_limits")
            key = f"himap.{role}_limits."
            if not 1 <= limits.max_turns <= rollout.max_turns:
                cap = f"rollout.max_turns={rollout.max_turns}"
                errors.append(f"{key}max_turns must be in [1, {cap}], got {limits.max_turns}")
            for name, cap in (
                ("max_turn_tokens", rollout.max_turn_tokens),
                ("max_seq_len", rollout.max_seq_len),
            ):
                value = getattr(limits, name)
                if not 0 <= value <= cap:
                    errors.append(f"{key}{name} must be in [0, rollout.{name}={cap}] (0 = that), got {value}")
        if self.sft_instances < 0:
            errors.append(f"himap.sft_instances must be >= 0 (0 = all), got {self.sft_instances}")
        return errors


@dataclass
class TrainConfig:
    task: Task = "travel"
    benchmark: str = "b2t"  # a name in sandbox.benchmarks.BENCHMARKS: "b2t" | "travelplanner"
    mode: Mode = "sft_grpo"
    agent: Agent = "single"  # "himap": HiMAP episodes (the `himap:` section) for rollouts, SFT, eval
    seed: int = 0
    steps: int = 12  # GRPO steps (one rollout batch each)
    out: str = "runs/tiny"
    log_every: int = 1
    eval_at_end: bool = True
    distributed: bool = False  # call jax.distributed.initialize() (multi-host TPU / multi-node GPU)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    grpo: GRPOConfig = field(default_factory=GRPOConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    mesh: MeshConfig = field(default_factory=MeshConfig)
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    toy: ToyConfig = field(default_factory=ToyConfig)
    himap: HimapConfig = field(default_factory=HimapConfig)

    def validate(self) -> TrainConfig:
        """Reject settings that would only fail deep inside a long run."""
        mini_batches = max(self.grpo.mini_batches, 1)  # < 1 is reported below; no division by zero here
        checks = [
            (
                self.rollout.group_size >= 2,
                "rollout.group_size must be >= 2 (advantages are relative to the group)",
            ),
            (
                self.grpo.mini_batches >= 1 and self.grpo.epochs >= 1,
                "grpo.mini_batches and grpo.epochs must be >= 1",
            ),
            (
                self.rollout_batch % mini_batches == 0,
                f"rollout batch {self.rollout_batch} (prompts_per_step * group_size) must divide into "
                "grpo.mini_batches",
            ),
            (
                self.grpo.micro_batch_size <= 0
                or (self.rollout_batch // mini_batches) % self.grpo.micro_batch_size == 0,
                "grpo.micro_batch_size must divide the mini-batch size",
            ),
            (
                self.sft.micro_batch_size <= 0 or self.sft.batch_size % self.sft.micro_batch_size == 0,
                "sft.micro_batch_size must divide sft.batch_size",
            ),
            (self.grpo.clip_low >= 0 and self.grpo.clip_high >= 0, "clip epsilons must be >= 0"),
            (self.grpo.beta >= 0, "grpo.beta must be >= 0"),
            (self.rollout.temperature > 0, "rollout.temperature must be > 0"),
            *self._benchmark_checks(),
            (
                self.hardware.devices >= 1 and self.hardware.hbm_gib >= 0,
                "hardware.devices must be >= 1 and hardware.hbm_gib >= 0",
            ),
            (
                self.checkpoint.every_steps >= 1 and self.checkpoint.keep >= 1,
                "checkpoint.every_steps/keep must be >= 1",
            ),
        ]
        errors = (
            [msg for ok, msg in checks if not ok]
            + self._range_errors()
            + self.rollout.errors("rollout.")
            + self.model.lora.errors()
            + self._agent_errors()
        )
        if errors:
            raise ValueError("invalid training config:\n  " + "\n  ".join(errors))
        return self

    def _agent_errors(self) -> list[str]:
        """The HiMAP section, checked when it is used."""
        if self.agent != "himap":
            return []
        errors = self.himap.errors(self.rollout)
        if self.task != "travel":
            errors.append(f"agent: himap needs task: travel, got task: {self.task}")
        elif self.benchmark not in ("b2t", "travelplanner"):
            errors.append(f"agent: himap has no domain for benchmark {self.benchmark!r} (b2t, travelplanner)")
        return errors

    def _range_errors(self) -> list[str]:
        """Numbers outside their meaningful range, each reported with its key and the allowed range."""
        errors = []
        for key, allowed, ok in _RANGES:
            value = self.get(key)
            if not ok(value):
                errors.append(f"{key} must be {allowed}, got {value!r}")
        return errors

    def get(self, dotted: str) -> Any:
        """The value at a dotted key such as 'sft.optim.lr'."""
        value: Any = self
        for part in dotted.split("."):
            value = getattr(value, part)
        return value

    def _benchmark_checks(self) -> list[tuple[bool, str]]:
        """The benchmark exists (and is installed) and offers the prompt style."""
        from sandbox.benchmarks import BenchmarkError, benchmark_class

        if self.task != "travel":
            return []
        try:
            variants = benchmark_class(self.benchmark).prompt_variants
        except BenchmarkError as err:
            return [(False, str(err))]
        return [
            (
                self.rollout.prompt_style in variants,
                f"rollout.prompt_style must be one of {variants} for benchmark {self.benchmark!r}",
            )
        ]

    @property
    def rollout_batch(self) -> int:
        return self.rollout.prompts_per_step * self.rollout.group_size

    @property
    def cache_len(self) -> int:
        """Slots per KV-cache row of the sampler."""
        return self.rollout.cache_slots

    @property
    def cache_dtype(self) -> str:
        """The sampler's KV-cache dtype ("auto" = the model's compute dtype)."""
        auto = self.rollout.cache_dtype == "auto"
        return self.model.compute_dtype if auto else self.rollout.cache_dtype

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _at_least(low: float) -> Any:
    return lambda v: v >= low


def _positive(v: float) -> bool:
    return v > 0


# (dotted key, allowed range in words, predicate): checked when a config loads.
_RANGES: list[tuple[str, str, Any]] = [
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


def _coerce(value: Any, default: Any, key: str) -> Any:
    """Convert `value` to the type of the field's default, or explain why it cannot be."""
    if isinstance(default, bool):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise ValueError(f"{key}: expected true/false, got {value!r}")
    if isinstance(default, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        try:
            number = float(value) if isinstance(value, str) else None
        except ValueError:
            number = None
        if number is not None and number.is_integer():
            return int(number)
        _bad(key, "an integer", value)
    if isinstance(default, float):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        try:
            return float(value)  # YAML reads "1e-6" as a string
        except (TypeError, ValueError):
            _bad(key, "a number", value)
    if isinstance(default, str):
        if isinstance(value, (dict, list)):
            _bad(key, "a string", value)
        return str(value)
    if isinstance(default, list):
        return list(value) if isinstance(value, (list, tuple)) else [value]
    if isinstance(default, dict):
        if not isinstance(value, dict):
            _bad(key, "a mapping", value)
        return dict(value)
    return value


def _bad(key: str, what: str, value: Any):
    raise ValueError(f"{key}: expected {what}, got {value!r}")


# Old spellings of renamed keys, so saved run configs and older recipes still load.
_RENAMED = {"rollout.max_new_tokens": "rollout.max_turn_tokens"}


def _merge(obj: Any, updates: dict, prefix: str = "") -> None:
    """Write `updates` (nested dict) into the dataclass `obj`, checking names and types."""
    if not isinstance(updates, dict):
        raise ValueError(f"{prefix or 'config'}: expected a mapping, got {updates!r}")
    names = {f.name for f in dataclasses.fields(obj)}
    for key, value in updates.items():
        path = _RENAMED.get(f"{prefix}{key}", f"{prefix}{key}")
        key = path[len(prefix) :]
        if key not in names:
            raise ValueError(f"unknown config key {path!r}; valid keys here: {sorted(names)}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            _merge(current, value, path + ".")
            continue
        value = _coerce(value, current, path)
        error = choice_error(path, value, field_type(type(obj), key))
        if error is not None:
            raise ValueError(error)
        setattr(obj, key, value)


def apply_overrides(cfg: TrainConfig, overrides: Iterable[str]) -> TrainConfig:
    """Apply `section.key=value` strings; values are parsed as YAML (numbers, bools, lists)."""
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not of the form key=value")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError:
            raise ValueError(f"override {item!r}: the value is not valid YAML") from None
        nested: Any = value
        for part in reversed(key.strip().split(".")):
            nested = {part: nested}
        _merge(cfg, nested)
    return cfg


def load_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> TrainConfig:
    """Defaults <- YAML file (if any) <- overrides, then validated."""
    cfg = TrainConfig()
    if path is not None:
        _merge_file(cfg, Path(path))
    return apply_overrides(cfg, overrides).validate()


def _merge_file(cfg: TrainConfig, path: Path) -> None:
    """Merge a YAML recipe; every problem with the file is a ValueError naming it."""
    if not path.is_file():
        raise ValueError(f"config file {path} " + ("is a directory" if path.is_dir() else "does not exist"))
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ValueError(f"{path}:{where}: YAML syntax error ({problem})") from None
    try:
        _merge(cfg, data)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def config_from_dict(data: dict) -> TrainConfig:
    """Inverse of `TrainConfig.to_dict` (used when restoring a run's saved config)."""
    cfg = TrainConfig()
    _merge(cfg, data)
    return cfg.validate()


def dump_config(cfg: TrainConfig, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))


def config_json(cfg: TrainConfig) -> str:
    return json.dumps(cfg.to_dict(), sort_keys=True)


def load_rollout_config(
    path: str | Path | None, overrides: Iterable[str] = (), base: RolloutConfig | None = None
) -> RolloutConfig:
    """The rollout section alone, for scripts that only roll out (launch/rollouts.py, the notebook):
    `base` <- the recipe's `rollout:` section (its other sections are checked, then ignored) <-
    `rollout.key=value` overrides, validated like a training config's."""
    cfg = TrainConfig(rollout=dataclasses.replace(base) if base is not None else RolloutConfig())
    if path is not None:
        _merge_file(cfg, Path(path))
    for item in overrides:
        if not item.strip().startswith("rollout."):
            raise ValueError(f"override {item!r}: only rollout.key=value settings apply here")
    apply_overrides(cfg, overrides)
    errors = cfg.rollout.errors("rollout.")
    if errors:
        raise ValueError("invalid rollout config:\n  " + "\n  ".join(errors))
    return cfg.rollout
