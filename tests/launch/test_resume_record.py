"""`--resume` continues exactly the recorded run: a changed key is refused with
the list of differences, a changed model shape in one line naming the key and both values, without
a traceback or Orbax's shutdown noise; the keys documented as safe are accepted and written to the
run's history, and the run's config.yaml, eval.json and report are never rewritten. Real
`launch/train.py` subprocesses on the toy task."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from b2tjax.run.resume import SAFE_TO_CHANGE, ResumePoint, check_changes, config_changes, is_safe
from tests.subprocess_env import subprocess_env

ROOT = Path(__file__).resolve().parents[2]
# a constant learning rate (no warmup, no decay): an extended run's rebuilt schedule is the straight run's
RUN = [
    *("--config", str(ROOT / "configs" / "toy.yaml"), "--no-progress", "steps=2", "checkpoint.every_steps=1"),
    *("optim.warmup_steps=0", "optim.final_lr_ratio=1.0"),
]


def _train(out: Path, env: dict, *extra: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, str(ROOT / "launch" / "train.py"), *RUN, "--out", str(out), *extra]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def run(tmp_path_factory, jax_cache) -> tuple[Path, dict]:
    """A finished 2-step toy run (with its eval.json) and the environment its resumes share."""
    tmp = tmp_path_factory.mktemp("resume_record")
    env = subprocess_env(jax_cache)
    done = _train(tmp / "run", env)
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp / "run", env


def _record(out: Path) -> dict[str, bytes]:
    return {name: (out / name).read_bytes() for name in ("config.yaml", "eval.json")}


def _refused(result: subprocess.CompletedProcess) -> str:
    """The one stderr line of a refusal (exit 2, no traceback, no asyncio/TensorStore dump)."""
    everything = result.stdout + result.stderr
    assert result.returncode == 2, everything[-3000:]
    for noise in ("Traceback", "Event loop is closed", "tensorstore"):
        assert noise not in everything, everything[-3000:]
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[-3000:]
    return lines[0]


@pytest.mark.slow  # subprocess runs
def test_changed_keys_are_refused_with_every_difference(run):
    out, env = run
    before = _record(out)
    line = _refused(_train(out, env, "--resume", "rollout.group_size=8", "optim.lr=1e-3"))
    assert "optim.lr: 0.01 (recorded) -> 0.001" in line
    assert "rollout.group_size: 16 (recorded) -> 8" in line
    assert _record(out) == before
    history = out / "history.jsonl"
    assert not history.exists() or "optim.lr" not in history.read_text()


@pytest.mark.slow  # a subprocess run (refused before JAX starts)
def test_without_config_yaml_the_checkpoints_record_is_compared(run, tmp_path):
    """Only checkpoints/ was kept: the newest step's recorded config is the record a resume keeps."""
    out, env = run
    shutil.copytree(out / "checkpoints", tmp_path / "copy" / "checkpoints")
    line = _refused(_train(tmp_path / "copy", env, "--resume", "optim.lr=1e-3"))
    assert "optim.lr: 0.01 (recorded) -> 0.001" in line
    assert not (tmp_path / "copy" / "config.yaml").exists()


@pytest.mark.slow  # subprocess runs
def test_a_changed_model_shape_is_one_line_naming_the_key_and_both_values(run):
    out, env = run
    line = _refused(_train(out, env, "--resume", "model.overrides.hidden_size=32"))
    assert "model.overrides.hidden_size: None (recorded) -> 32" in line
    # the same config over checkpoints of another shape (weights not from this config): one line too
    config = out / "checkpoints" / "config.json"
    saved = config.read_text()
    config.write_text(json.dumps({**json.loads(saved), "hidden_size": 32}))
    try:
        line = _refused(_train(out, env, "--resume"))
    finally:
        config.write_text(saved)
    assert "hidden_size 32 vs 64" in line


@pytest.mark.slow  # subprocess runs
def test_safe_changes_resume_and_are_recorded_never_rewriting_the_run(run):
    out, env = run
    before = _record(out)
    resumed = _train(out, env, "--resume", "checkpoint.keep=3", "log_every=2")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming from step 2" in resumed.stdout
    assert _record(out) == before  # the finished run's evaluation is kept, the new one beside it
    assert json.loads((out / "eval.2.json").read_text()) == json.loads(before["eval.json"])
    (history,) = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    assert history["event"] == "resume"
    assert history["changes"] == {
        "checkpoint.keep": {"recorded": 2, "now": 3},
        "log_every": {"recorded": 1, "now": 2},
    }


