"""The expert planner: real evaluator verdicts on its plans, and its chain-of-action traces."""

import json

import pytest

import sandbox
from sandbox.benchmarks import b2t
from sandbox.benchmarks.b2t.evaluator import evaluate_plan
from sandbox.benchmarks.b2t.expert import Expert, expert_answers
from sandbox.benchmarks.b2t.expert.schedule import (
    DayFrame,
    Leg,
    Place,
    meal_owed,
    needs_attraction,
    problems,
    timeline,
)
from sandbox.benchmarks.b2t.instances.loader import load_split
from tests.sandbox.test_instances import small_benchmark  # noqa: F401  (session fixture)
from tests.sandbox_fixtures import small_world_path  # noqa: F401  (session fixture)


def _pairs(data_dir, split):
    return [(x.visible, x.hidden) for x in load_split(data_dir, split)]


@pytest.mark.slow
def test_expert_plans_pass_all_32_constraints_on_the_test_split(small_benchmark):  # noqa: F811
    pairs = _pairs(small_benchmark, "test")
    answers = dict(expert_answers(pairs, small_benchmark / "world.sqlite"))
    for visible, hidden in pairs:
        result = evaluate_plan(answers[visible["id"]], visible, hidden, small_benchmark / "world.sqlite")
        failed = [(r.name, r.reason) for r in result.results if not r.passed]
        assert result.delivered and not failed, (visible["id"], failed)
        assert len(result.results) == 32


def test_sft_traces_replay_through_the_environment(small_benchmark):  # noqa: F811
    world = b2t.B2TTools(b2t.open_world(small_benchmark / "world.sqlite"))
    truth = {v["id"]: h for v, h in _pairs(small_benchmark, "train")}
    lines = (small_benchmark / "sft" / "train.jsonl").read_text().splitlines()
    assert len(lines) == len(truth)
    for line in lines[::7]:
        record = json.loads(line)
        messages = record["messages"]
        assert [m["role"] for m in messages[:2]] == ["system", "user"]
        assert "Behavior trajectory" in messages[1]["content"] and record["tools"]
        turns = messages[2:]
        assert [m["role"] for m in turns] == ["assistant", "user"] * (len(turns) // 2) + ["assistant"]
        env = sandbox.EpisodeEnv(world, memory_enabled=True, max_turns=len(turns))
        kinds = set()
        for i in range(0, len(turns), 2):
            parsed = sandbox.parse_turn(turns[i]["content"])
            assert parsed.think and not parsed.errors
            kinds.update("memory-" + op["action"] for op in parsed.memory_ops)
            kinds.update(c.name for c in parsed.tool_calls)
            step = env.step(turns[i]["content"])
            if i + 1 < len(turns):  # the recorded observation is exactly what the environment says
                assert step.rendered == turns[i + 1]["content"]
                # one block per action; memory replies are <tool_response>-wrapped too
                assert step.rendered.count("<tool_response>") == len(parsed.actions)
                assert step.rendered.count("<memory_response>") == len(parsed.memory_ops)
        assert step.done and not step.any_error and parsed.answer
        assert {
            "memory-write",
            "memory-read",
            "WeatherSearch",
            "AccommodationSearch",
            "RestaurantSearch",
            "AttractionSearch",
            "MapGuide",
        } <= kinds
        result = evaluate_plan(step.answer, None, truth[record["id"]], world.store)
        assert all(r.passed for r in result.results), record["id"]


def test_expert_reports_an_impossible_budget_instead_of_cheating(small_benchmark):  # noqa: F811
    visible, hidden = _pairs(small_benchmark, "test")[0]
    poor = json.loads(json.dumps(hidden))
    poor["query"]["budget"] = 50
    result = Expert(b2t.open_world(small_benchmark / "world.sqlite")).solve(visible, poor)
    assert not result.ok and result.answer is None
    assert "budget" in result.reason or "hotel" in result.reason


def test_day_timing_follows_the_meal_and_idle_rules():
    hotel = Place("hotel", "H", 30.0, 104.0)
    eat = [Place("restaurant", f"R{i}", 30.0, 104.0 + 0.01 * i, 6 * 60, 22 * 60) for i in range(3)]
    sight = Place("attraction", "A", 30.01, 104.0, 8 * 60, 18 * 60)
    leg = lambda a, b: Leg("Taxi", 10, 2.0)  # noqa: E731
    full = DayFrame(start_place=hotel)
    assert all(meal_owed(full, m) for m in ("breakfast", "lunch", "dinner")) and needs_attraction(full)
    kinds = ["breakfast", "lunch", "attraction", "dinner", "hotel"]
    stops = timeline(kinds, [eat[0], eat[1], sight, eat[2], hotel], full, leg)
    assert problems(stops, full, is_first=False) == []
    assert [(s.kind, s.start) for s in stops][:2] == [("breakfast", 500), ("lunch", 660)]
    # Without the afternoon attraction the day idles from 12:00 to 16:50: one rule breaks.
    bare = timeline(["breakfast", "lunch", "dinner", "hotel"], [eat[0], eat[1], eat[2], hotel], full, leg)
    assert set(problems(bare, full, is_first=False)) == {"no attraction", "idle over 2 h"}
    # Arriving at 19:10 owes no dinner (under 90 min of its window) and allows no sightseeing.
    late = DayFrame(start_place=hotel, arrive=(15 * 60, 19 * 60 + 10))
    assert not meal_owed(late, "dinner") and not needs_attraction(late)
    evening = timeline(["attraction", "hotel"], [sight, hotel], late, leg)
    assert "sightseeing after a late arrival" in problems(evening, late, is_first=True)
