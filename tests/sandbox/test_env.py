"""The episode environment on the real small world: responses, order, errors, stopping."""

import json
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.env import EpisodeEnv, truncate_middle
from sandbox.python_tool import PythonLimits, PythonSandbox
from tests.sandbox_fixtures import small_world, small_world_path  # noqa: F401 - pytest fixtures

HOTELS = {"name": "AccommodationSearch", "arguments": {"city": "Chengdu", "n": 2}}
WEATHER = {"name": "WeatherSearch", "arguments": {"city": "Chengdu"}}


def call(obj: dict) -> str:
    return f"<tool_call>{json.dumps(obj)}</tool_call>"


def mem(obj: dict) -> str:
    return f"<memory>{json.dumps(obj)}</memory>"


@pytest.fixture(scope="module")
def python_pool():
    with PythonSandbox(num_workers=2, limits=PythonLimits(timeout_s=2.0), isolation="unsafe-ok") as pool:
        yield pool


def test_calls_and_memory_are_answered_in_order_with_the_worlds_text(small_world):
    env = EpisodeEnv(small_world)
    turn = (
        "<think>hotels, weather, remember</think>\n"
        + call(HOTELS)
        + mem({"action": "write", "key": "city", "value": "Chengdu"})
        + call(WEATHER)
        + mem({"action": "read", "key": "all"})
        + "<|im_end|>"
    )
    step = env.step(turn)
    assert [(r.kind, r.name) for r in step.responses] == [
        ("tool", "AccommodationSearch"),
        ("memory", "memory"),
        ("tool", "WeatherSearch"),
        ("memory", "memory"),
    ]
    expected_hotels = small_world.call_tool(HOTELS["name"], HOTELS["arguments"])
    assert not expected_hotels.is_error
    assert step.responses[0].text == truncate_middle(expected_hotels.text, env.max_response_chars)
    assert step.responses[2].text == truncate_middle(
        small_world.call_tool(WEATHER["name"], WEATHER["arguments"]).text, env.max_response_chars
    )
    assert json.loads(step.responses[3].text) == {"city": "Chengdu"}
    assert step.rendered == "\n".join(
        [
            f"<tool_response>\n{step.responses[0].text}\n</tool_response>",
            f"<tool_response>\n<memory_response>\n{step.responses[1].text}\n</memory_response>\n</tool_response>",
            f"<tool_response>\n{step.responses[2].text}\n</tool_response>",
            '<tool_response>\n<memory_response>\n{"city": "Chengdu"}\n</memory_response>\n</tool_response>',
        ]
    )
    # each block is the tool message whose content is the response (a memory one keeps its tags)
    assert [r.content for r in step.responses[2:]] == [
        step.responses[2].text,
        '<memory_response>\n{"city": "Chengdu"}\n</memory_response>',
    ]
    assert (step.done, step.answer, step.any_error, step.stop_reason) == (False, None, False, None)


def test_errors_are_answered_in_place_and_any_error_is_cumulative(small_world):
    env = EpisodeEnv(small_world)
    step = env.step(
        call({"name": "TeleportSearch", "arguments": {}})
        + '<tool_call>{"name": "WeatherSearch", "arguments": {"city": </tool_call>'
        + call(WEATHER)
        + mem({"action": "read", "key": "nothing"})
    )
    assert [r.is_error for r in step.responses] == [True, True, False, True]
    assert [r.kind for r in step.responses] == ["tool", "tool", "tool", "memory"]
    assert "not valid JSON" in step.responses[1].text
    assert step.any_error and env.any_error
    clean = env.step(call(WEATHER))
    assert not clean.responses[0].is_error
    assert clean.any_error  # the action penalty looks at the whole episode


def test_memory_disabled_answers_with_an_error(small_world):
    env = EpisodeEnv(small_world, memory_enabled=False)
    step = env.step(mem({"action": "write", "key": "k", "value": 1}))
    assert step.responses[0].is_error and "memory module is disabled" in step.responses[0].text
    assert step.rendered.startswith("<tool_response>\n<memory_response>\nError: ")


