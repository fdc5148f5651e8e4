"""Inputs that once crashed or stalled the readers: huge numbers, lone surrogates, NaN, many tags.

Each must come back as an error result (or a one-line error for files), in well under a second,
and the environment's rendered reply must stay encodable text.
"""

import json
from pathlib import Path

import pytest

from sandbox.env import EpisodeEnv
from sandbox.jsonl import read_jsonl_objects
from sandbox.parser import ParseError, parse_turn
from sandbox.strict_json import StrictJSONError, loads_strict
from tests.cpu_clock import cpu_seconds
from tests.sandbox_fixtures import (  # noqa: F401 - pytest fixtures
    mini_world,  # noqa: F401 (a fixture)
    small_world,
    small_world_path,
)

HUGE = "9" * 5000
BAD_VALUES = {
    "5000-digit integer": HUGE,
    "negative 5000-digit integer": "-" + HUGE,
    "lone high surrogate": '"\\ud800"',
    "lone low surrogate": '"x\\udfffy"',
    "surrogate in a key": '{"\\udbff": 1}',
    "NaN": "NaN",
    "Infinity": "-Infinity",
    "overflowing float": "1e999",
}


@pytest.mark.parametrize("label", sorted(BAD_VALUES))
def test_strict_json_refuses_in_one_line(label):
    with pytest.raises(StrictJSONError) as err:
        loads_strict(f'{{"value": {BAD_VALUES[label]}}}')
    assert "\n" not in str(err.value) and len(str(err.value)) < 200


def test_paired_surrogates_and_ordinary_numbers_still_parse():
    assert loads_strict('["\\ud83d\\ude00", 12.5, -3, 1e300]') == ["\U0001f600", 12.5, -3, 1e300]


@pytest.mark.parametrize("label", sorted(BAD_VALUES))
def test_tool_calls_and_memory_with_bad_values_are_error_results(small_world, label):
    value = BAD_VALUES[label]
    env = EpisodeEnv(small_world)
    turn = (
        f'<tool_call>{{"name": "WeatherSearch", "arguments": {{"city": {value}}}}}</tool_call>'
        f'<memory>{{"action": "write", "key": "k", "value": {value}}}</memory>'
    )
    step = env.step(turn)
    assert [r.is_error for r in step.responses] == [True, True]
    assert [r.kind for r in step.responses] == ["tool", "memory"]
    step.rendered.encode("utf-8")  # what the tokenizer gets must be text
    assert env.memory.snapshot() == {}


def test_a_turn_holding_raw_lone_surrogates_gets_an_encodable_reply(small_world):
    env = EpisodeEnv(small_world)
    step = env.step("stray \ud800 text <tool_call>{}</tool_call>")
    assert step.any_error
    step.rendered.encode("utf-8")


def test_jsonl_files_report_bad_numbers_with_file_and_line(tmp_path: Path):
    path = tmp_path / "plans.jsonl"
    path.write_text('{"id": "a", "plan": []}\n{"id": "b", "plan": ' + HUGE + "}\n")
    with pytest.raises(ValueError, match=r"plans\.jsonl:2: an integer has 5000 digits") as err:
        list(read_jsonl_objects(path, ValueError))
    assert "\n" not in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize(
    "make",
    [
        lambda n: "".join(f"<t{i}>" for i in range(n)),  # distinct unclosed unknown tags
        lambda n: "<think>" * n,  # the same unclosed tag
        lambda n: "</x>" * n,  # stray closing tags
        lambda n: "<tool_call>" + "[" * n,  # unclosed and deep
        lambda n: '<tool_call>{"name": "a", "arguments": {"x": "' + "\\ud800" * n + '"}}</tool_call>',
    ],
)
def test_the_parser_is_linear_in_the_turn(make):
    small, large = make(4000), make(16000)
    parse_turn(small)  # warm-up
    t_small = min(cpu_seconds(parse_turn, small) for _ in range(3))
    t_large = min(cpu_seconds(parse_turn, large) for _ in range(3))
    assert t_large < 1.0
    # 4x the input: linear is ~4x; quadratic would be ~16x. Generous for a busy machine.
    assert t_large < 10 * max(t_small, 5e-3), (t_small, t_large)


