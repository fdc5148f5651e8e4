"""A clone is the whole product (issue 26): the repository's HEAD commit, cloned alone into an empty
directory (no ../shared, no sibling folders), builds the TravelPlanner data and scores the expert on
it from what the clone itself holds. Real git, real launch scripts in subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # clones, installs and runs the project

ROOT = Path(__file__).resolve().parents[2]


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    """HEAD of the repository these tests run in, cloned into an otherwise empty directory."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    try:
        head = _git("rev-parse", "HEAD", cwd=ROOT).strip()
    except subprocess.CalledProcessError:
        pytest.skip(f"{ROOT} is not a git checkout")
    parent = tmp_path_factory.mktemp("fresh")
    dest = parent / "b2tjax"
    _git("clone", "--quiet", "--no-checkout", str(ROOT), str(dest), cwd=parent)
    _git("fetch", "--quiet", str(ROOT), head, cwd=dest)  # HEAD may be detached (CI) or unpushed
    _git("checkout", "--quiet", head, cwd=dest)
    assert list(parent.iterdir()) == [dest]  # nothing beside the clone: no ../shared
    return dest


def _run(clone: Path, *argv: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(clone), JAX_PLATFORMS="cpu")  # the clone's code wins
    return subprocess.run(
        [sys.executable, *argv], cwd=clone, env=env, capture_output=True, text=True, timeout=300
    )


def test_travelplanner_data_and_expert_evaluation_from_a_fresh_clone(clone):
    where = _run(clone, "-c", "import sandbox, b2tjax; print(sandbox.__file__, b2tjax.__file__)")
    assert where.returncode == 0, where.stderr
    assert all(Path(p).is_relative_to(clone) for p in where.stdout.split()), where.stdout

    built = _run(clone, "launch/make_data.py", "--benchmark", "travelplanner", "--out", "data/tp")
    assert built.returncode == 0, built.stderr[-2000:]
    shipped = clone / "sandbox" / "benchmarks" / "travelplanner" / "data" / "database"
    for table in ("clean_accommodations_2022.csv", "attractions.csv", "distance.csv"):
        assert (clone / "data" / "tp" / "database" / table).read_bytes() == (shipped / table).read_bytes()

    # no --benchmark: data/tp says it holds TravelPlanner data
    argv = ["--data", "data/tp", "--policy", "expert", "--split", "train", "--json", "m.json"]
    scored = _run(clone, "launch/eval.py", *argv)
    assert scored.returncode == 0, scored.stderr[-2000:]
    metrics = json.loads((clone / "m.json").read_text())
    assert metrics["n"] >= 45 and metrics["final_pass_rate"] == 1.0  # the 45 official + generated
