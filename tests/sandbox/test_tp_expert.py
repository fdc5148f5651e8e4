"""TravelPlanner expert, query generator, data preparation and the benchmark plugin.

The judge is tp-eval's `evaluate(..., mode="official")`, and for the 9 structured training
queries also the official harness itself (tests/tp_harness.py).
"""

from __future__ import annotations

import argparse
import json

import pytest

from sandbox.benchmarks.travelplanner import Database, evaluate
from sandbox.benchmarks.travelplanner.expert import TravelPlannerExpert
from sandbox.benchmarks.travelplanner.generator import generate_queries, plan_over
from sandbox.benchmarks.travelplanner.query_text import parse_query_text
from sandbox.benchmarks.travelplanner.tools import TravelPlannerWorld
from sandbox.env import EpisodeEnv
from tests.tp_harness import DATA_DIR, DATABASE_DIR, tp_harness  # noqa: F401 (fixture)

N_GENERATED = 45


@pytest.fixture(scope="module")
def db() -> Database:
    return Database.from_dir(DATABASE_DIR)


@pytest.fixture(scope="module")
def expert(db) -> TravelPlannerExpert:
    return TravelPlannerExpert(TravelPlannerWorld(db))


@pytest.fixture(scope="module")
def generated(db):
    return generate_queries(db, N_GENERATED, seed=7)


def test_expert_solves_all_45_training_queries_and_the_harness_agrees_on_the_9(db, expert, tp_harness):  # noqa: F811
    from sandbox.benchmarks.travelplanner.training import load_training

    for example in load_training(DATA_DIR):
        truth = {"query": example.query, "cities": example.reference_cities}
        result = expert.solve({"id": str(example.index)}, truth)
        assert result.ok and not result.any_error, (example.index, result.reason)
        assert evaluate(example.query, result.plan, db).final_pass, example.index
        if example.structured:
            verdicts = tp_harness.verdicts(example.query, result.plan)
            assert all(verdicts.commonsense.values()), example.index
            assert verdicts.hard is not None and all(v is not False for v in verdicts.hard.values())


def test_expert_solves_generated_queries_through_the_tools(db, expert, generated):
    assert len(generated) >= 0.95 * N_GENERATED
    solved = 0
    for g in generated:
        result = expert.solve({"id": "g"}, {"query": g.query, "cities": g.cities})
        solved += result.ok and evaluate(g.query, result.plan, db).final_pass
        # every fact came from a tool reply: the turns hold calls for each city's three searches
        said = "".join(m["content"] for m in result.turns if m["role"] == "assistant")
        assert all(
            f'{{"name": "{tool}", "arguments": {{"city": "{c}"}}}}' in said
            for c in g.cities
            for tool in ("AccommodationSearch", "RestaurantSearch", "AttractionSearch")
        )
    assert solved >= 0.95 * len(generated)


def test_generated_budgets_are_feasible_and_the_mix_is_balanced(db, generated):
    levels = {(g.query["level"], g.query["days"]) for g in generated}
    assert len(levels) == 9  # every level x duration
    for g in generated:
        q = g.query
        assert g.solution_cost <= q["budget"] < 1.6 * g.solution_cost + 100
        plan = plan_over(db, q, g.cities).plan  # the proof: a plan within the budget
        verdict = evaluate(q, plan, db)
        assert verdict.final_pass and verdict.hard["valid_cost"] is True
        assert q["visiting_city_number"] == len(g.cities) == (q["days"] - 1) // 2
        if q["days"] > 3:
            assert all(db.state_of(c) == q["dest"] for c in g.cities)


def test_generated_text_reads_back_and_generation_is_deterministic(db, generated):
    for g in generated:
        parsed = parse_query_text(g.query["query"], db.city_states)
        assert {k: parsed[k] for k in g.query} == g.query
    again = generate_queries(db, 6, seed=7)
    assert [g.query for g in again] == [g.query for g in generated[:6]]
    assert [g.query for g in generate_queries(db, 6, seed=8)] != [g.query for g in again]


def test_expert_avoids_names_it_cannot_write_on_one_line(db, expert):
    # Phoenix's cheapest fitting stay for 7 people has newlines in its name (a failure found at scale)
    query = {
        "org": "Stockton",
        "dest": "Arizona",
        "days": 7,
        "visiting_city_number": 3,
        "date": [f"2022-03-0{d}" for d in range(2, 9)],
        "people_number": 7,
        "local_constraint": {
            "house rule": "pets",
            "cuisine": None,
            "room type": "not shared room",
            "transportation": "no self-driving",
        },
        "budget": 17300,
        "query": "",
        "level": "hard",
    }
    result = expert.solve({"id": "q"}, {"query": query, "cities": ["Phoenix", "Flagstaff", "Tucson"]})
    assert result.ok and evaluate(query, result.plan, db).final_pass
    assert "BEDSTUY" not in json.dumps(result.plan)


