"""One SFT step of the LoRA trainer's step functions, the base passed frozen apart: what the LoRA
tests of dense Qwen3 and of Qwen3-MoE train with."""

from __future__ import annotations

import numpy as np
from flax import nnx

from b2tjax.config import GRPOConfig, OptimConfig
from b2tjax.step.batch import TrainBatch
from b2tjax.step.optim import learning_rate_schedule, make_optimizer
from b2tjax.step.train_step import BoundModel, init_train_state, make_step_fns


def lora_sft_step(model: nnx.Module, ids: np.ndarray):
    """(model_fn, params, frozen, state, (new state, metrics)) of one SFT step on `ids` [B, T],
    every token but the first trained."""
    model_fn, params = BoundModel.from_model(model)
    frozen = BoundModel.frozen_of(model)
    ocfg = OptimConfig(lr=1e-2, warmup_steps=0, weight_decay=0.1)
    opt = make_optimizer(ocfg, 10)
    fns = make_step_fns(
        model_fn,
        opt,
        learning_rate_schedule(ocfg, 10),
        GRPOConfig(logprob_chunk=8),
        temperature=1.0,
        fixed_length=ids.shape[1],
        frozen=frozen,
    )
    state = init_train_state(params, opt)
    mask = np.ones(ids.shape, np.float32)
    mask[:, 0] = 0
    batch = TrainBatch(ids, mask).split(1)
    return model_fn, params, frozen, state, fns.sft_step(state, fns.shard_batch(batch))
