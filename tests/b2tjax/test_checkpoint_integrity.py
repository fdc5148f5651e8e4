"""Checkpoint integrity: a changed byte is found, a damaged newest step is not quietly swapped for an
older one, a config.json that is not JSON is one line; an edited world store fails the judge too."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from flax import nnx

from b2tjax.run.checkpoint import RunCheckpointer
from b2tjax.run.resume import ResumePoint
from b2tjax.step.train_step import TrainState
from models.checkpoint import CheckpointError, load_model, save_model, write_config
from models.checksums import MANIFEST, ChecksumError, UnverifiedError, allow_unverified, verify_manifest
from models.config import ConfigFileError, get_config
from models.qwen3 import Qwen3ForCausalLM
from tests.launch.test_cli_errors import ENV, assert_one_clear_line, run_script
from tests.sandbox_fixtures import small_world_path  # noqa: F401 - pytest fixture

SMALL = get_config("tiny")


def _flip_byte(directory: Path) -> Path:
    """Flip one byte in the middle of the largest file under `directory`; returns the file."""
    target = max(
        (p for p in directory.rglob("*") if p.is_file() and p.name != MANIFEST),
        key=lambda p: p.stat().st_size,
    )
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 0x01
    target.write_bytes(bytes(data))
    return target


def _params(model) -> dict:
    return nnx.to_pure_dict(nnx.state(model, nnx.Param))


@pytest.fixture(scope="module")
def model():
    return Qwen3ForCausalLM(SMALL, rngs=nnx.Rngs(0))


def test_a_flipped_byte_in_a_model_checkpoint_is_found(tmp_path, model):
    ckpt = tmp_path / "ckpt"
    save_model(model, ckpt)
    assert (ckpt / MANIFEST).is_file()
    load_model(ckpt)  # intact: loads
    changed = _flip_byte(ckpt / "params")
    with pytest.raises(ChecksumError, match=changed.name):
        load_model(ckpt)
    assert_one_clear_line(
        run_script("export_hf.py", "--checkpoint", ckpt, "--out", tmp_path / "hf"), changed.name
    )
    assert not (tmp_path / "hf").exists()


def _manager_dir(tmp_path: Path, model, steps=(1, 2)) -> Path:
    """A CheckpointManager directory as load_model reads it: config.json + a params item per step,
    each step sealed with its manifest as RunCheckpointer does."""
    from models.checksums import write_manifest

    directory = tmp_path / "run" / "checkpoints"
    write_config(model.config, str(directory))
    with ocp.CheckpointManager(directory, item_names=("params",)) as manager:
        for step in steps:
            scaled = {k: v for k, v in _params(model).items()}
            manager.save(step, args=ocp.args.Composite(params=ocp.args.StandardSave(scaled)))
        manager.wait_until_finished()
    for step in steps:
        write_manifest(directory / str(step))
    write_manifest(directory, only=("config.json",))  # as RunCheckpointer seals the run's config
    return directory


@pytest.mark.slow
def test_a_damaged_newest_step_is_an_error_not_an_older_model(tmp_path, model, capfd):
    directory = _manager_dir(tmp_path, model)
    _flip_byte(directory / "2")
    with pytest.raises(CheckpointError, match=r"step 2 .* does not restore .*older step explicitly .*\[1\]"):
        load_model(directory)
    load_model(directory, step=1)  # the user's explicit choice
    load_model(directory, fallback=True)  # the resume policy: skip it, with a report
    assert "skipping checkpoint step 2" in capfd.readouterr().err
    result = run_script("export_hf.py", "--checkpoint", directory, "--out", tmp_path / "hf")
    assert_one_clear_line(result, "step 2", "[1]")
    assert not (tmp_path / "hf").exists()
    ok = run_script("export_hf.py", "--checkpoint", directory, "--out", tmp_path / "hf1", "--step", "1")
    assert ok.returncode == 0, ok.stderr[-2000:]


def test_a_truncated_newest_step_is_an_error_too(tmp_path, model):
    directory = _manager_dir(tmp_path, model)
    for path in (directory / "2").rglob("*"):
        if path.is_file() and path.stat().st_size > 1000:
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(CheckpointError, match="step 2"):
        load_model(directory)


def test_run_checkpointer_seals_its_steps_and_verifies_them(tmp_path):
    state = TrainState({"w": jnp.arange(4096.0)}, {"m": jnp.zeros(4096)}, jnp.array(3), jnp.array(0))
    ckpt = RunCheckpointer(tmp_path / "checkpoints", every_steps=1, keep=3, async_save=True)
    ckpt.save(3, state, ResumePoint("grpo", 3, data={"data": 1}), {"lr": 0.1}, force=True)
    ckpt.close()
    assert (tmp_path / "checkpoints" / "3" / MANIFEST).is_file()
    reopened = RunCheckpointer(tmp_path / "checkpoints", every_steps=1, keep=3)
    restored, train_state, _ = reopened.restore(3, state)
    assert train_state == ResumePoint("grpo", 3, data={"data": 1})
    np.testing.assert_array_equal(np.asarray(restored.params["w"]), np.arange(4096.0))
    _flip_byte(tmp_path / "checkpoints" / "3" / "params")
    with pytest.raises(ChecksumError):
        reopened.restore(3, state)
    reopened.close()


def test_a_config_json_that_is_not_json_is_one_line(tmp_path, model):
    ckpt = tmp_path / "ckpt"
    save_model(model, ckpt)
    (ckpt / "config.json").write_text("{not json")
    with pytest.raises(ConfigFileError, match="config.json is not valid JSON"):
        load_model(ckpt)
    assert_one_clear_line(
        run_script("export_hf.py", "--checkpoint", ckpt, "--out", tmp_path / "hf"), "config.json"
    )
    (ckpt / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected a JSON object"):
        load_model(ckpt)


def test_judging_against_an_edited_store_fails(tmp_path, small_world_path):
    from sandbox.benchmarks.b2t.evaluator.lookup import index_for
    from sandbox.benchmarks.b2t.world.integrity import StoreCorruptError

    store = tmp_path / "world.sqlite"
    shutil.copy(small_world_path, store)
    index_for(store)  # intact: fine
    conn = sqlite3.connect(store)
    conn.execute("UPDATE restaurants SET avg_price = 99999")
    conn.commit()
    conn.close()
    with pytest.raises(StoreCorruptError, match="changed or damaged"):
        index_for(store)


def test_a_hugging_face_dir_with_a_broken_config_is_one_line_too(tmp_path):
    from b2tjax.cli.script import describe_os_error
    from models.hf import load_pretrained

    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "qwen3"})[:-3])
    with pytest.raises(ConfigFileError) as err:
        load_pretrained(hf)
    # rollouts.py and the trainer load HF dirs this way; run_main reports OSErrors like this one:
    line = describe_os_error(err.value)
    assert "config.json is not valid JSON" in line and "\n" not in line


def _verify_in_a_process(directory: Path) -> subprocess.CompletedProcess:
    """verify_manifest(directory) in a child with a deadline: a check that reads /dev/zero or waits
    on a FIFO never returns, and the test must fail rather than hang."""
    code = "import sys; from models.checksums import verify_manifest; verify_manifest(sys.argv[1])"
    return subprocess.run(
        [sys.executable, "-c", code, str(directory)], env=ENV, capture_output=True, text=True, timeout=60
    )


def test_a_listed_file_that_is_no_longer_a_regular_file_is_refused_without_reading_it(tmp_path, model):
    ckpt = tmp_path / "ckpt"
    save_model(model, ckpt)
    target = max((p for p in (ckpt / "params").rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    for swap in (lambda: target.symlink_to("/dev/zero"), lambda: os.mkfifo(target)):
        saved = target.read_bytes()
        target.unlink()
        swap()
        done = _verify_in_a_process(ckpt)
        assert done.returncode != 0 and f"{target.name} is not a regular file" in done.stderr, done.stderr
        target.unlink()
        target.write_bytes(saved)
    target.write_bytes(target.read_bytes()[:-1])  # sizes are compared before any hashing
    with pytest.raises(ChecksumError, match=rf"{target.name} changed after it was saved \(\d+ bytes"):
        load_model(ckpt)
    (ckpt / "params" / "extra").symlink_to("/dev/zero")
    with pytest.raises(ChecksumError):
        load_model(ckpt)


def test_a_run_step_whose_train_state_is_a_fifo_is_refused_without_reading_it(tmp_path):
    state = TrainState({"w": jnp.arange(8.0)}, {"m": jnp.zeros(8)}, jnp.array(1), jnp.array(0))
    ckpt = RunCheckpointer(tmp_path / "checkpoints", every_steps=1, keep=2, async_save=False)
    ckpt.save(1, state, ResumePoint("grpo", 1, data={"data": 1}), {"lr": 0.1}, force=True)
    ckpt.wait()  # the save has committed and its seal is written
    assert (tmp_path / "checkpoints" / "1" / MANIFEST).is_file()
    ckpt.close()
    item = tmp_path / "checkpoints" / "1" / "train_state"
    target = next(p for p in item.rglob("*") if p.is_file())
    target.unlink()
    os.mkfifo(target)  # Orbax's JSON read would wait for a writer forever
    reopened = RunCheckpointer(tmp_path / "checkpoints", every_steps=1, keep=2)
    found: list = []
    reader = threading.Thread(target=lambda: found.append(reopened.newest_train_state()), daemon=True)
    reader.start()
    reader.join(timeout=60)
    assert found == [None]  # refused at once: a damaged newest step, reported by the restore
    with pytest.raises(ChecksumError, match="is not a regular file"):
        reopened.restore(1, state)
    reopened.close()


def test_a_runs_config_json_is_covered_by_a_manifest(tmp_path, model):
    directory = _manager_dir(tmp_path, model)
    load_model(directory)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps(dict(config, rms_norm_eps=0.5), indent=2))
    with pytest.raises(ChecksumError, match="config.json changed after it was saved"):
        load_model(directory)
    # RunCheckpointer seals the config it writes (the file export and eval read)
    run = RunCheckpointer(tmp_path / "run2", every_steps=1, keep=1, model_config_json=config)
    run.close()
    assert json.loads((tmp_path / "run2" / MANIFEST).read_text())["only"] == ["config.json"]
    (tmp_path / "run2" / "config.json").write_text(json.dumps(dict(config, rms_norm_eps=0.5)))
    with pytest.raises(ChecksumError, match="config.json changed"):
        verify_manifest(tmp_path / "run2")  # what load_model and load_lora_run check first


@pytest.mark.slow  # runs launch/export_hf.py in a subprocess
def test_a_checkpoint_without_a_manifest_is_refused_unless_trusted(tmp_path, model):
    ckpt = tmp_path / "ckpt"
    save_model(model, ckpt)
    (ckpt / MANIFEST).unlink()
    changed = _flip_byte(ckpt / "params")
    with pytest.raises(UnverifiedError, match="no checksum manifest .*--trust-unverified"):
        load_model(ckpt)
    assert_one_clear_line(
        run_script("export_hf.py", "--checkpoint", ckpt, "--out", tmp_path / "hf"), "--trust-unverified"
    )
    assert not (tmp_path / "hf").exists()
    directory = _manager_dir(tmp_path, model)
    (directory / "2" / MANIFEST).unlink()
    with pytest.raises(CheckpointError, match="step 2 .*no checksum manifest"):
        load_model(directory)
    allow_unverified()
    try:  # the user's explicit choice: loads (Orbax reads the flipped byte silently, as before)
        load_model(ckpt)
        load_model(directory)
    finally:
        allow_unverified(False)
    assert changed.exists()


def _small_state(value: float) -> TrainState:
    return TrainState({"w": jnp.full(4096, value)}, {"m": jnp.zeros(4096)}, jnp.array(1), jnp.array(0))


def test_an_unsealed_newest_step_is_kept_and_trust_restores_and_seals_it(tmp_path):
    directory = tmp_path / "checkpoints"
    ckpt = RunCheckpointer(directory, every_steps=1, keep=3, async_save=False)
    for step in (1, 2):
        ckpt.save(step, _small_state(step), ResumePoint("grpo", step), {}, force=True)
    ckpt.close()
    (directory / "2" / MANIFEST).unlink()  # killed between the commit of step 2 and its seal
    reopened = RunCheckpointer(directory, every_steps=1, keep=3)
    with pytest.raises(UnverifiedError, match=r"step 2 .*--trust-unverified to continue from it"):
        reopened.restore_newest(_small_state(0), report=print)
    assert (directory / "2").is_dir() and not (tmp_path / "checkpoints.unrestorable").exists()
    allow_unverified()  # the advice, followed
    try:
        step, state, _, _ = reopened.restore_newest(_small_state(0), report=print)
    finally:
        allow_unverified(False)
        reopened.close()
    assert step == 2 and float(state.params["w"][0]) == 2.0
    verify_manifest(directory / "2")  # sealed by the trusted restore: the next resume needs no flag


KILLED = """
import os, signal, sys, time
import jax.numpy as jnp
from b2tjax.run.checkpoint import RunCheckpointer
from b2tjax.run.resume import ResumePoint
from b2tjax.step.train_step import TrainState

