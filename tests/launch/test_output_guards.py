"""No launch script writes an output over one of its inputs or into the data directory.

Each refusal is one line, before anything is read or written: the files at stake keep their bytes.
The scripts run for real in a subprocess (see tests/launch/test_cli_errors.py for the shared helpers).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from b2tjax.cli.outputs import check_outputs
from b2tjax.errors import UserError
from tests.launch.test_cli_errors import assert_one_clear_line, run_script

pytestmark = pytest.mark.slow  # runs launch scripts in subprocesses


@pytest.fixture
def data(tmp_path: Path) -> Path:
    """A data directory's layout: the guard refuses before a single file of it is read."""
    root = tmp_path / "data"
    for name in ("instances", "ground_truth"):
        (root / name).mkdir(parents=True)
        (root / name / "test.jsonl").write_text('{"id": "test-easy-00000"}\n')
    return root


@pytest.fixture
def plans(tmp_path: Path) -> Path:
    path = tmp_path / "plans.jsonl"
    path.write_text('{"id": "test-easy-00000", "plan": []}\n')
    return path


def _unchanged(*paths: Path):
    before = {p: p.read_bytes() for p in paths}
    return lambda: all(p.read_bytes() == b for p, b in before.items())


def test_eval_refuses_outputs_that_are_its_plans(tmp_path, data, plans):
    same = _unchanged(plans)
    result = run_script("eval.py", "--data", data, "--plans", plans, "--details", plans)
    assert_one_clear_line(result, "--details", "--plans")
    link = tmp_path / "link.jsonl"
    link.symlink_to(plans)
    assert_one_clear_line(run_script("eval.py", "--data", data, "--plans", plans, "--json", link), "--json")
    hard = tmp_path / "hard.jsonl"
    os.link(plans, hard)
    assert_one_clear_line(
        run_script("eval.py", "--data", data, "--plans", plans, "--details", hard), "--plans"
    )
    assert same()


def test_eval_refuses_outputs_inside_the_data_directory(tmp_path, data, plans):
    truth = data / "ground_truth" / "test.jsonl"
    same = _unchanged(truth, plans)
    result = run_script("eval.py", "--data", data, "--plans", plans, "--json", truth)
    assert_one_clear_line(result, "--json", "data directory")
    new_file = data / "metrics.json"
    result = run_script("eval.py", "--data", data, "--plans", plans, "--details", new_file)
    assert_one_clear_line(result, "--details", "data directory")
    assert same() and not new_file.exists()


def test_eval_refuses_one_path_for_two_outputs(tmp_path, data, plans):
    out = tmp_path / "out.json"
    result = run_script("eval.py", "--data", data, "--plans", plans, "--json", out, "--details", out)
    assert_one_clear_line(result, "--details", "--json")
    assert not out.exists()


def test_rollouts_refuses_data_outputs_and_a_negative_count(tmp_path, data):
    inside = data / "instances" / "rollouts.jsonl"
    result = run_script("rollouts.py", "--model", "tiny", "--data", data, "--out", inside)
    assert_one_clear_line(result, "--out", "data directory")
    result = run_script(
        "rollouts.py", "--model", "tiny", "--data", data, "--num", "-3", "--out", tmp_path / "r"
    )
    assert_one_clear_line(result, "--num", "-3")
    assert not inside.exists() and not (tmp_path / "r").exists()


def test_make_data_refuses_a_symlinked_out_and_leaves_no_debris(tmp_path):
    target = tmp_path / "real"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    link = tmp_path / "link"
    link.symlink_to(target)
    result = run_script("make_data.py", "--out", link, "--force", "--world-only")
    assert_one_clear_line(result, str(link), "symbolic link")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]
    assert (target / "keep.txt").read_text() == "mine" and link.is_symlink()


def test_make_data_refuses_an_input_inside_the_out_it_replaces(tmp_path):
    out = tmp_path / "data"
    tables = out / "tables"
    tables.mkdir(parents=True)
    (tables / "hotels.jsonl").write_text("{}\n")
    result = run_script("make_data.py", "--out", out, "--force", "--from-jsonl", tables)
    assert_one_clear_line(result, "--from-jsonl", "--out")
    assert (tables / "hotels.jsonl").read_text() == "{}\n"


def test_export_refuses_to_write_into_its_checkpoint(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    result = run_script("export_hf.py", "--checkpoint", ckpt, "--out", ckpt)
    assert_one_clear_line(result, "--out", "--checkpoint")
    assert_one_clear_line(
        run_script("export_hf.py", "--checkpoint", ckpt, "--out", ckpt / "hf"), "--out", "--checkpoint"
    )
    assert list(ckpt.iterdir()) == []


def test_distinct_paths_pass(tmp_path, data, plans):
    check_outputs(
        [("--json", tmp_path / "m.json"), ("--details", tmp_path / "d.jsonl"), ("--x", None)],
        inputs=[("--plans", plans), ("--config", None)],
        data_dirs=[data, None],
    )
    with pytest.raises(UserError, match="--json .* is .*the input --plans"):
        check_outputs([("--json", plans)], inputs=[("--plans", plans)])
