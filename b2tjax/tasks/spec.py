"""What a benchmark task reads of the run: small frozen values the reader (b2tjax.run.task_build)
makes once from the TrainConfig, so a task never holds the whole config."""

from __future__ import annotations

import dataclasses
from typing import Any

from rollout.config import RolloutConfig


@dataclasses.dataclass(frozen=True)
class DataSpec:
    """Which instances a run trains and is evaluated on (`data:`); a split limit of 0 keeps all."""

    train_split: str
    max_train_instances: int
    eval_split: str  # "" = the benchmark's own
    eval_instances: int
    difficulties: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class RewardSpec:
    """The reward's ablation switches (`grpo.action_penalty`, `grpo.format_gate`)."""

    action_penalty: bool = True
    format_gate: bool = True


@dataclasses.dataclass(frozen=True)
class SftSpec:
    """How warm-start traces are cut (`sft.max_examples`, 0 = all; `sft.max_seq_len`)."""

    max_examples: int
    max_seq_len: int


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """Everything a BenchmarkTask and its agent read: the splits, the engine's settings (the run's
    `rollout:` section, a copy), the reward, the warm start and the sampler's mesh (None: no mesh)."""

    data: DataSpec
    rollout: RolloutConfig
    reward: RewardSpec
    sft: SftSpec
    mesh: Any = None  # jax.sharding.Mesh, built by the run (b2tjax.run.mesh.rollout_mesh)