def test_many_blocks_are_each_answered():
    turn = parse_turn("".join(f"<u{i}>" for i in range(100)) + "<t1>never closed")
    assert len(turn.errors) == 102  # 101 unknown tags, then the text outside any tag
    assert all(isinstance(a, ParseError) for a in turn.actions)


def test_memory_values_round_trip_as_json(small_world):
    env = EpisodeEnv(small_world)
    env.step('<memory>{"action": "write", "key": "k", "value": {"budget": 12.5, "n": [1, 2]}}</memory>')
    read = env.step('<memory>{"action": "read", "key": "k"}</memory>')
    assert json.loads(read.responses[0].text) == {"k": {"budget": 12.5, "n": [1, 2]}}


# ---------------------------------------------------------------- plan readers


@pytest.mark.parametrize(
    "answer",
    [
        "Day 1:\n" + " " * 600,  # 35.8 s before (TravelPlanner's text format)
        "Day 1:\n" + " " * 20000,
        "```" + " " * 20000,  # an unclosed code fence: 1.8 s before (B2T)
        "```json" + " " * 20000,
        "Day 1:\n" + "* " * 10000 + ":",
        "Day " + "9" * 5000 + ":\nBreakfast: x",
        '[{"day": 1, "price": ' + "9" * 5000 + "}]",
    ],
)
def test_plan_readers_handle_pathological_answers_in_well_under_a_second(answer):
    from sandbox.benchmarks.b2t.plan import read_plan
    from sandbox.benchmarks.travelplanner.plan_reader import read_plan as tp_read_plan

    for reader in (read_plan, tp_read_plan):
        assert cpu_seconds(reader, answer) < 1.0, reader.__module__


def test_numbers_that_read_as_infinity_are_no_price():
    from sandbox.benchmarks.b2t.plan import read_plan

    meal = {"type": "meal", "name": "X", "meal": "lunch", "start_time": "12:00", "end_time": "13:00"}
    plan = read_plan([{"day": 1, "date": "2026-05-01", "activities": [{**meal, "price": "9" * 400}]}])
    assert plan.ok and plan.plan.days[0].activities[0].price is None


# ---------------------------------------------------------------- Σ (HiMAP's shared state)


def test_tool_numbers_must_be_finite():
    from sandbox.tools.args import Param, ToolArgError, validate_arguments

    params = (Param("budget", "number", "a budget", required=True),)
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(ToolArgError):
            validate_arguments("distribute_task", params, {"budget": bad})
    assert validate_arguments("distribute_task", params, {"budget": 10**30})["budget"] == 10**30


def test_sigma_commits_an_item_once_per_day_and_only_for_its_own_day(mini_world):
    from sandbox.benchmarks.b2t.evaluator.example import GROUND_TRUTH, INSTANCE, valid_plan
    from sandbox.benchmarks.b2t.himap.pricing import b2t_state
    from sandbox.himap.state import SigmaCode

    state = b2t_state(mini_world, INSTANCE, GROUND_TRUTH)
    day2 = valid_plan()[1]["activities"]
    show = next(a for a in day2 if a["type"] in ("entertainment", "attraction"))
    nine = state.commit(2, [show] * 9)
    assert nine.code == SigmaCode.DUPLICATE_VENUE and state.committed(2) == []
    assert state.commit(2, [show]).ok
    spent = state.spent
    assert state.commit(2, [dict(show)]).code == SigmaCode.DUPLICATE_VENUE and state.spent == spent
    dinner = next(a for a in day2 if a.get("meal") == "dinner")
    hoard = state.commit(1, [{**dinner, "day": 2}])  # day 1's executor takes day 2's dinner
    assert hoard.code == SigmaCode.BAD_ITEM and "day 2" in hoard.message
    assert state.committed(1) == []
