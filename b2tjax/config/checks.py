"""Every check of a loaded training config, each problem one line naming its key.

Types and choices are checked as values load (b2tjax.config.loader), every knob's declared range
and choices by models.fields.field_errors (the one checker of what the schema's annotations say);
what is left here is what one field cannot say: how knobs and sections must agree with each other.
"""

from __future__ import annotations

from b2tjax.config.schema import TrainConfig
from models.config import get_config
from models.fields import field_errors
from rollout.config import RolloutConfig
from sandbox.benchmarks import BENCHMARKS, BenchmarkError, benchmark_class
from sandbox.himap.kinds import ROLES
from sandbox.himap.options import HimapOptions


def validate(cfg: TrainConfig) -> TrainConfig:
    """`cfg`, or a ValueError listing every setting that would only fail deep inside a long run."""
    errors = config_errors(cfg)
    if errors:
        raise ValueError("invalid training config:\n  " + "\n  ".join(errors))
    return cfg


def config_errors(cfg: TrainConfig) -> list[str]:
    """Settings that would only fail deep inside a long run, one line each; [] when all is well."""
    batch = _batch_errors(cfg)
    fields = field_errors(cfg)
    if any(e.startswith("rollout.group_size ") for e in batch):  # GRPO's bound says it all: one line
        fields = [e for e in fields if not e.startswith("rollout.group_size ")]
    return (
        batch
        + fields
        + _benchmark_errors(cfg)
        + cfg.rollout.length_errors("rollout.")
        + cfg.model.lora.errors()
        + _rope_errors(cfg)
        + _model_overrides_errors(cfg)
        + _agent_errors(cfg)
        + _placement_errors(cfg)
    )


def _placement_errors(cfg: TrainConfig) -> list[str]:
    """The split placement (`mesh.rollout_devices` > 0) and what it cannot be combined with; the
    device counts are checked when the meshes are built (b2tjax/run/mesh.py: half of each process's)."""
    if not cfg.mesh.rollout_devices or not cfg.model.lora.enabled:
        return []
    return [
        "mesh.rollout_devices > 0 needs full fine-tuning (model.lora.rank=0): a LoRA sampler uses the "
        "frozen base in place, which the split placement would have to copy to the rollout devices"
    ]


def _batch_errors(cfg: TrainConfig) -> list[str]:
    """The rollout batch splits into mini- and micro-batches; GRPO needs a group and a temperature."""
    mini_batches = max(cfg.grpo.mini_batches, 1)  # < 1 is reported by its range; no division by zero
    checks = [
        (
            cfg.rollout.group_size >= 2,
            f"rollout.group_size must be >= 2, got {cfg.rollout.group_size} "
            "(GRPO's advantages are relative to the group)",
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
        (
            cfg.rollout.max_staleness >= 1 or not cfg.rollout.decode_during_update,
            "rollout.decode_during_update=true needs rollout.max_staleness >= 1 (the tokens decoded "
            "during an update are one update old when the next step trains on them)",
        ),
        (cfg.rollout.temperature > 0, "rollout.temperature must be > 0 (training samples its groups)"),
    ]
    return [message for ok, message in checks if not ok]


def _rope_errors(cfg: TrainConfig) -> list[str]:
    """A factor or window without a scaling kind would be silently ignored."""
    rope = cfg.model.rope_scaling
    if rope.kind == "none" and (rope.factor != 1.0 or rope.original_max_positions):
        return [
            "model.rope_scaling.factor and original_max_positions need kind linear or yarn; "
            f"got kind none with factor {rope.factor}, original_max_positions {rope.original_max_positions}"
        ]
    return []


def _model_overrides_errors(cfg: TrainConfig) -> list[str]:
    """`model.overrides` checked as the config.json numbers they stand for (finite, typed, in
    range) when the config loads, not when the model is built after the run directory is written."""
    if cfg.model.init:
        return []
    try:
        get_config(cfg.model.preset, **cfg.model.overrides)
    except KeyError as err:
        return [f"model.preset: {err.args[0]}"]
    except (TypeError, ValueError) as err:
        return [f"model.overrides: {err}"]
    return []


def _benchmark_errors(cfg: TrainConfig) -> list[str]:
    """The benchmark exists (and is installed) and offers the prompt style."""
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
    for role in ROLES:
        errors += himap.limits(role).errors(f"himap.{role}_limits.", rollout, "rollout.")
    return errors


def _himap_benchmarks() -> list[str]:
    """The registered benchmarks that offer HiMAP (a registry query: a new benchmark needs no edit here)."""
    return [name for name in sorted(BENCHMARKS) if benchmark_class(name).offers_himap()]