ckpt = RunCheckpointer(sys.argv[1], every_steps=1, keep=3, async_save=True)
for step in (1, 2):
    params, opt = {"w": jnp.full(4096, float(step))}, {"m": jnp.zeros(4096)}
    state = TrainState(params, opt, jnp.array(step), jnp.array(0))
    ckpt.save(step, state, ResumePoint("grpo", step), {}, force=True)
deadline = time.monotonic() + 60  # training goes on; the next save is far away
sealed = os.path.join(sys.argv[1], "2", "b2t_checksums.json")
while time.monotonic() < deadline and not os.path.exists(sealed):
    time.sleep(0.2)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow  # a subprocess that starts JAX (~10 s on 2 loaded cores)
def test_a_kill_between_two_saves_loses_no_finished_step(tmp_path):
    """kill -9 after step 2's async save has committed but before any later save or close: a plain
    restore (what `--resume` runs) continues from step 2, verified, and nothing is set aside."""
    directory = tmp_path / "checkpoints"
    killed = subprocess.run(
        [sys.executable, "-c", KILLED, str(directory)], env=ENV, capture_output=True, timeout=300
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    ckpt = RunCheckpointer(directory, every_steps=1, keep=3)
    step, state, train_state, _ = ckpt.restore_newest(_small_state(0), report=print)
    ckpt.close()
    assert step == 2 and train_state.phase_step == 2 and float(state.params["w"][0]) == 2.0
    assert not (tmp_path / "checkpoints.unrestorable").exists()