def test_unsolvable_query_is_a_failed_result_not_an_exception(expert, generated):
    query = dict(generated[0].query, budget=10)
    result = expert.solve({"id": "g"}, {"query": query, "cities": generated[0].cities})
    assert not result.ok and "budget" in result.reason


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory, db):
    from sandbox.benchmarks.travelplanner.prepare import make_data

    out = tmp_path_factory.mktemp("tpdata")
    args = argparse.Namespace(tp_data=DATA_DIR, generated=9, scale="small", seed=3, no_expert=False)
    make_data(out, args, lambda msg: None)
    return out


def test_make_data_and_the_plugin_end_to_end(data_dir):
    from sandbox.benchmarks import get_benchmark

    bench = get_benchmark("travelplanner", data_dir)
    pairs = bench.load_split("train")
    assert len(pairs) == 45 + 9 and [v["id"] for v, _ in pairs][:2] == ["train-00", "train-01"]
    dev = bench.load_split("dev")  # held out: another random stream
    assert len(dev) == 12
    assert not {t["query"]["query"] for _, t in dev} & {t["query"]["query"] for _, t in pairs}
    assert {v["id"] for v, _ in dev}.isdisjoint(t["id"] for t in bench.sft_traces())
    assert all(v["query"] and "budget" not in v for v, _ in pairs)  # the structured query stays hidden
    answers = dict(bench.expert_answers(pairs))
    verdicts = [bench.evaluate(answers[v["id"]], v, t) for v, t in pairs]
    metrics = bench.metrics(verdicts)
    assert metrics["final_pass_rate"] == 1.0 and metrics["n"] == 54
    assert bench.reward(verdicts[0], False).total == 2.0
    assert bench.reward(bench.evaluate(None, *pairs[0]), False).total == 0.0
    broken = bench.evaluate('[{"days": 1}]', *pairs[0])
    assert not broken.all_passed and bench.reward(broken, True).total < 0
    assert len(bench.checks(verdicts[0])) == 13 and all(ok for _, ok, _ in bench.checks(verdicts[0]))
    assert [ok for _, ok, _ in bench.checks(broken)][8:] == [False] * 5  # gate failed
    assert json.loads(json.dumps(broken.to_dict()))["shaped"] is False
    from sandbox.benchmarks.travelplanner.metrics import applicable_hard

    assert sum(applicable_hard(v.query) for v in verdicts[:45]) == 105  # the official train constant
    assert "hard-7" in metrics["per_level_days"] and "final_pass_rate" in bench.format_metrics(metrics)


def test_sft_traces_replay_and_prompts_of_both_modes(data_dir):
    from sandbox.benchmarks import get_benchmark

    bench = get_benchmark("travelplanner", data_dir)
    visible, _ = bench.load_split("train")[10]
    traces = {t["id"]: t for t in bench.sft_traces()}
    trace = traces[visible["id"]]
    prompt = bench.prompt(visible)
    assert trace["messages"][:2] == prompt.messages and prompt.memory and prompt.tools
    env = EpisodeEnv(bench.world_for(visible))
    turns = trace["messages"][2:]
    for assistant, user in zip(turns[0::2], turns[1::2]):
        assert env.step(assistant["content"]).rendered == user["content"]
    sole = get_benchmark("travelplanner", data_dir, planning="sole-planning")
    sole.load_split("train")
    sole_prompt = sole.prompt(visible)
    assert sole_prompt.tools is None and not sole_prompt.memory
    assert "Accommodations in" in sole_prompt.messages[1]["content"]
    assert sole_prompt.messages[1]["content"].endswith(visible["query"])
    assert sole.world_for(visible).tool_schemas() == []


def test_a_user_query_file_is_a_split_with_its_reference_information(data_dir, tmp_path):
    from sandbox.benchmarks import BenchmarkError, get_benchmark
    from sandbox.benchmarks.travelplanner.training import load_training

    examples = load_training(DATA_DIR)[:3]
    rows = [
        {
            **{k: str(v) if k in ("date", "local_constraint") else v for k, v in e.query.items()},
            "reference_information": str(e.reference_info),
        }
        for e in examples
    ]  # official literals
    path = tmp_path / "validation.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    bench = get_benchmark("travelplanner", data_dir, planning="sole-planning", queries=path)
    pairs = bench.load_split("validation")
    assert [v["id"] for v, _ in pairs] == ["validation-0000", "validation-0001", "validation-0002"]
    assert pairs[1][0]["query"] == examples[1].query["query"]
    assert pairs[1][1]["query"]["date"] == examples[1].query["date"]
    assert "Restaurants in Pensacola" in bench.prompt(pairs[1][0]).messages[1]["content"]
    verdict = bench.evaluate(json.dumps(examples[0].human_plan), *pairs[0])
    assert verdict.all_passed  # the 9 structured human plans pass
    assert list(bench.expert_answers(pairs[:1])) == [("validation-0000", None)]  # never on user queries
    with pytest.raises(BenchmarkError, match="pass the official file"):
        get_benchmark("travelplanner", data_dir).load_split("test")
