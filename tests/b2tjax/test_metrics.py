"""Benchmark metrics on a hand-made set of verdicts against hand-computed values."""

from __future__ import annotations

import json
import time

import pytest

from sandbox.benchmarks.b2t.evaluator import CONSTRAINTS, ConstraintResult, EvalResult
from sandbox.benchmarks.b2t.metrics import compute_metrics, format_table


def verdict(difficulty: str, delivered: bool, failing: set[str]) -> EvalResult:
    results = [
        ConstraintResult(c.name, c.category, c.group, delivered and c.name not in failing, "")
        for c in CONSTRAINTS
    ]
    return EvalResult(delivered, results, "" if delivered else "not JSON", difficulty=difficulty)


@pytest.fixture
def verdicts():
    return [
        verdict("easy", True, set()),  # all pass
        verdict("easy", True, {"poi_authenticity", "complete_meals", "budget"}),  # 2 C, 1 UPC
        verdict("hard", False, set()),  # undelivered
        verdict("hard", True, {"cuisine_type"}),  # 1 UPC
    ]


def test_overall_metrics_match_hand_computation(verdicts):
    m = compute_metrics(verdicts)
    assert m["n"] == 4
    assert m["delivery_rate"] == pytest.approx(3 / 4)
    assert m["c_micro"] == pytest.approx((22 + 20 + 0 + 22) / 88)
    assert m["c_macro"] == pytest.approx(2 / 4)
    assert m["upc_micro"] == pytest.approx((10 + 9 + 0 + 9) / 40)
    assert m["upc_macro"] == pytest.approx(1 / 4)
    assert m["final_pass_rate"] == pytest.approx(1 / 4)
    pc = m["per_constraint"]
    assert len(pc) == 32
    for name in ("poi_authenticity", "complete_meals", "budget", "cuisine_type"):
        assert pc[name] == pytest.approx(2 / 4)
    assert pc["json_format"] == pytest.approx(3 / 4) and pc["seat_class"] == pytest.approx(3 / 4)


def test_per_difficulty_metrics(verdicts):
    per = compute_metrics(verdicts)["per_difficulty"]
    assert list(per) == ["easy", "hard"]
    easy, hard = per["easy"], per["hard"]
    assert (
        easy["n"],
        easy["delivery_rate"],
        easy["c_macro"],
        easy["upc_macro"],
        easy["final_pass_rate"],
    ) == (2, 1.0, 0.5, 0.5, 0.5)
    assert easy["c_micro"] == pytest.approx(42 / 44) and easy["upc_micro"] == pytest.approx(19 / 20)
    assert (
        hard["delivery_rate"],
        hard["c_micro"],
        hard["c_macro"],
        hard["upc_macro"],
        hard["final_pass_rate"],
    ) == (0.5, 0.5, 0.5, 0.0, 0.0)
    assert hard["upc_micro"] == pytest.approx(9 / 20)


def test_metrics_are_json_with_the_documented_keys(verdicts):
    m = json.loads(json.dumps(compute_metrics(verdicts)))
    assert {
        "delivery_rate",
        "c_micro",
        "c_macro",
        "upc_micro",
        "upc_macro",
        "final_pass_rate",
        "per_constraint",
        "per_difficulty",
    } <= set(m)
    assert all(0.0 <= v <= 1.0 for k, v in m.items() if isinstance(v, float))


def test_table_lists_every_split_and_constraint(verdicts):
    table = format_table(compute_metrics(verdicts))
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["split", "n", "Delivery"]
    assert lines[1].split()[:3] == ["all", "4", "75.0%"]
    assert lines[2].split()[0] == "easy" and lines[3].split()[0] == "hard"
    assert sum(line.startswith(c.name + " ") for line in lines for c in CONSTRAINTS) == 32
    assert "cuisine_type" in table and " 50.0%" in table


def test_empty_set_gives_zeros():
    m = compute_metrics([])
    assert m["n"] == 0 and m["final_pass_rate"] == 0.0 and m["per_difficulty"] == {}


