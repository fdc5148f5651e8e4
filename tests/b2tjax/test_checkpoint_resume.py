"""Resume: N steps straight == steps until a real SIGTERM + `--resume` to N (same params, same metrics).

Both runs are real `launch/train.py` subprocesses on the toy GRPO task, with async Orbax saves.
The interrupted run is sent SIGTERM as soon as its first checkpoint is committed; its handler saves
the current step and exits 143; the resumed run restores params, optimizer state, the grain
iterator position and the step counter, and must then reproduce the straight run exactly.

Both runs pack their GRPO rows (several records to a row of 128 tokens, `grpo.row_tokens`),
so the resumed steps re-pack their records exactly as the straight run did; the padded layout's
resume is checked on 2 processes (tests/b2tjax/test_multihost.py) and by tests/b2tjax/test_resume_faults.py.
"""

import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from b2tjax.run.metrics import read_metrics
from models.checkpoint import load_model
from tests.subprocess_env import subprocess_env

pytestmark = pytest.mark.slow  # resumes real training runs in subprocesses

ROOT = Path(__file__).resolve().parents[2]
STEPS = 12
ARGS = [
    "--config",
    str(ROOT / "configs" / "toy.yaml"),
    "--no-progress",
    f"steps={STEPS}",
    "checkpoint.every_steps=2",
    "checkpoint.keep=3",
    "grpo.mini_batches=2",
    "eval_at_end=false",
    "grpo.row_tokens=128",
]
COMPARED = ("reward", "loss", "logprob_gap_mean", "clip_frac", "grad_norm", "accuracy", "lr")


def _cmd(out: Path, *extra: str) -> list[str]:
    return [sys.executable, str(ROOT / "launch" / "train.py"), *ARGS, "--out", str(out), *extra]


def _committed_steps(ckpt_dir: Path) -> list[int]:
    if not ckpt_dir.exists():
        return []
    return sorted(int(p.name) for p in ckpt_dir.iterdir() if p.is_dir() and p.name.isdigit())


def test_sigterm_then_resume_matches_straight_run(tmp_path, jax_cache):
    straight, interrupted = tmp_path / "straight", tmp_path / "interrupted"
    env = subprocess_env(jax_cache)
    first = subprocess.Popen(
        _cmd(straight), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )

    second = subprocess.Popen(
        _cmd(interrupted), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.time() + 240
    while (
        not _committed_steps(interrupted / "checkpoints") and second.poll() is None and time.time() < deadline
    ):
        time.sleep(0.02)
    second.send_signal(signal.SIGTERM)
    out2, _ = second.communicate(timeout=240)
    assert second.returncode == 143, (
        f"expected the preemption exit code, got {second.returncode}:\n{out2[-3000:]}"
    )
    stopped_at = max(_committed_steps(interrupted / "checkpoints"))
    assert 2 <= stopped_at < STEPS, stopped_at

    resumed = subprocess.run(
        _cmd(interrupted, "--resume"), env=env, capture_output=True, text=True, timeout=240
    )
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    out1, _ = first.communicate(timeout=240)
    assert first.returncode == 0, out1[-3000:]

    a = load_model(straight / "checkpoints")
    b = load_model(interrupted / "checkpoints")
    from flax import nnx

    pa, pb = nnx.to_pure_dict(nnx.state(a, nnx.Param)), nnx.to_pure_dict(nnx.state(b, nnx.Param))
    jax.tree.map(
        lambda x, y: np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6), pa, pb
    )

    ma, mb = read_metrics(straight / "metrics.jsonl"), read_metrics(interrupted / "metrics.jsonl")
    assert sorted(ma) == sorted(mb) == list(range(1, STEPS + 1))
    assert all(m["rows"] < m["records"] for m in (*ma.values(), *mb.values()))  # packed rows ran
    for step in range(1, STEPS + 1):
        for key in COMPARED:
            np.testing.assert_allclose(
                mb[step][key],
                ma[step][key],
                rtol=1e-5,
                atol=1e-6,
                err_msg=f"{key} at step {step} (interrupted after step {stopped_at})",
            )
    # The run really changed the parameters and the two runs agree with the last committed step.
    assert (
        max(_committed_steps(straight / "checkpoints"))
        == STEPS
        == max(_committed_steps(interrupted / "checkpoints"))
    )