def test_turn_without_action_gets_instructions(small_world):
    env = EpisodeEnv(small_world)
    step = env.step("<think>hmm</think>")
    assert len(step.responses) == 1 and step.responses[0].is_error
    assert "<tool_call>" in step.responses[0].text and "<answer>" in step.responses[0].text
    assert not step.done


def test_answer_ends_the_episode(small_world):
    env = EpisodeEnv(small_world)
    env.step(call(WEATHER))
    step = env.step('<think>done</think><answer>[{"day": 1}]</answer><|im_end|>')
    assert (step.done, step.answer, step.stop_reason, step.responses, step.any_error) == (
        True,
        '[{"day": 1}]',
        "answer",
        [],
        False,
    )
    with pytest.raises(RuntimeError):
        env.step(call(WEATHER))


def test_answer_with_actions_does_not_run_them(small_world):
    env = EpisodeEnv(small_world)
    step = env.step(mem({"action": "write", "key": "k", "value": 1}) + "<answer>[]</answer>")
    assert step.done and step.answer == "[]" and step.any_error
    assert "must stand alone" in step.responses[0].text
    assert env.memory.snapshot() == {}


def test_max_turns_stops_the_episode(small_world):
    env = EpisodeEnv(small_world, max_turns=2)
    assert not env.step(call(WEATHER)).done
    last = env.step(call(WEATHER))
    assert (last.done, last.stop_reason, last.answer) == (True, "max_turns", None)
    assert len(last.responses) == 1  # the last turn's calls still ran


def test_long_responses_are_truncated_in_the_middle(small_world):
    env = EpisodeEnv(small_world, max_response_chars=300)
    big = {"name": "RestaurantSearch", "arguments": {"city": "Chengdu", "n": 20}}
    full = small_world.call_tool(big["name"], big["arguments"]).text
    assert len(full) > 300
    text = env.step(call(big)).responses[0].text
    assert len(text) <= 300 and "characters truncated" in text
    assert text[:50] == full[:50] and text[-50:] == full[-50:]


def test_python_tool_routing_and_parallel_calls(small_world, python_pool):
    no_python = EpisodeEnv(small_world).step(call({"name": "Python", "arguments": {"code": "1"}}))
    assert no_python.responses[0].is_error and "not available" in no_python.responses[0].text
    env = EpisodeEnv(small_world, python_tool=python_pool)
    slow = {"name": "Python", "arguments": {"code": "import time\ntime.sleep(0.6)\nprint('slept')"}}
    start = time.monotonic()
    step = env.step(call(slow) + call(WEATHER) + call(slow))
    elapsed = time.monotonic() - start
    assert [r.text for r in step.responses][::2] == ["slept", "slept"]
    assert elapsed < 1.1, f"two 0.6 s calls took {elapsed:.2f} s: not run in parallel"
    bad = env.step(call({"name": "Python", "arguments": {"source": "1"}}))
    assert bad.responses[0].is_error and "only 'code'" in bad.responses[0].text


def test_tool_output_reaches_the_model_without_nul_or_terminal_escapes(small_world, python_pool):
    """A program's output is plain text: NUL, bells, backspaces and escape sequences (colours,
    cursor moves, a window title) are dropped; tabs and newlines stay."""
    env = EpisodeEnv(small_world, python_tool=python_pool)
    code = r"print('a\x00b\x1b[31mred\x1b[0m\x1b]0;title\x07\x1b[2J\x08\x7fc\td\ne')"
    step = env.step(call({"name": "Python", "arguments": {"code": code}}))
    assert step.responses[0].text == "abredc\td\ne"
    unknown = env.step(call({"name": "No\u0000Tool\u001b[1m", "arguments": {}}))
    assert unknown.responses[0].is_error and not {"\x00", "\x1b"} & set(unknown.rendered)


def test_a_raising_tool_becomes_an_error_response(small_world):
    class Faulty:
        """The real world, except that one tool raises (tools must not, but the env guards)."""

        def call_tool(self, name, arguments):
            if name == "MapGuide":
                raise KeyError("broken index")
            return small_world.call_tool(name, arguments)

    step = EpisodeEnv(Faulty()).step(call({"name": "MapGuide", "arguments": {}}) + call(WEATHER))
    assert step.responses[0].is_error and "KeyError" in step.responses[0].text
    assert not step.responses[1].is_error


