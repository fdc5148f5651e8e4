"""User mistakes get one clear line, never a traceback.

Every case runs the real launch script in a process of its own (forked from one server that
imported the project once: tests/script_server.py) and checks: exit status != 0, no traceback,
at most two lines on stderr, and the file or key at fault named in them.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.script_server import ScriptServer

pytestmark = pytest.mark.slow  # runs every launch script in subprocesses

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")


@functools.cache
def _server() -> ScriptServer:
    return ScriptServer(ENV)


def run_script(script: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """launch/`script` with `args` as a fresh process; like subprocess.run's result."""
    return _server().run(ROOT / "launch" / script, [str(a) for a in args], cwd, timeout=300)


def assert_one_clear_line(result: subprocess.CompletedProcess, *names: str) -> str:
    """Exit != 0, no traceback, <= 2 lines on stderr naming every one of `names`; returns them."""
    everything = result.stdout + result.stderr
    assert result.returncode != 0, everything[-2000:]
    assert "Traceback" not in everything, everything[-4000:]
    lines = [line for line in result.stderr.splitlines() if line.strip() and "make_data:" not in line]
    assert 1 <= len(lines) <= 2, result.stderr[-3000:]
    message = "\n".join(lines)
    for name in names:
        assert name in message, (name, message)
    return message


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    """A small data directory built by the real make_data (one instance per split and difficulty)."""
    out = tmp_path_factory.mktemp("cli") / "data"
    result = run_script("make_data.py", "--out", out, "--instances", "1", "--workers", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    return out


# -- launch/eval.py --------------------------------------------------------------------------------
def test_eval_bad_plans_files(tmp_path, data_dir):
    missing = tmp_path / "nothere.jsonl"
    assert_one_clear_line(run_script("eval.py", "--data", data_dir, "--plans", missing), str(missing))
    assert_one_clear_line(
        run_script("eval.py", "--data", data_dir, "--plans", tmp_path), str(tmp_path), "directory"
    )
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(b'{"id": "caf\xe9", "plan": []}\n')
    assert_one_clear_line(run_script("eval.py", "--data", data_dir, "--plans", latin1), str(latin1), "UTF-8")
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"id": "x", "plan": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    assert_one_clear_line(run_script("eval.py", "--data", data_dir, "--plans", deep), f"{deep}:1")


def test_eval_checks_outputs_before_scoring(tmp_path, data_dir):
    plans = tmp_path / "plans.jsonl"
    plans.write_text("")
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    result = run_script("eval.py", "--data", data_dir, "--plans", plans, "--json", blocker / "m.json")
    assert_one_clear_line(result, "--json", str(blocker / "m.json"))
    assert "scored" not in result.stderr  # refused before the evaluation, not after it


def test_eval_duplicate_and_empty_plans(tmp_path, data_dir):
    first_id = json.loads((data_dir / "instances" / "test.jsonl").read_text().splitlines()[0])["id"]
    plans = tmp_path / "plans.jsonl"
    plans.write_text("".join(json.dumps({"id": first_id, "plan": p}) + "\n" for p in ([], "x")))
    assert_one_clear_line(run_script("eval.py", "--data", data_dir, "--plans", plans), str(plans), first_id)
    plans.write_text("\n")
    empty = run_script("eval.py", "--data", data_dir, "--plans", plans)
    assert empty.returncode == 0, empty.stderr[-2000:]
    assert f"{plans} holds no plans" in empty.stderr


def test_report_bad_rollouts_and_output(tmp_path, data_dir):
    missing = tmp_path / "none.jsonl"
    out = tmp_path / "r.html"
    assert_one_clear_line(
        run_script("report.py", "--data", data_dir, "--rollouts", missing, "--out", out), str(missing)
    )
    plans = tmp_path / "plans.jsonl"
    plans.write_text('{"id": "test-easy-00000", "plan": []}\n')  # a plans file, not rollout records
    result = run_script("report.py", "--data", data_dir, "--rollouts", plans, "--out", out)
    assert_one_clear_line(result, f"{plans}:1", "launch/eval.py --plans")  # where plans files go
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run_script("eval.py", "--data", data_dir, "--policy", "expert", "--report", blocker / "r.html")
    assert_one_clear_line(result, str(blocker))


def test_truncated_world_store(tmp_path, data_dir):
    data = tmp_path / "data"
    shutil.copytree(data_dir, data)
    store = data / "world.sqlite"
    store.write_bytes(store.read_bytes()[:100_000])
    assert_one_clear_line(run_script("eval.py", "--data", data, "--policy", "expert"), str(store))
    assert_one_clear_line(
        run_script("rollouts.py", "--model", "tiny", "--data", data, "--out", tmp_path / "r.jsonl"),
        str(store),
    )


# -- launch/make_data.py ---------------------------------------------------------------------------
def test_make_data_bad_out(tmp_path, data_dir):
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    assert_one_clear_line(run_script("make_data.py", "--out", a_file, "--world-only"), str(a_file))
    assert_one_clear_line(
        run_script("make_data.py", "--out", a_file / "data", "--world-only"), str(a_file / "data")
    )
    before = sorted(p.name for p in data_dir.iterdir())
    result = run_script("make_data.py", "--out", data_dir, "--world-only")
    assert_one_clear_line(result, str(data_dir), "--force")
    assert sorted(p.name for p in data_dir.iterdir()) == before


def _in_private_tmpfs(tmp_path: Path, options: str, *make_data_args: str) -> subprocess.CompletedProcess:
    """make_data inside a user+mount namespace over a private tmpfs (read-only or tiny): no root needed,
    nothing mounted outside the test."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"]).returncode != 0:
        pytest.skip("user namespaces (unshare -rm) are not available here")
    mount = tmp_path / "mnt"
    mount.mkdir()
    script = " ".join(
        [
            f"mount -t tmpfs -o {options} tmpfs {mount} &&",
            sys.executable,
            str(ROOT / "launch" / "make_data.py"),
            *make_data_args,
        ]
    )
    return subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], env=ENV, capture_output=True, text=True, timeout=300
    )


def test_make_data_read_only_dir(tmp_path):
    out = tmp_path / "mnt" / "data"
    result = _in_private_tmpfs(tmp_path, "ro,size=1m", "--out", str(out), "--world-only")
    assert "read-only" in assert_one_clear_line(result, str(out))


def test_make_data_full_disk(tmp_path):
    out = tmp_path / "mnt" / "data"
    result = _in_private_tmpfs(tmp_path, "size=2m", "--out", str(out), "--world-only")
    assert "full" in assert_one_clear_line(result, str(out))


# -- launch/train.py (config) ----------------------------------------------------------------------
def test_yaml_syntax_error_names_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps: 3\nrollout: {group_size: 4\n")
    result = run_script("train.py", "--config", bad, "--out", tmp_path / "run")
    assert_one_clear_line(result, str(bad), "line")


def test_a_config_that_is_no_recipe_file_is_named_for_what_it_is(tmp_path):
    """A device is not "missing", a duplicate key is not silently the last one."""
    result = run_script("train.py", "--config", "/dev/zero", "--out", tmp_path / "run")
    assert "/dev/zero is a character device" in assert_one_clear_line(result, "/dev/zero")
    dup = tmp_path / "dup.yaml"
    dup.write_text("base: " + str(ROOT / "configs" / "tiny_cpu.yaml") + "\nsteps: 1\nsteps: 2\n")
    result = run_script("plan.py", "--config", dup, "--target", "cpu")
    assert "line 3: duplicate key 'steps'" in assert_one_clear_line(result, str(dup))


def test_config_out_of_range_is_rejected(tmp_path):
    message = assert_one_clear_line(
        run_script("train.py", "--out", tmp_path / "run", "rollout.top_p=7"), "rollout.top_p"
    )
    assert "(0, 1]" in message


# -- launch/rollouts.py and launch/export_hf.py -----------------------------------------------------
def test_rollout_empty_checkpoint_and_unknown_split(tmp_path, data_dir):
    empty = tmp_path / "empty_ckpt"
    empty.mkdir()
    out = tmp_path / "r.jsonl"
    assert_one_clear_line(
        run_script("rollouts.py", "--checkpoint", empty, "--data", data_dir, "--out", out), str(empty)
    )
    assert_one_clear_line(
        run_script("rollouts.py", "--model", "tiny", "--data", data_dir, "--split", "tset", "--out", out),
        "tset",
    )


def test_export_hf_run_without_steps(tmp_path):
    from models.config import get_config

    ckpt = tmp_path / "run" / "checkpoints"
    ckpt.mkdir(parents=True)
    (ckpt / "config.json").write_text(json.dumps(get_config("tiny").to_hf()))
    result = run_script("export_hf.py", "--checkpoint", ckpt, "--out", tmp_path / "hf")
    assert_one_clear_line(result, str(ckpt))


# -- launch/serve.py -------------------------------------------------------------------------------
def test_serve_stream_segment_out_of_range(tmp_path):
    """A stream segment below 1 or past the engine's decode segment: refused before a model loads."""
    pytest.importorskip("uvicorn")
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")  # never read: both refusals come first
    for args, name in ((["--stream-segment", "0"], "--stream-segment"), (["--stream-segment", "64"], "=32")):
        result = run_script("serve.py", "--checkpoint", ckpt, *args, "rollout.max_turn_tokens=32")
        assert_one_clear_line(result, name, *(["rollout.max_turn_tokens"] if name == "=32" else []))
