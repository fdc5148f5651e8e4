"""The data directory is never half-written, overwritten or silently rebuilt, and its data is
byte-reproducible, for any worker count and after a killed build is resumed. Real launch scripts in
processes of their own (tests/script_server.py), real files."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.launch.test_cli_errors import ENV, ROOT, run_script

pytestmark = pytest.mark.slow  # builds data directories with make_data in subprocesses


def make_data(out: Path, *extra: str) -> subprocess.CompletedProcess:
    # 6 instances and 6 traces per split: two chunks of work in each stage
    return run_script("make_data.py", "--out", out, "--instances", "2", *extra)


def digests(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("data") / "first"
    result = make_data(out, "--seed", "3", "--workers", "2")
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def test_same_seed_gives_identical_bytes_for_any_worker_count(built, tmp_path):
    again = tmp_path / "second"
    result = make_data(again, "--seed", "3", "--workers", "1")
    assert result.returncode == 0, result.stderr[-3000:]
    first, second = digests(built), digests(again)
    assert first.keys() == second.keys()
    assert {"world.sqlite", "stats.json", "sft/train.jsonl", "instances/test.jsonl"} <= first.keys()
    # timings live in build_info.json, the one file documented as different between builds
    assert "seconds" in json.loads((built / "build_info.json").read_text())
    assert "seconds" not in (built / "stats.json").read_text()
    different = [name for name in first if first[name] != second[name] and name != "build_info.json"]
    assert different == []


def test_force_replaces_and_no_staging_dir_is_left(built, tmp_path):
    out = tmp_path / "data"
    shutil.copytree(built, out)
    (out / "mine.txt").write_text("user file")
    refused = make_data(out, "--world-only")
    assert refused.returncode != 0 and "--force" in refused.stderr
    assert (out / "mine.txt").exists()
    replaced = make_data(out, "--world-only", "--force")
    assert replaced.returncode == 0, replaced.stderr[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["benchmark.json", "build_info.json", "world.sqlite"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no temporary sibling left behind


def test_a_killed_build_leaves_no_data_dir_and_the_same_command_finishes_it(built, tmp_path):
    out = tmp_path / "data"
    command = [sys.executable, str(ROOT / "launch" / "make_data.py"), "--out", str(out), "--instances", "2"]
    proc = subprocess.Popen(
        [*command, "--seed", "3", "--workers", "1"],
        env=ENV,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline, first_chunk = time.time() + 120, ".data.building-*/.chunks/*/instances-train-*.json"
    while not list(tmp_path.glob(first_chunk)) and time.time() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)  # mid-way: one chunk of the first split's instances done
    proc.wait(timeout=60)
    assert list(tmp_path.glob(".data.building-*")), "the build never started writing"
    assert not out.exists()  # the half-written build sits in a hidden sibling, never at --out
    resumed = subprocess.run(
        [*command, "--seed", "3", "--workers", "2"], env=ENV, capture_output=True, text=True, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "continuing the unfinished build" in resumed.stderr
    assert "[instances-train] resuming: 1 of 2 chunks already done" in resumed.stderr
    first, second = digests(built), digests(out)
    assert first.keys() == second.keys()
    assert [name for name in first if first[name] != second[name]] == ["build_info.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # the staging sibling is gone


def _train(*args: str) -> subprocess.CompletedProcess:
    return run_script("train.py", *args)


def test_train_refuses_a_partial_data_dir(built, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(built, data)
    (data / "ground_truth" / "train.jsonl").unlink()
    before = digests(data)
    result = _train("--out", str(tmp_path / "run"), f"data.data_dir={data}")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "ground_truth/train.jsonl" in result.stderr and str(data) in result.stderr
    assert digests(data) == before  # nothing rebuilt, nothing overwritten


def test_train_refuses_instances_without_ground_truth(built, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(built, data)
    truth = data / "ground_truth" / "train.jsonl"
    rows = truth.read_text().splitlines()
    dropped = json.loads(rows[0])["id"]
    truth.write_text("\n".join(rows[1:]) + "\n")
    result = _train("--out", str(tmp_path / "run"), f"data.data_dir={data}", "model.sp_vocab_size=512")
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert dropped in result.stderr and str(truth) in result.stderr


def test_prompt_budget_is_checked_before_sft(built, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(built, data)
    run = tmp_path / "run"
    result = _train(
        "--out",
        str(run),
        f"data.data_dir={data}",
        "model.sp_vocab_size=512",
        "sft.steps=1",
        "rollout.max_prompt_tokens=200",
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert "rollout.max_prompt_tokens=200 is too small" in result.stderr
    assert not (run / "metrics.jsonl").exists()  # found at start-up: no SFT step ran
