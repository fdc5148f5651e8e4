"""The training config, split by job: `schema` (the sections and their knobs, each with its type,
choices and range), `loader` (YAML recipes with `base:` and `key=value` overrides, converted by
annotation) and `checks` (`validate`: every declared range, then the rules between knobs). launch/
`freeze`s the resolved config (models.frozen): from then on an assignment to it raises."""

from b2tjax.config.checks import validate
from b2tjax.config.loader import (
    apply_overrides,
    config_from_dict,
    config_json,
    dump_config,
    load_config,
    load_rollout_config,
)
from b2tjax.config.schema import (
    CheckpointConfig,
    DataConfig,
    GRPOConfig,
    HardwareConfig,
    MeshConfig,
    ModelConfig,
    OptimConfig,
    SFTConfig,
    ToyConfig,
    TrainConfig,
)
from models.frozen import FrozenConfigError, freeze

__all__ = [
    "CheckpointConfig",
    "DataConfig",
    "GRPOConfig",
    "HardwareConfig",
    "MeshConfig",
    "ModelConfig",
    "OptimConfig",
    "SFTConfig",
    "ToyConfig",
    "FrozenConfigError",
    "TrainConfig",
    "apply_overrides",
    "config_from_dict",
    "config_json",
    "dump_config",
    "freeze",
    "load_config",
    "load_rollout_config",
    "validate",
]
