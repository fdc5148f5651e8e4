"""A benchmark shipped as its own package (docs/examples/skeleton_benchmark) is found through the
`b2tjax.benchmarks` entry-point group: pip installs it into a temporary target, and with that on
PYTHONPATH launch/make_data.py builds its data and launch/eval.py scores plans by it, with nothing
in the repository edited or registered by hand."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.benchmarks import BENCHMARKS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "skeleton_benchmark"

BUILD_AND_SCORE = """
import runpy, sys
from b2tjax.cli.make_data import main
from sandbox.benchmarks import BENCHMARKS
print("registered", BENCHMARKS["skeleton"], flush=True)
data, plans, out = sys.argv[1:]
assert main(["--benchmark", "skeleton", "--out", data, "--workers", "1"]) == 0
sys.argv = ["eval.py", "--data", data, "--plans", plans, "--split", "test", "--json", out]
runpy.run_path(sys.argv_eval, run_name="__main__")
"""


@pytest.mark.slow  # pip builds the package (~5 s), make_data encodes its traces' lengths (~5 s)
def test_an_installed_benchmark_package_builds_its_data_and_scores_plans(tmp_path):
    assert "skeleton" not in BENCHMARKS  # not installed here: the package alone registers it
    source, target = tmp_path / "src", tmp_path / "site"
    shutil.copytree(EXAMPLE, source)  # pip builds in the source tree; keep the repository clean
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
    installed = subprocess.run(
        [*pip, "--target", str(target), str(source)], capture_output=True, text=True, timeout=300
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    # the expert's museum for two test instances, a museum closed that Saturday for the other two
    plans = [
        {"id": "test-Avalon-Mon", "plan": '{"museum": "Map Museum"}'},
        {"id": "test-Avalon-Sat", "plan": '{"museum": "Map Museum"}'},
        {"id": "test-Brightwater-Mon", "plan": '{"museum": "Glass Works"}'},
        {"id": "test-Brightwater-Sat", "plan": '{"museum": "Glass Works"}'},
    ]
    (tmp_path / "plans.jsonl").write_text("".join(json.dumps(p) + "\n" for p in plans))
    data, out = tmp_path / "data", tmp_path / "metrics.json"
    code = BUILD_AND_SCORE.replace("sys.argv_eval", repr(str(ROOT / "launch" / "eval.py")))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), str(ROOT)]), JAX_PLATFORMS="cpu")
    run = subprocess.run(
        [sys.executable, "-c", code, str(data), str(tmp_path / "plans.jsonl"), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "registered skeleton_benchmark:SkeletonBenchmark" in run.stdout
    assert json.loads((data / "benchmark.json").read_text())["benchmark"] == "skeleton"
    assert len((data / "sft" / "train.jsonl").read_text().splitlines()) == 4  # the expert's traces
    metrics = json.loads(out.read_text())  # scored by the package's own judge
    assert (metrics["n"], metrics["delivery_rate"], metrics["final_pass_rate"]) == (4, 1.0, 0.5)