@pytest.mark.slow  # subprocess runs
def test_a_finished_run_extended_by_a_step_keeps_its_optimizer(run, tmp_path):
    """`--resume steps=3` on the finished 2-step run ends with the weights of a straight 3-step run:
    the restored Adam moments and step count make its third update the straight run's (a fresh
    optimizer's first update is another)."""
    import jax
    import numpy as np
    from flax import nnx

    from b2tjax.run.metrics import read_metrics
    from models.checkpoint import load_model

    out, env = run
    extended = tmp_path / "extended"
    shutil.copytree(out, extended)
    result = _train(extended, env, "--resume", "steps=3")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "--resume extends the run from 2 to 3 GRPO steps, keeping the optimizer state" in result.stdout
    history = [json.loads(line) for line in (extended / "history.jsonl").read_text().splitlines()]
    assert history[-1]["changes"]["steps"] == {"recorded": 2, "now": 3}
    straight = _train(tmp_path / "straight", env, "steps=3")
    assert straight.returncode == 0, straight.stderr[-3000:]
    a, b = (read_metrics(d / "metrics.jsonl") for d in (tmp_path / "straight", extended))
    assert sorted(a) == sorted(b) == [1, 2, 3]
    assert b[3]["lr"] == a[3]["lr"] == pytest.approx(1e-2)
    assert b[3]["loss"] == pytest.approx(a[3]["loss"], abs=1e-6)
    pa, pb = (
        nnx.to_pure_dict(nnx.state(load_model(d / "checkpoints"), nnx.Param))
        for d in (tmp_path / "straight", extended)
    )
    jax.tree.map(lambda x, y: np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6), pa, pb)


def test_the_documented_safe_keys_and_nothing_else():
    recorded = {"optim": {"lr": 0.1}, "checkpoint": {"keep": 2}, "hardware": {"devices": 1}, "out": "a"}
    now = {"optim": {"lr": 0.1}, "checkpoint": {"keep": 5}, "hardware": {"devices": 8}, "out": "/x/a"}
    changes = config_changes(recorded, now)
    assert changes == {"checkpoint.keep": (2, 5), "hardware.devices": (1, 8), "out": ("a", "/x/a")}
    check_changes(changes)  # all three are safe
    with pytest.raises(ValueError, match=r"optim\.lr: 0\.1 \(recorded\) -> 0\.2"):
        check_changes(config_changes(recorded, {**now, "optim": {"lr": 0.2}}))
    assert not is_safe("hardware_x") and not is_safe("steps") and not is_safe("seed")
    check_changes({"steps": (2, 3)})  # more steps extend the run
    with pytest.raises(ValueError, match=r"steps: 3 \(recorded\) -> 2"):
        check_changes({"steps": (3, 2)})
    assert "metrics." in SAFE_TO_CHANGE  # trackers may be switched on for the rest of a run


def test_resume_point_round_trips_the_saved_json():
    """The typed resume point reads and writes the train_state JSON checkpoints already hold."""
    saved = {"phase": "grpo", "phase_step": 3, "seed": 0, "data": {"pos": 12}, "counters": {"samples": 48}}
    point = ResumePoint.from_json(saved)
    assert point == ResumePoint("grpo", 3, {"pos": 12}, {"samples": 48}, seed=0)
    assert point.to_json() == saved
    base = {"path": "hf:/m", "sha256": "ab"}
    assert ResumePoint.from_json({**saved, "base": base}).to_json() == {**saved, "base": base}


@pytest.mark.parametrize("override", ["seed=9223372036854775808", "seed=-1", "data.shuffle_seed=4294967296"])
def test_a_seed_no_generator_takes_is_refused_with_the_config(override):
    """A JAX key takes < 2**63, numpy's generator >= 0, grain's shuffle < 2**32: refused when the
    config loads (before the run directory), not when the trainer first draws."""
    from b2tjax.config import load_config

    with pytest.raises(ValueError, match=rf"{override.split('=')[0]} must be in \[0, "):
        load_config(None, [override])
    load_config(None, ["seed=9223372036854775807", "data.shuffle_seed=4294967295"])


