"""Resume after faults, on a real toy run (launch/train.py, Orbax on disk).

Damaged checkpoints: of the steps 1..4 the straight run keeps, step 4 loses a file, step 3 gets its
array data truncated and step 2 loses its `params` item directory. `load_model` (what export_hf and
rollout use) must then refuse step 4 in one line rather than quietly load an older model; asked to
fall back (`fallback=True`) it restores step 1, with the parameters of the straight run's step 1, and
`--resume` must report the three skipped steps, keep them on disk, continue from step 1 and end with
the straight run's parameters and metrics, each step logged once.

SIGTERM inside a step: a driver process runs the real trainer on the digit task, whose rollout of
step 2 sends the process a real SIGTERM. The step must be abandoned before its update, step 1 kept
as the last checkpoint, and `--resume` must end where the straight run ends. The rollout engine's
own check between decode segments is tested on the real engine with a tiny model.

kill -9 between two saves: the trainer is killed inside step 4, after step 3's asynchronous save;
step 3 was sealed when its save committed, so a plain `--resume` continues from it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from b2tjax.run.metrics import read_metrics
from tests.rollout_fixtures import ANSWER, engine_config, forced_episode, rollout_setup  # noqa: F401, F811
from tests.subprocess_env import subprocess_env

pytestmark = pytest.mark.slow  # kills and resumes training runs

ROOT = Path(__file__).resolve().parents[2]
STEPS = 4  # the fewest that keep three damaged steps and an intact one before them
ARGS = [
    "--config",
    str(ROOT / "configs" / "toy.yaml"),
    "--no-progress",
    f"steps={STEPS}",
    "checkpoint.every_steps=1",
    "checkpoint.keep=4",
    "eval_at_end=false",
]


def _train(out: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(subprocess_env(cache), PYTHONPATH=str(ROOT))
    command = [sys.executable, str(ROOT / "launch" / "train.py"), *ARGS, "--out", str(out), *extra]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)


def _params(directory: Path, step: int | None = None, fallback: bool = False) -> dict:
    from flax import nnx

    from models.checkpoint import load_model

    return nnx.to_pure_dict(nnx.state(load_model(directory, step=step, fallback=fallback), nnx.Param))


def _assert_same(a: dict, b: dict) -> None:
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(x), np.asarray(y)), a, b)


def _damage(ckpt: Path) -> None:
    """Three kinds of damage, one per newest step."""
    (ckpt / "4" / "params" / "manifest.ocdbt").unlink()
    data = max((p for p in (ckpt / "3" / "params").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    shutil.rmtree(ckpt / "2" / "params")


@pytest.fixture(scope="module")
def straight_run(tmp_path_factory, jax_cache) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("fallback")
    result = _train(root / "straight", jax_cache)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    steps = sorted(int(p.name) for p in (root / "straight" / "checkpoints").iterdir() if p.name.isdigit())
    assert steps == [1, 2, 3, 4]
    return root / "straight", jax_cache


def test_load_model_skips_damaged_steps(tmp_path, straight_run, capfd):
    straight, _ = straight_run
    damaged = tmp_path / "damaged"
    shutil.copytree(straight, damaged)
    _damage(damaged / "checkpoints")
    from models.checkpoint import CheckpointError

    with pytest.raises(CheckpointError, match=r"step 4 .* does not restore .*\[1, 2, 3\]"):
        _params(damaged / "checkpoints")
    capfd.readouterr()
    restored = _params(damaged / "checkpoints", fallback=True)
    report = capfd.readouterr().err
    _assert_same(restored, _params(straight / "checkpoints", step=1))
    for step in (4, 3, 2):
        assert f"skipping checkpoint step {step} " in report, report
    assert all((damaged / "checkpoints" / str(s)).is_dir() for s in (2, 3, 4))  # reported, never deleted


def test_resume_continues_from_newest_intact_step(tmp_path, straight_run):
    straight, cache = straight_run
    damaged = tmp_path / "damaged"
    shutil.copytree(straight, damaged)
    _damage(damaged / "checkpoints")
    result = _train(damaged, cache, "--resume")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    for step in (4, 3, 2):
        assert sum(f"skipping checkpoint step {step} " in line for line in lines) == 1, result.stdout[-3000:]
        assert (damaged / "checkpoints.unrestorable" / str(step)).is_dir()  # set aside, kept
    assert "resuming from step 1" in lines
    _assert_same(_params(damaged / "checkpoints"), _params(straight / "checkpoints"))
    records = [json.loads(line) for line in (damaged / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, STEPS + 1))  # the redone steps appear once
    expected, got = read_metrics(straight / "metrics.jsonl"), read_metrics(damaged / "metrics.jsonl")
    for step in range(1, STEPS + 1):
        np.testing.assert_allclose(got[step]["loss"], expected[step]["loss"], rtol=1e-6, atol=1e-7)


DRIVER = """
import os, signal, sys
from b2tjax.config import load_config
from b2tjax.tasks.toy import DigitTask
from b2tjax.run.trainer import Preempted, Trainer, build_model

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


