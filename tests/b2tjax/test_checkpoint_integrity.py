"""Checkpoint integrity: a changed byte is found, a damaged newest step is not quietly swapped for an
older one, a config.json that is not JSON is one line; an edited world store fails the judge too."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
from flax import nnx

from b2tjax.run.checkpoint import RunCheckpointer
from b2tjax.step.train_step import TrainState
from models.checkpoint import CheckpointError, load_model, save_model, write_config
from models.checksums import MANIFEST, ChecksumError
from models.config import ConfigFileError, get_config
from models.qwen3 import Qwen3ForCausalLM
from tests.launch.test_cli_errors import assert_one_clear_line, run_script
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
    return directory


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
    ckpt.save(3, state, {"data": 1}, {"lr": 0.1}, force=True)
    ckpt.close()
    assert (tmp_path / "checkpoints" / "3" / MANIFEST).is_file()
    reopened = RunCheckpointer(tmp_path / "checkpoints", every_steps=1, keep=3)
    restored, train_state, _ = reopened.restore(3, state)
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
