"""`python launch/eval.py --benchmark travelplanner --queries Q --plans SUBMISSION --split S`."""

import importlib.util
import json
from pathlib import Path

import pytest

from sandbox.benchmarks.travelplanner.submission import write_submission
from tests.tp_fixtures import human_plans, train_queries  # noqa: F401 - fixtures
from tests.tp_harness import DATABASE_DIR

pytestmark = pytest.mark.slow  # runs launch/eval.py on TravelPlanner end to end

SCRIPT = Path(__file__).resolve().parents[2] / "launch" / "eval.py"


def _launch_main():
    """launch/eval.py's main, loaded by path (launch/ is not a package)."""
    spec = importlib.util.spec_from_file_location("launch_eval", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


def test_official_submission_is_scored_with_the_official_constants(
    tmp_path, train_queries, human_plans, capsys
):
    # --queries and --mode are the TravelPlanner plugin's options (branch tp-agent).
    pytest.importorskip(
        "sandbox.benchmarks.travelplanner.benchmark", reason="the TravelPlanner plugin is not merged yet"
    )
    data = tmp_path / "data"
    data.mkdir()
    (data / "database").symlink_to(DATABASE_DIR, target_is_directory=True)
    queries = tmp_path / "train.jsonl"
    queries.write_text("".join(json.dumps(q) + "\n" for q in train_queries))
    plans = tmp_path / "submission.jsonl"
    write_submission(plans, train_queries, [*human_plans[:44], None])
    out = tmp_path / "metrics.json"
    main = _launch_main()
    args = [
        "--benchmark",
        "travelplanner",
        "--queries",
        str(queries),
        "--plans",
        str(plans),
        "--split",
        "train",
        "--data",
        str(data),
        "--json",
        str(out),
    ]
    assert main(args) == 0
    metrics = json.loads(out.read_text())
    assert metrics["final_pass_rate"] == pytest.approx(44 / 45) and metrics["mode"] == "official"
    assert metrics["hard_micro"] == pytest.approx(101 / 105)  # the missing plan had 4 hard checks
    assert "final" in capsys.readouterr().out
    # Human plan 41 fails strict mode (wrong-city attractions).
    assert main([*args, "--mode", "strict"]) == 0
    assert json.loads(out.read_text())["final_pass_rate"] == pytest.approx(43 / 45)
    with pytest.raises(SystemExit, match="validation split has 180 queries"):
        main([*args[:-4], "--split", "validation", "--data", str(data)])
