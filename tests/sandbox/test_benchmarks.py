"""The benchmark registry and the B2T plugin driven only through the Benchmark interface.

Expectations are independent of the plugin: the evaluator fixtures' hand-built plan that passes
all 32 constraints (and its one-edit variant failing exactly one), the expert's plans on the
expert-validated small benchmark, and the SPEC section 7 reward formula.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.benchmarks import BENCHMARKS, BenchmarkError, as_benchmark, get_benchmark
from sandbox.benchmarks.b2t.benchmark import B2TBenchmark
from sandbox.benchmarks.b2t.evaluator.example import GROUND_TRUTH, INSTANCE, valid_plan
from sandbox.benchmarks.b2t.evaluator.example_store import build_mini_world
from tests.sandbox.test_instances import small_benchmark  # noqa: F401  (session fixture)
from tests.sandbox_fixtures import small_world_path  # noqa: F401  (session fixture)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def mini_data(tmp_path_factory) -> Path:
    """A DATA directory over the evaluator's mini world with one instance per difficulty."""
    data = tmp_path_factory.mktemp("mini_data")
    (data / "instances").mkdir()
    (data / "ground_truth").mkdir()
    build_mini_world(data / "world.sqlite")
    with (
        open(data / "instances" / "test.jsonl", "w") as vis,
        open(data / "ground_truth" / "test.jsonl", "w") as hid,
    ):
        for level in ("easy", "hard"):
            vis.write(json.dumps(dict(INSTANCE, id=f"test-{level}-1", difficulty=level)) + "\n")
            hid.write(json.dumps(dict(GROUND_TRUTH, id=f"test-{level}-1")) + "\n")
    return data


def test_registry_rejects_an_unknown_benchmark_with_the_choices():
    with pytest.raises(BenchmarkError) as err:
        get_benchmark("tripadvisor", "/nonexistent")
    assert str(err.value) == "unknown benchmark 'tripadvisor'; choose from b2t, travelplanner"
    assert set(BENCHMARKS) == {"b2t", "travelplanner"}


def test_entries_resolve_lazily_and_a_missing_module_is_one_clear_error(monkeypatch):
    from sandbox.benchmarks import benchmark_class
    from sandbox.benchmarks.travelplanner.benchmark import TravelPlannerBenchmark

    assert benchmark_class("travelplanner") is TravelPlannerBenchmark
    monkeypatch.setitem(BENCHMARKS, "ghost", "sandbox.ghost.benchmark:GhostBenchmark")
    with pytest.raises(BenchmarkError, match="'ghost' is not available .*sandbox.ghost.benchmark"):
        get_benchmark("ghost", "/nonexistent")


def test_launch_scripts_refuse_an_unknown_benchmark_in_one_line(tmp_path):
    command = [
        sys.executable,
        str(ROOT / "launch" / "eval.py"),
        "--benchmark",
        "tripadvisor",
        "--data",
        str(tmp_path),
        "--policy",
        "expert",
    ]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) <= 2 and "'tripadvisor'" in lines[-1] and "'b2t', 'travelplanner'" in lines[-1]