def test_truncate_middle_examples():
    assert truncate_middle("abcdef", 6) == "abcdef"
    # marker "\n...[73 characters truncated]...\n" is 33 characters: 27 kept, 14 head + 13 tail
    assert (
        truncate_middle("a" * 50 + "b" * 50, 60)
        == "a" * 14 + "\n...[73 characters truncated]...\n" + "b" * 13
    )
    assert truncate_middle("x" * 100, 10) == "x" * 10  # too small for a marker: plain cut


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.characters(blacklist_characters="[\n"), max_size=400),
    st.integers(min_value=0, max_value=300),
)
def test_truncate_middle_bounds_and_keeps_both_ends(text, limit):
    out = truncate_middle(text, limit)
    assert len(out) <= limit
    if len(text) <= limit:
        assert out == text
    elif "characters truncated" in out:
        head, _, rest = out.partition("\n...[")
        tail = rest.partition("]...\n")[2]
        assert text.startswith(head) and text.endswith(tail)
        assert f"[{len(text) - len(head) - len(tail)} characters truncated]" in out


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
    max_leaves=8,
)
_tool_names = st.sampled_from(
    [
        "AccommodationSearch",
        "RestaurantSearch",
        "FlightSearch",
        "TrainSearch",
        "WeatherSearch",
        "MapGuide",
        "AttractionSearch",
        "Nope",
    ]
)
_blocks = st.one_of(
    st.builds(
        lambda n, a: call({"name": n, "arguments": a}),
        _tool_names,
        st.dictionaries(
            st.sampled_from(["city", "n", "origin", "destination", "date", "preferences"]),
            _json_values,
            max_size=3,
        ),
    ),
    st.builds(lambda o: f"<memory>{json.dumps(o)}</memory>", _json_values),
    st.sampled_from(["<think>", "</answer>", "<tool_call>", "{", "garbage", "<answer>[]</answer>", "\n"]),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_blocks, max_size=4), min_size=1, max_size=3))
def test_random_turns_never_raise_and_flag_errors_consistently(small_world, turns):
    env = EpisodeEnv(small_world, max_turns=3)
    seen_error = False
    for parts in turns:
        if env.done:
            break
        step = env.step("".join(parts))
        seen_error = seen_error or any(r.is_error for r in step.responses)
        assert step.any_error == seen_error == env.any_error
        blocks = [
            r.text if r.kind == "tool" else f"<memory_response>\n{r.text}\n</memory_response>"
            for r in step.responses
        ]
        assert step.rendered == "\n".join(f"<tool_response>\n{b}\n</tool_response>" for b in blocks)
        assert step.done == (step.stop_reason is not None)


def test_deeply_nested_json_in_a_turn_is_answered_with_errors(small_world):
    deep = "[" * 1000 + "]" * 1000
    env = EpisodeEnv(small_world)
    step = env.step(
        f'<tool_call>{{"name": "WeatherSearch", "arguments": {{"city": {deep}}}}}</tool_call>'
        f'<memory>{{"action": "write", "key": "k", "value": {deep}}}</memory>'
    )
    assert [(r.kind, r.is_error) for r in step.responses] == [("tool", True), ("memory", True)]
    assert all("nested more than 32 levels" in r.text for r in step.responses)


def test_one_turns_responses_are_capped_with_an_error_note(small_world):
    search = call({"name": "RestaurantSearch", "arguments": {"city": "Chengdu", "n": 20}})
    env = EpisodeEnv(small_world, max_response_chars=1000, max_turn_chars=5000)
    step = env.step(search * 1000)
    assert len(step.rendered) < 5000 + 300  # was 1000 full responses (about 1 MB here)
    kept, note = step.responses[:-1], step.responses[-1]
    assert 1 <= len(kept) <= 5 and all(r.name == "RestaurantSearch" for r in kept)
    assert (
        note.is_error
        and step.any_error
        and note.text.startswith(f"Error: {1000 - len(kept)} more response(s) of this turn (")
    )
    assert "at most 5000 characters" in note.text
    small = EpisodeEnv(small_world, max_response_chars=1000, max_turn_chars=5000).step(search * 2)
    assert [r.name for r in small.responses] == ["RestaurantSearch"] * 2 and not small.any_error