def test_eval_cli_scores_a_plans_file(tmp_path):
    """launch/eval.py end to end: a valid plan, a broken one and a missing one."""
    import subprocess
    import sys
    from pathlib import Path

    from sandbox.benchmarks.b2t.evaluator.example import GROUND_TRUTH, INSTANCE, valid_plan
    from sandbox.benchmarks.b2t.evaluator.example_store import build_mini_world

    data = tmp_path / "data"
    (data / "instances").mkdir(parents=True)
    (data / "ground_truth").mkdir()
    build_mini_world(data / "world.sqlite")
    ids = ["test-easy-1", "test-hard-2", "test-hard-3"]
    with (
        open(data / "instances" / "test.jsonl", "w") as vis,
        open(data / "ground_truth" / "test.jsonl", "w") as hid,
    ):
        for i in ids:
            vis.write(json.dumps(dict(INSTANCE, id=i, difficulty=i.split("-")[1])) + "\n")
            hid.write(json.dumps(dict(GROUND_TRUTH, id=i)) + "\n")
    broken = valid_plan()
    broken[1]["weather"]["condition"] = "Snowy"
    plans = tmp_path / "plans.jsonl"
    plans.write_text(
        json.dumps({"id": ids[0], "plan": valid_plan()})
        + "\n"
        + json.dumps({"id": ids[1], "plan": "<answer>" + json.dumps(broken) + "</answer>"})
        + "\n"
        + json.dumps({"id": "other", "plan": []})
        + "\n"
    )
    out = tmp_path / "metrics.json"
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [
            sys.executable,
            str(root / "launch" / "eval.py"),
            "--data",
            str(data),
            "--plans",
            str(plans),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=root,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[1].split()[:3] == ["all", "3", "66.7%"]
    m = json.loads(out.read_text())
    assert m["delivery_rate"] == pytest.approx(2 / 3)
    assert m["c_micro"] == pytest.approx((22 + 21) / 66)
    assert m["final_pass_rate"] == pytest.approx(1 / 3)
    assert m["per_constraint"]["weather_and_city_info"] == pytest.approx(1 / 3)
    assert m["per_difficulty"]["easy"]["final_pass_rate"] == 1.0
    assert m["per_difficulty"]["hard"]["delivery_rate"] == 0.5
    assert "outside the selection" in proc.stderr


def _events(directory) -> list:
    """Every event of every TensorBoard file in `directory`, file by file in the order written
    (TFRecord framing: length, its CRC, the Event proto, its CRC)."""
    import struct

    from tensorboardX.proto.event_pb2 import Event

    out = []
    for path in sorted(directory.iterdir(), key=lambda p: p.stat().st_mtime_ns):
        data, at = path.read_bytes(), 0
        while at < len(data):
            (length,) = struct.unpack("<Q", data[at : at + 8])
            out.append(Event.FromString(data[at + 12 : at + 12 + length]))
            at += 12 + length + 4
    return out


def test_a_resumed_run_purges_the_killed_runs_later_steps_from_tensorboard(tmp_path):
    """TensorBoard's rule: a SessionLog START at step S hides every earlier event of step >= S."""
    from b2tjax.run.metrics import MetricsWriter

    first = MetricsWriter(tmp_path, total_steps=4, progress=False, enabled=True)
    for step in (1, 2, 3, 4):
        first.log(step, {"loss": float(step)})
    first.close()
    time.sleep(1.1)  # event files are named by the second: the resumed run's is another, newer one
    resumed = MetricsWriter(tmp_path, total_steps=4, progress=False, enabled=True, keep_until=2)
    for step in (3, 4):
        resumed.log(step, {"loss": 10.0 * step})
    resumed.close()
    shown: list[tuple[int, float]] = []  # the curve TensorBoard draws, point by point
    for event in _events(tmp_path / "tb"):
        if event.session_log.status == event.session_log.START:
            shown = [(s, v) for s, v in shown if s < event.step]
        shown += [(event.step, value.simple_value) for value in event.summary.value]
    assert shown == [(1, 1.0), (2, 2.0), (3, 30.0), (4, 40.0)]
    steps = [json.loads(line)["step"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]