def test_b2t_judges_and_rewards_through_the_interface(mini_data):
    bench = get_benchmark("b2t", mini_data)
    assert isinstance(bench, B2TBenchmark) and bench.data_ready(mini_data) is False  # no train split
    pairs = bench.load_split("test")
    assert [v["id"] for v, _ in pairs] == ["test-easy-1", "test-hard-1"]
    (easy, easy_truth), (hard, hard_truth) = pairs
    perfect = bench.evaluate("<answer>" + json.dumps(valid_plan()) + "</answer>", easy, easy_truth)
    assert perfect.delivered and perfect.all_passed
    assert bench.reward(perfect, False).total == 2.0  # R_C + R_UPC, both 1
    assert bench.reward(perfect, True).total == 1.0  # minus the action penalty
    broken = valid_plan()
    broken[1]["weather"]["condition"] = "Snowy"
    one_wrong = bench.evaluate(broken, hard, hard_truth)
    assert [r.name for r in one_wrong.failed] == ["weather_and_city_info"]
    missing = bench.evaluate(None, hard, hard_truth)
    assert not missing.delivered
    assert bench.reward(None, True).total == -1.0  # no answer: only the penalty
    metrics = bench.metrics([perfect, missing])
    assert metrics["n"] == 2 and metrics["final_pass_rate"] == 0.5 and metrics["delivery_rate"] == 0.5
    assert bench.headline(metrics) == {
        "final_pass": 0.5,
        "delivery": 0.5,
        "micro_pass_c": 0.5,
        "micro_pass_upc": 0.5,
    }
    assert bench.format_metrics(metrics).splitlines()[1].split()[:3] == ["all", "2", "50.0%"]


@pytest.mark.slow
def test_b2t_expert_answers_pass_every_constraint(small_benchmark):  # noqa: F811
    bench = get_benchmark("b2t", small_benchmark)
    assert bench.data_ready(small_benchmark)
    pairs = bench.load_split("test")[::5]
    answers = dict(bench.expert_answers(pairs))
    verdicts = [bench.evaluate(answers[v["id"]], v, t) for v, t in pairs]
    assert all(v.all_passed for v in verdicts), [v.failed for v in verdicts if not v.all_passed]
    assert [bench.reward(v, False).total for v in verdicts] == [2.0] * len(pairs)
    assert bench.metrics(verdicts)["final_pass_rate"] == 1.0


def test_b2t_prompt_world_and_sft_traces(small_benchmark):  # noqa: F811
    bench = get_benchmark("b2t", small_benchmark)
    first = bench.load_split("train")[0]
    visible, _ = first
    assert first.id == visible["id"] and first.visible is visible  # a typed Instance, still a pair
    prompt = bench.prompt(visible)
    world = bench.world_for(visible)
    assert prompt.memory and prompt.tools == world.tool_schemas()
    assert visible["instruction"] in prompt.messages[1]["content"]
    assert not bench.prompt(visible, variant="react").memory
    with pytest.raises(BenchmarkError, match="variant"):
        bench.prompt(visible, variant="cot")
    traces = bench.sft_traces(limit=2)
    assert len(traces) == 2 and traces[0]["id"] == visible["id"]
    assert traces[0]["messages"][:2] == prompt.messages  # SFT frames the expert with the same prompt
    # Python is listed only for episodes that run it (the episode environment is its one owner)
    names = [t["function"]["name"] for t in prompt.tools]
    with_python = bench.prompt(visible, python=True).tools
    assert "Python" not in names and [t["function"]["name"] for t in with_python] == [*names, "Python"]
    assert traces[0]["tools"] == with_python  # the SFT traces list every tool, as make_data wrote them


def test_b2t_errors_are_one_line(tmp_path):
    with pytest.raises(BenchmarkError, match=r"instances/test.jsonl not found \(build the data"):
        get_benchmark("b2t", tmp_path).load_split("test")
    with pytest.raises(BenchmarkError, match="missing .*world.sqlite"):
        get_benchmark("b2t", tmp_path).world_for({})
    with pytest.raises(BenchmarkError, match="takes no option"):
        get_benchmark("b2t", tmp_path, mode="fast")


def test_as_benchmark_wraps_store_paths_and_data_dirs(mini_data):
    for obj in (mini_data / "world.sqlite", str(mini_data / "world.sqlite"), mini_data, str(mini_data)):
        bench = as_benchmark(obj)
        verdict = bench.evaluate(valid_plan(), INSTANCE, GROUND_TRUTH)
        assert isinstance(bench, B2TBenchmark) and verdict.all_passed
    existing = B2TBenchmark(mini_data)
    assert as_benchmark(existing) is existing
