"""GRPO learns multi-turn tool use: the lookup task (b2tjax/toy_tools.py) through the real RolloutEngine,
episode environment and Trainer, on a tiny Qwen3 (2 layers, hidden 64).

The reward needs the value the `lookup` tool returned, drawn at random per episode. An SFT warm start
on scripted demonstrations teaches only the protocol (their answers are random values), so the policy
starts at chance (1 / num_values); GRPO must teach it to read the environment reply (mask-0 tokens).
Controls: a blind policy (the reply padded out in its context) stays at chance under the same training,
and the loss mask decides whether the environment tokens get a weight in the GRPO loss.
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from b2tjax import grpo
from b2tjax.config import TrainConfig, apply_overrides
from b2tjax.metrics import read_metrics
from b2tjax.toy_tools import LookupConfig, LookupTask
from b2tjax.trainer import Trainer, build_model

NUM_VALUES = 4
CHANCE = 1 / NUM_VALUES
GRPO_STEPS = 16
# Measured recipe: SFT reaches the protocol's entropy floor in ~40 steps; GRPO with 16 samples per
# prompt and 4 epochs per batch reaches ~1.0 success within ~10 steps for seeds 0-2.
RECIPE = ["sft.steps=100", "sft.batch_size=16", "sft.optim.lr=1e-2", "sft.optim.warmup_steps=2",
          "rollout.prompts_per_step=8", "rollout.group_size=16", "rollout.max_seq_len=64",
          "optim.lr=3e-3", "optim.warmup_steps=2", "grpo.epochs=4",
          "checkpoint.every_steps=1000", "checkpoint.async_save=false"]


@pytest.fixture(scope="module", autouse=True)
def shared_compilations(tmp_path_factory):
    """Every Trainer jits its own step functions; a persistent compilation cache lets this module's
    runs compile each program once (identical programs hit the cache). Restored afterwards."""
    from jax.experimental.compilation_cache import compilation_cache

    settings = {"jax_compilation_cache_dir": str(tmp_path_factory.mktemp("xla_cache")),
                "jax_persistent_cache_min_compile_time_secs": 0.0,
                "jax_persistent_cache_min_entry_size_bytes": 0}
    before = {name: getattr(jax.config, name) for name in settings}
    for name, value in settings.items():
        jax.config.update(name, value)
    compilation_cache.reset_cache()
    yield
    for name, value in before.items():
        jax.config.update(name, value)
    compilation_cache.reset_cache()


def _train(out, task: LookupTask, seed: int, overrides=()):
    """One SFT + GRPO run of the recipe; returns (GRPO metrics rows in step order, RunResult)."""
    cfg = TrainConfig(task="toy", mode="sft_grpo", seed=seed, steps=GRPO_STEPS, out=str(out))
    model_shape = f"model.overrides={{vocab_size: {task.tokenizer.vocab_size}, initializer_range: 0.1}}"
    apply_overrides(cfg, [model_shape, *RECIPE, *overrides]).validate()
    result = Trainer(cfg, task, build_model(cfg), progress=False).run()
    rows = [row for _, row in sorted(read_metrics(out / "metrics.jsonl", phase="grpo").items())]
    return rows, result


@pytest.mark.parametrize("seed", [0, 1])
def test_grpo_learns_to_use_the_tool(tmp_path, seed):
    rows, result = _train(tmp_path, LookupTask(LookupConfig(num_values=NUM_VALUES)), seed)
    success = [row["success"] for row in rows]
    assert len(success) == GRPO_STEPS
    # After SFT the protocol is right (it looks the key up) but the answer is a guess: near chance.
    assert rows[0]["lookup_rate"] >= 0.9
    assert success[0] < CHANCE + 0.15
    # GRPO makes the policy use the reply: sampled success >= 0.9 at the end, and greedy too.
    assert np.mean(success[-3:]) >= 0.9, success
    assert result.eval_metrics["success"] >= 0.9
    assert all(row["logprob_gap_mean"] < 1e-3 for row in rows)  # sampler and trainer agree


def test_blind_policy_stays_at_chance(tmp_path):
    """Same task, same training, but the reply's tokens are padding in the policy's context."""
    rows, result = _train(tmp_path, LookupTask(LookupConfig(num_values=NUM_VALUES, blind=True)), seed=0)
    assert all(row["lookup_rate"] >= 0.9 for row in rows[-3:])  # it still follows the protocol ...
    assert np.mean([row["success"] for row in rows[-5:]]) < CHANCE + 0.1  # ... and cannot beat chance
    assert result.eval_metrics["success"] < 0.5


class _KeepingTask(LookupTask):
    """The lookup task, keeping the records of its last rollout for inspection."""

    def rollout(self, *args, **kwargs):
        self.last = super().rollout(*args, **kwargs)
        return self.last


@pytest.mark.parametrize("loss_mask", [True, False])
def test_loss_mask_decides_which_tokens_get_weight(tmp_path, monkeypatch, loss_mask):
    """The per-token weights of the GRPO loss, computed from the batch the trainer's real step got:
    environment-reply tokens weigh 0 with the mask on and > 0 with it off; prompts never weigh."""
    import b2tjax.trainer

    batches = []
    real_make_step_fns = b2tjax.trainer.make_step_fns

    def recording_make_step_fns(*args, **kwargs):
        fns = real_make_step_fns(*args, **kwargs)
        step = fns.grpo_step

        def recording_step(state, batch):
            batches.append(jax.device_get(batch))
            return step(state, batch)

        fns.grpo_step = recording_step
        return fns

    monkeypatch.setattr(b2tjax.trainer, "make_step_fns", recording_make_step_fns)
    task = _KeepingTask(LookupConfig(num_values=NUM_VALUES))
    overrides = ["sft.steps=40", "steps=1", "grpo.epochs=1", f"grpo.loss_mask={str(loss_mask).lower()}"]
    _train(tmp_path, task, seed=0, overrides=overrides)

    records = {tuple(r.ids): r for r in task.last.records}
    assert sum(r.prompt_len < len(r.ids) - r.num_sampled for r in records.values()) > 0  # some replies exist
    (batch,) = batches
    mask = batch["mask"]
    weights = np.asarray(grpo.token_weights(mask, "seq_mean_token_mean", grpo.batch_normaliser(mask, 64)))
    for ids, w in zip(batch["ids"].reshape(-1, mask.shape[-1]), weights.reshape(-1, mask.shape[-1])):
        # rows are shuffled into mini-batches: find each row's record (the longest one it starts with)
        record = max((r for key, r in records.items() if list(key) == ids[:len(key)].tolist()),
                     key=lambda r: len(r.ids))
        n = len(record.ids)
        sampled = np.asarray(record.loss_mask, bool)
        environment = ~sampled & (np.arange(n) >= record.prompt_len)
        assert np.all(w[:record.prompt_len] == 0) and np.all(w[n:] == 0)
        assert np.all(w[:n][sampled] > 0)
        if loss_mask:
            assert np.all(w[:n][environment] == 0)
        else:
            assert np.all(w[:n][environment] > 0)
