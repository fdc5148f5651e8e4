"""Shared pieces of the lookup-task tests (b2tjax/tasks/toy_tools.py): the measured training recipe, a
helper running the real Trainer on it, and a compilation cache shared by the modules' runs."""

from __future__ import annotations

from pathlib import Path

import jax
import pytest

from b2tjax.config import TrainConfig, apply_overrides, validate
from b2tjax.run.metrics import read_metrics
from b2tjax.run.trainer import RunResult, Trainer, build_model
from b2tjax.tasks.toy_tools import LookupTask

NUM_VALUES = 4
# The fewest GRPO steps at which the suite's measured seeds still meet its bar (last 3 steps' mean
# success and greedy success >= 0.9; the cosine schedule ends at this step): at 17, synchronous seed 0
# 0.93 / 0.96, streaming S=2 seed 1 0.97 / 1.00, S=1 seed 0 meets it at 14; at 14, synchronous
# seed 0 stalls at 0.88.
GRPO_STEPS = 17
# Measured recipe: SFT reaches the protocol's entropy floor (ln(num_values) on the answer token) in
# ~40 steps; GRPO with 8 prompts x 16 samples and 4 epochs per batch passes 0.9 success within 10-16
# steps for seeds 0-2 (with fewer samples per prompt or fewer epochs, some seeds plateau near 0.8).
RECIPE = (
    "sft.steps=100",
    "sft.batch_size=16",
    "sft.optim.lr=1e-2",
    "sft.optim.warmup_steps=2",
    "rollout.prompts_per_step=8",
    "rollout.group_size=16",
    "rollout.max_seq_len=64",
    "optim.lr=3e-3",
    "optim.warmup_steps=2",
    "grpo.epochs=4",
    "checkpoint.every_steps=1000",
    "checkpoint.async_save=false",
)
# Short runs for tests that need records or metrics files, not learning. The step counts are baked
# into the jitted steps (learning-rate schedule), so all short runs share one set of programs.
SHORT_RUN = ("sft.steps=20", "steps=2", "eval_at_end=false")


def train_lookup(out: Path, task: LookupTask, seed: int, overrides=()) -> tuple[list[dict], RunResult]:
    """One SFT + GRPO run of RECIPE (+ overrides); returns (GRPO metrics rows in step order, result)."""
    cfg = TrainConfig(task="toy", mode="sft_grpo", seed=seed, steps=GRPO_STEPS, out=str(out))
    model_shape = f"model.overrides={{vocab_size: {task.tokenizer.vocab_size}, initializer_range: 0.1}}"
    validate(apply_overrides(cfg, [model_shape, *RECIPE, *overrides]))
    result = Trainer(cfg, task, build_model(cfg), progress=False).run()
    rows = [row for _, row in sorted(read_metrics(out / "metrics.jsonl", phase="grpo").items())]
    return rows, result


@pytest.fixture(scope="session")
def xla_cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("xla_cache")


@pytest.fixture(scope="module")
def shared_compilations(xla_cache_dir):
    """Every Trainer jits its own step functions; a persistent compilation cache lets the runs of a
    module (and of later lookup modules) compile each program once. Restored after the module."""
    from jax.experimental.compilation_cache import compilation_cache

    settings = {
        "jax_compilation_cache_dir": str(xla_cache_dir),
        "jax_persistent_cache_min_compile_time_secs": 0.0,
        "jax_persistent_cache_min_entry_size_bytes": 0,
    }
    before = {name: getattr(jax.config, name) for name in settings}
    for name, value in settings.items():
        jax.config.update(name, value)
    compilation_cache.reset_cache()
    yield
    for name, value in before.items():
        jax.config.update(name, value)
    compilation_cache.reset_cache()