def test_sigterm_mid_step_saves_last_completed_step(tmp_path, straight_run):
    straight, cache = straight_run
    run = tmp_path / "run"
    overrides = [a for a in ARGS[2:] if "=" in a]
    stopped = subprocess.run(
        [sys.executable, "-c", DRIVER, ARGS[1], *overrides, f"out={run}"],
        env=dict(subprocess_env(cache), PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert stopped.returncode == 143, (stopped.stdout + stopped.stderr)[-3000:]
    assert "preempted during step 2: saved step 1" in stopped.stdout, stopped.stdout[-3000:]
    assert sorted(int(p.name) for p in (run / "checkpoints").iterdir() if p.name.isdigit()) == [1]
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1]

    resumed = _train(run, cache, "--resume")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert "resuming from step 1" in resumed.stdout.splitlines()
    _assert_same(_params(run / "checkpoints"), _params(straight / "checkpoints"))


def test_engine_stops_between_segments(rollout_setup):  # noqa: F811
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


KILL_DRIVER = """
import os, signal, sys, time
from b2tjax.config import load_config
from b2tjax.tasks.toy import DigitTask
from b2tjax.run.trainer import Trainer, build_model

class KillDuringRollout(DigitTask):
    calls = 0

    def rollout(self, *args, **kwargs):
        KillDuringRollout.calls += 1
        if KillDuringRollout.calls == 4:  # step 3 saved (async); the OOM killer strikes in step 4
            manifest = os.path.join(cfg.out, "checkpoints", "3", "b2t_checksums.json")
            deadline = time.monotonic() + 60  # the rollout goes on meanwhile; the next save is far
            while time.monotonic() < deadline and not os.path.exists(manifest):
                time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGKILL)
        return super().rollout(*args, **kwargs)

cfg = load_config(sys.argv[1], sys.argv[2:])
task = KillDuringRollout(cfg.toy, cfg.rollout.temperature)
Trainer(cfg, task, build_model(cfg, cfg.toy.vocab_size), progress=False).run()
"""


def test_kill_9_between_two_saves_then_a_plain_resume_continues_from_the_newest_step(tmp_path, straight_run):
    """kill -9 inside step 4, after step 3's async save: a plain --resume continues from step 3 (no
    step set aside, no --trust-unverified) and ends where the straight run ends."""
    straight, cache = straight_run
    run = tmp_path / "run"
    overrides = [a for a in ARGS[2:] if "=" in a]
    killed = subprocess.run(
        [sys.executable, "-c", KILL_DRIVER, ARGS[1], *overrides, f"out={run}"],
        env=dict(subprocess_env(cache), PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode == -9, (killed.stdout + killed.stderr)[-3000:]
    resumed = _train(run, cache, "--resume")
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
    assert "resuming from step 3" in resumed.stdout.splitlines(), resumed.stdout[-3000:]
    assert not (run / "checkpoints.unrestorable").exists()
    _assert_same(_params(run / "checkpoints"), _params(straight / "checkpoints"))
