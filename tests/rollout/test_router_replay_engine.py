"""Router replay in the rollout engine: with `router_replay: replay` every record of a tiny fp32
Qwen3-MoE carries, for each of its tokens (prompt, sampled, environment), the experts that a
teacher-forced forward of the record's ids chooses, for a group sharing its prompt (copied between
rows by prefix reuse); the JSON form restores them; a dense model refuses replay."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rollout.record import EpisodeRecord
from tests.rollout_fixtures import ANSWER, SEARCH, engine_config, forced_episode, rollout_setup  # noqa: F401


def _moe_model(setup):
    from models.moe_config import MoeConfig
    from tests.models.test_router_replay import random_model

    moe = MoeConfig(num_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, norm_topk_prob=True)
    return random_model(dataclasses.replace(setup.model.config, moe=moe), 0.1, seed=1)


def _group(setup, size: int):
    """A GRPO group on one prompt: a forced search, a free turn (T=1, own seeds), a forced answer."""
    prompt = "Plan a 3-day trip from Shanghai to Chengdu for two people, budget 6000 CNY. " * 2
    return [forced_episode(setup, f"g{i}", prompt, {0: SEARCH, 2: ANSWER}) for i in range(size)]


def test_records_carry_the_routes_of_a_teacher_forced_forward(rollout_setup):
    from rollout import RolloutEngine

    model = _moe_model(rollout_setup)
    engine = RolloutEngine(
        model, rollout_setup.tokenizer, engine_config(temperature=1.0, router_replay="replay")
    )
    records = engine.run(_group(rollout_setup, 3), rng=5)
    assert engine.stats.reused_tokens > 0  # the prompt was copied, not computed, in some rows
    assert len({tuple(r.ids) for r in records}) > 1 and all(r.num_sampled > 0 for r in records)
    # teacher-forced, the records padded at their ends to one batch (causal: their tokens' routes
    # are the record's alone)
    ids = np.zeros((len(records), max(len(r.ids) for r in records)), np.int32)
    for i, r in enumerate(records):
        ids[i, : len(r.ids)] = r.ids
    teacher = np.asarray(nnx.jit(lambda m, ids: m.routed_forward(ids)[1][1])(model, jnp.asarray(ids)))
    for record, expected in zip(records, teacher, strict=True):
        # every token up to the last model call: past the last sampled token, the forced answer
        computed = len(record.routes)
        last_sampled = np.flatnonzero(record.loss_mask)[-1]
        assert record.routes.dtype == np.uint8 and record.routes.shape[1:] == (2, 2)
        assert last_sampled < computed <= len(record.ids) and record.prompt_len < last_sampled
        np.testing.assert_array_equal(np.sort(record.routes, -1), np.sort(expected[:computed], -1))
        back = EpisodeRecord.from_json(record.to_json())
        assert back.routes.dtype == np.uint8
        np.testing.assert_array_equal(back.routes, record.routes)

    assert "routes" not in EpisodeRecord("off").to_json()  # replay off: records as before
    with pytest.raises(ValueError, match="router_replay: replay needs a Qwen3-MoE"):
        RolloutEngine(rollout_setup.model, rollout_setup.tokenizer, engine_config(router_replay="replay"))
