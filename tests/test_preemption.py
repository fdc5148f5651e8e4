"""SIGTERM inside a GRPO step (issue 10, item 12): the step is abandoned before its first update, the last
completed step is saved, the process exits 143, and `--resume` ends where a straight run ends.

The signal is real and comes mid-step at a known point: the driver process runs the real trainer on
the digit task, whose rollout of step 2 sends the process SIGTERM. The rollout engine's own check
between decode segments is tested on the real engine with a tiny model.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from tests.rollout_fixtures import ANSWER, engine_config, forced_episode, rollout_setup  # noqa: F401, F811
from tests.test_checkpoint_resume import _env

ROOT = Path(__file__).resolve().parents[1]
STEPS = 4
CONFIG = str(ROOT / "configs" / "toy.yaml")
OVERRIDES = [f"steps={STEPS}", "grpo.mini_batches=2", "eval_at_end=false"]

DRIVER = """
import os, signal, sys
from b2tjax.config import load_config
from b2tjax.toy import DigitTask
from b2tjax.trainer import Preempted, Trainer, build_model

class SignalDuringRollout(DigitTask):
    calls = 0

    def rollout(self, *args, **kwargs):
        SignalDuringRollout.calls += 1
        if SignalDuringRollout.calls == 2:  # a preemption notice in the middle of step 2
            os.kill(os.getpid(), signal.SIGTERM)
        return super().rollout(*args, **kwargs)

cfg = load_config(sys.argv[1], sys.argv[2:])
task = SignalDuringRollout(cfg.toy, cfg.rollout.temperature)
try:
    Trainer(cfg, task, build_model(cfg, cfg.toy.vocab_size), progress=False).run()
except Preempted:
    sys.exit(143)
"""


def _steps(ckpt: Path) -> list[int]:
    return sorted(int(p.name) for p in ckpt.iterdir() if p.name.isdigit())


def _train_cmd(out: Path, *extra: str) -> list[str]:
    return [sys.executable, str(ROOT / "launch" / "train.py"), "--config", CONFIG, "--no-progress",
            *OVERRIDES, "--out", str(out), *extra]


def test_sigterm_mid_step_saves_last_completed_step(tmp_path):
    env = dict(_env(tmp_path / "jax_cache"), PYTHONPATH=str(ROOT))
    straight = subprocess.Popen(_train_cmd(tmp_path / "straight"), env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    run = tmp_path / "run"
    stopped = subprocess.run([sys.executable, "-c", DRIVER, CONFIG, *OVERRIDES, f"out={run}"], env=env,
                             capture_output=True, text=True, timeout=600)
    output = stopped.stdout + stopped.stderr
    assert stopped.returncode == 143, output[-3000:]
    assert "preempted during step 2: saved step 1" in stopped.stdout, output[-3000:]
    assert _steps(run / "checkpoints") == [1]  # toy.yaml saves every 5 steps: this is the SIGTERM save
    assert [line for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()][-1].startswith(
        '{"step": 1,')

    resumed = subprocess.run(_train_cmd(run, "--resume"), env=env, capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert "resuming from step 1" in resumed.stdout
    out, _ = straight.communicate(timeout=600)
    assert straight.returncode == 0, out[-3000:]

    from flax import nnx

    from models.checkpoint import load_model

    a, b = (nnx.to_pure_dict(nnx.state(load_model(d / "checkpoints"), nnx.Param))
            for d in (tmp_path / "straight", run))
    jax.tree.map(lambda x, y: np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6),
                 a, b)


def test_engine_stops_between_segments(rollout_setup):
    from rollout import RolloutEngine
    from rollout.engine import RolloutStopped

    def episodes():  # two sampled turns each, then an answer: several decode segments
        return [forced_episode(rollout_setup, f"ep{i}", f"Plan trip {i}.", {2: ANSWER}) for i in range(2)]

    engine = RolloutEngine(rollout_setup.model, rollout_setup.tokenizer, engine_config())
    engine.run(episodes(), rng=0)
    assert engine.stats.segments >= 2
    polls = []

    def stop_now() -> bool:
        polls.append(1)
        return True

    with pytest.raises(RolloutStopped):
        engine.run(episodes(), rng=0, should_stop=stop_now)
    assert len(polls) == 1  # stopped after the first segment, not at the end of the rollout
