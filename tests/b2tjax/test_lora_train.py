"""A LoRA training run of the real Trainer (toy GRPO task): checkpoints hold the adapters only, a
resume reproduces the straight run bit for bit, and a resume on other base weights is refused."""

from __future__ import annotations

import shutil
from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from b2tjax.config import load_config
from b2tjax.errors import UserError
from b2tjax.run.trainer import Trainer, build_model
from b2tjax.tasks.toy import DigitTask

pytestmark = pytest.mark.slow  # trains LoRA runs

ROOT = Path(__file__).resolve().parents[2]
RUN = (
    "steps=4",
    "checkpoint.every_steps=2",
    "checkpoint.keep=3",
    "checkpoint.async_save=false",
    "eval_at_end=false",
    "grpo.beta=0.05",  # the KL reference is the base: adapters switched off
    "model.lora.rank=4",
    "model.lora.alpha=8",
)


def _train(out: Path, *extra: str, resume: bool = False):
    cfg = load_config(ROOT / "configs" / "toy.yaml", [*RUN, f"out={out}", *extra])
    task = DigitTask(cfg.toy, cfg.rollout.temperature)
    return Trainer(cfg, task, build_model(cfg, cfg.toy.vocab_size), resume=resume, progress=False).run()


def _params(out: Path, step: int) -> dict:
    with ocp.PyTreeCheckpointer() as ckptr:
        return ckptr.restore((out / "checkpoints" / str(step) / "params").absolute())


def test_lora_resume_is_exact_and_refuses_another_base(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    _train(straight)
    final = _params(straight, 4)
    # the checkpoint holds the adapters only: every leaf is an A or a B matrix
    names = [jax.tree_util.keystr(path) for path, _ in jax.tree_util.tree_flatten_with_path(final)[0]]
    assert names and all("_lora_" in n for n in names), names
    shutil.copytree(straight, resumed)
    shutil.rmtree(resumed / "checkpoints" / "4")  # as if the run had stopped after step 2
    _train(resumed, resume=True)
    jax.tree.map(np.testing.assert_array_equal, _params(resumed, 4), final)
    assert not np.array_equal(_params(straight, 2)["layers"]["mlp"]["up_proj_lora_b"], 0)

    with pytest.raises(UserError, match=r"^--resume refused: checkpoint step 4 was trained on preset:tiny"):
        _train(resumed, "model.overrides={vocab_size: 16, initializer_range: 0.05}", resume=True)
