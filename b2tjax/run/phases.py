"""The jitted steps of a run's two phases (config.schema.Phase: SFT, GRPO), built from the run's config.

Its own module because `launch/plan.py` (b2tjax.plan.memory_plan) compiles these very functions
ahead of time: what the plan measures is what the run executes.
"""

from __future__ import annotations

from typing import Any

from b2tjax.config import TrainConfig
from b2tjax.config.schema import Phase
from b2tjax.step.optim import learning_rate_schedule, make_optimizer
from b2tjax.step.train_step import BoundModel, StepFns, make_step_fns


def phase_optimizer(cfg: TrainConfig, phase: Phase, steps: int) -> tuple[Any, Any]:
    """(optimizer, schedule) of the SFT or GRPO phase, decaying over `steps` optimizer steps."""
    optim_cfg = cfg.sft.optim if phase == Phase.SFT else cfg.optim
    return make_optimizer(optim_cfg, max(steps, 1)), learning_rate_schedule(optim_cfg, max(steps, 1))


def phase_step_fns(
    cfg: TrainConfig,
    model_fn: BoundModel,
    optimizer,
    schedule,
    state_sharding,
    mesh,
    valid_vocab: int | None = None,
    frozen=None,
) -> StepFns:
    """The jitted steps of a run; launch/plan.py compiles these same functions ahead of time.
    `frozen`: LoRA's frozen base (BoundModel.frozen_of), passed to every step."""
    return make_step_fns(
        model_fn,
        optimizer,
        schedule,
        cfg.grpo,
        temperature=cfg.rollout.temperature,
        fixed_length=cfg.grpo.fixed_length or cfg.rollout.max_seq_len,
        state_sharding=state_sharding,
        mesh=mesh,
        valid_vocab=valid_vocab,
        frozen=frozen,
        load_balance_weight=cfg.model.moe.load_balance_loss_weight,
    )
