"""TravelPlanner metrics, submission files and evaluate_files."""

import json

import pytest

from sandbox.benchmarks.travelplanner.evaluator import COMMONSENSE_NAMES, Evaluation
from sandbox.benchmarks.travelplanner.loader import LoaderError
from sandbox.benchmarks.travelplanner.metrics import applicable_hard, breakdown, compute_metrics, format_table
from sandbox.benchmarks.travelplanner.scoring import evaluate_files
from sandbox.benchmarks.travelplanner.submission import SubmissionError, read_submission, write_submission
from tests.tp_fixtures import human_plans, tp_db, train_queries  # noqa: F401 - fixtures


def _query(level: str, days: int, **constraints) -> dict:
    local = {"house rule": None, "cuisine": None, "room type": None, "transportation": None}
    local.update({k.replace("_", " "): v for k, v in constraints.items()})
    return {"level": level, "days": days, "local_constraint": local}


def _result(common_false: tuple = (), hard: dict | None = None, delivered: bool = True) -> Evaluation:
    common = {name: delivered and name not in common_false for name in COMMONSENSE_NAMES}
    full = (
        None
        if hard is None
        else {
            "valid_cost": None,
            "valid_room_rule": None,
            "valid_cuisine": None,
            "valid_room_type": None,
            "valid_transportation": None,
            **hard,
        }
    )
    return Evaluation(common, full, delivered=delivered)


MIXED_QUERIES = [
    _query("easy", 3),
    _query("medium", 5, house_rule="parties"),
    _query("medium", 3, transportation="no flight"),  # officially not in the hard denominator
    _query("hard", 7, house_rule="pets", cuisine=["Chinese"], room_type="entire room"),
    _query("hard", 3, cuisine=["Indian"], room_type="private room", transportation="no flight"),
    _query("easy", 5),
]
MIXED_RESULTS = [
    _result(hard={"valid_cost": True}),
    _result(hard={"valid_cost": False, "valid_room_rule": True}),
    _result(hard={"valid_cost": True, "valid_transportation": True}),
    _result(common_false=("is_valid_information_in_sandbox",)),  # gate closed
    _result(
        hard={
            "valid_cost": True,
            "valid_cuisine": False,
            "valid_room_type": True,
            "valid_transportation": True,
        }
    ),
    _result(delivered=False),
]


def test_metrics_of_a_mixed_set_equal_the_hand_computation():
    metrics = compute_metrics(MIXED_QUERIES, MIXED_RESULTS)
    # Delivered 5 of 6. Commonsense passes 8+8+8+7+8+0 = 39 of 48; all 8: plans 1, 2, 3, 5.
    # Hard denominator 1+2+1+4+4+1 = 13; passes 1+1+2+0+3 = 7 (the medium transportation pass
    # counts though not in the denominator); all applicable: plans 1 and 3, also the final passes.
    assert metrics == pytest.approx(
        {
            "delivery_rate": 5 / 6,
            "commonsense_micro": 39 / 48,
            "commonsense_macro": 4 / 6,
            "hard_micro": 7 / 13,
            "hard_macro": 2 / 6,
            "final_pass_rate": 2 / 6,
        }
    )


def test_breakdown_and_table_group_by_level_and_days():
    groups = breakdown(MIXED_QUERIES, MIXED_RESULTS)
    assert list(groups) == [("easy", 3), ("easy", 5), ("medium", 3), ("medium", 5), ("hard", 3), ("hard", 7)]
    assert groups[("medium", 3)]["final_pass_rate"] == 1.0 and groups[("medium", 3)]["n"] == 1
    assert groups[("hard", 3)]["hard_micro"] == pytest.approx(3 / 4)
    # Per group, every applicable hard check is in the denominator: the medium transportation pass
    # gives 2/2, not the official 2/1.
    assert groups[("medium", 3)]["hard_micro"] == 1.0
    assert groups[("hard", 3)]["passed"]["valid_room_type"] == 1
    table = format_table(compute_metrics(MIXED_QUERIES, MIXED_RESULTS), groups)
    assert "final_pass_rate       33.33%" in table and "hard       7" in table


def test_official_hard_denominator_of_the_training_set(train_queries):
    assert sum(applicable_hard(q) for q in train_queries) == 105


def test_submission_round_trips(tmp_path, train_queries, human_plans):
    plans = [human_plans[0], None, human_plans[2]]
    path = tmp_path / "sub.jsonl"
    write_submission(path, train_queries[:3], plans)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["idx"] for r in records] == [1, 2, 3]
    assert records[1] == {"idx": 2, "query": train_queries[1]["query"], "plan": None}
    assert read_submission(path) == plans
    # A plan written as a Python literal string (as some tools do) is read back as the same list.
    path.write_text(json.dumps({"idx": 1, "query": "q", "plan": repr(human_plans[0])}) + "\n")
    assert read_submission(path) == [human_plans[0]]
    path.write_text('{"idx": 1, "query": "q"}\n')
    with pytest.raises(SubmissionError, match="sub.jsonl:1"):
        read_submission(path)


def test_evaluate_files_scores_the_human_plans_fully(tmp_path, tp_db, train_queries, human_plans):
    queries = tmp_path / "train.jsonl"
    queries.write_text("".join(json.dumps(q) + "\n" for q in train_queries))
    plans = tmp_path / "plans.jsonl"
    broken = [*human_plans[:44], None]
    write_submission(plans, train_queries, broken)
    score = evaluate_files(queries, plans, split="train", mode="official", database=tp_db)
    assert score.metrics["final_pass_rate"] == pytest.approx(44 / 45)
    assert score.metrics["delivery_rate"] == pytest.approx(44 / 45)
    # The missing plan was a hard 7-day query: its 4 hard checks are lost from 105.
    assert score.metrics["hard_micro"] == pytest.approx(101 / 105)
    assert "final_pass_rate" in score.table()
    with pytest.raises(LoaderError, match="validation split has 180"):
        evaluate_files(queries, plans, split="validation", database=tp_db)
