"""Inputs that once crashed or stalled the readers: huge numbers, lone surrogates, NaN, many tags.

Each must come back as an error result (or a one-line error for files), in well under a second,
and the environment's rendered reply must stay encodable text.
"""

import gc
import json
import time
from pathlib import Path

import pytest

from sandbox.env import EpisodeEnv
from sandbox.jsonl import read_jsonl_objects
from sandbox.parser import ParseError, parse_turn
from sandbox.strict_json import StrictJSONError, loads_strict
from tests.sandbox_fixtures import small_world, small_world_path  # noqa: F401 - pytest fixtures

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


def _elapsed(fn, *args) -> float:
    """Seconds for one call, with the cyclic GC paused (its passes grow with the whole heap)."""
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn(*args)
        return time.perf_counter() - start
    finally:
        gc.enable()


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
    t_small = min(_elapsed(parse_turn, small) for _ in range(3))
    t_large = min(_elapsed(parse_turn, large) for _ in range(3))
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