def test_a_resume_reads_the_recipe_and_the_record_once_each(tmp_path, monkeypatch):
    """No re-reads: the recipe once (it says where OUT is), then the run's record once (the recipe
    of the resume, and what a change is measured against)."""
    from b2tjax.config import dump_config, load_config
    from tests.launch_scripts import load_script

    train = load_script("launch/train.py")
    dump_config(load_config(ROOT / "configs" / "toy.yaml", [f"out={tmp_path}"]), tmp_path / "config.yaml")
    reads = []
    monkeypatch.setattr(train, "load_config", lambda *a: reads.append(Path(a[0]).name) or load_config(*a))
    args = train.parse_args(["--resume", "--out", str(tmp_path), "log_every=2"])
    cfg, changes = train.resolve_config(args, train.read_recipe(args))
    assert reads == ["tiny_cpu.yaml", "config.yaml"]
    assert cfg.task == "toy" and changes == {"log_every": (1, 2)}


def _recorded_toy_run(out: Path, *overrides: str) -> None:
    """OUT/config.yaml of a toy run (what a resume starts from), without running it."""
    from b2tjax.config import dump_config, load_config

    dump_config(load_config(ROOT / "configs" / "toy.yaml", [f"out={out}", *overrides]), out / "config.yaml")


def _assignments_refused(cfg) -> None:
    """Every level of a resolved config refuses assignment, naming the key; a replaced copy is new."""
    import dataclasses

    from b2tjax.config import FrozenConfigError, apply_overrides

    for target, key in ((cfg, "steps"), (cfg.rollout, "rollout.max_turns"), (cfg.sft.optim, "sft.optim.lr")):
        with pytest.raises(FrozenConfigError, match=rf"cannot assign {key}; .*dataclasses\.replace"):
            setattr(target, key.rpartition(".")[2], 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.himap.executor_limits.max_turns = 1  # a frozen value from the start
    with pytest.raises(ValueError, match="the config is frozen: key=value overrides apply before"):
        apply_overrides(cfg, ["steps=1"])
    longer = dataclasses.replace(cfg, steps=cfg.steps + 1)  # a new value, its own to change
    longer.log_every = 3
    assert (longer.steps, longer.log_every, cfg.steps + 1) == (cfg.steps + 1, 3, longer.steps)


def test_a_launched_runs_config_is_frozen_fresh_or_resumed(tmp_path):
    """train.py resolves the config once and freezes it: neither the trainer nor any library code can
    change the run's config (or a section of it) after the checks, on a new run or a resume."""
    from tests.launch_scripts import load_script

    train = load_script("launch/train.py")
    args = train.parse_args(["--out", str(tmp_path / "new"), "steps=3"])
    cfg, changes = train.resolve_config(args, train.read_recipe(args))
    assert changes is None and cfg.steps == 3
    _assignments_refused(cfg)
    _recorded_toy_run(tmp_path)
    args = train.parse_args(["--resume", "--out", str(tmp_path), "log_every=2"])
    cfg, changes = train.resolve_config(args, train.read_recipe(args))
    assert changes == {"log_every": (1, 2)}
    _assignments_refused(cfg)


@pytest.mark.parametrize("mode", ["sft_only", "eval"])
def test_raising_steps_on_a_run_without_grpo_is_refused_in_one_line(tmp_path, mode):
    """`steps` counts GRPO steps: a resume of an sft_only or eval run that raises it would change
    nothing, so it is refused naming the key; a GRPO run's extension is accepted."""
    from b2tjax.errors import UserError
    from tests.launch_scripts import load_script

    train = load_script("launch/train.py")
    _recorded_toy_run(tmp_path, f"mode={mode}")
    args = train.parse_args(["--resume", "--out", str(tmp_path), "steps=99"])
    with pytest.raises(UserError, match=rf"^steps: \d+ \(recorded\) -> 99: .* mode={mode} run trains none"):
        train.resolve_config(args, train.read_recipe(args))
    _recorded_toy_run(tmp_path, "mode=grpo")
    _, changes = train.resolve_config(args, train.read_recipe(args))
    assert set(changes) == {"steps"}
