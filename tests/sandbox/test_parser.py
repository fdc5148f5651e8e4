"""Action parser: the SPEC section 6 turn format, its errors, and that it never raises."""

from hypothesis import given, settings
from hypothesis import strategies as st

from sandbox.parser import ParseError, ToolCall, parse_turn
from tests.cpu_clock import cpu_seconds


def test_full_turn_with_think_calls_and_memory_in_order():
    text = (
        "<think>\nNeed hotels and weather.\n</think>\n\n"
        '<tool_call>\n{"name": "AccommodationSearch", "arguments": {"city": "Chengdu", "n": 3}}'
        "\n</tool_call>\n"
        '<memory>{"action": "write", "key": "city", "value": "Chengdu"}</memory>\n'
        '<tool_call>{"name": "WeatherSearch", "arguments": {"city": "Chengdu"}}</tool_call><|im_end|>'
    )
    turn = parse_turn(text)
    assert turn.think == "Need hotels and weather."
    assert turn.errors == [] and turn.answer is None
    assert turn.tool_calls == [
        ToolCall("AccommodationSearch", {"city": "Chengdu", "n": 3}),
        ToolCall("WeatherSearch", {"city": "Chengdu"}),
    ]
    assert turn.memory_ops == [{"action": "write", "key": "city", "value": "Chengdu"}]
    assert [type(a).__name__ for a in turn.actions] == ["ToolCall", "dict", "ToolCall"]


def test_answer_body_is_kept_verbatim_and_tags_inside_think_are_not_actions():
    plan = '[{"day": 1, "activities": [{"type": "meal", "name": "<Spicy> Pot"}]}]'
    turn = parse_turn(
        f"<think>I could <tool_call>x</tool_call> but I'm done</think>\n<answer>\n{plan}\n</answer>"
    )
    assert turn.answer == plan
    assert turn.tool_calls == [] and turn.errors == []
    assert "<tool_call>x</tool_call>" in turn.think


def test_missing_arguments_default_to_empty_dict():
    assert parse_turn('<tool_call>{"name": "TrainSearch"}</tool_call>').tool_calls == [
        ToolCall("TrainSearch", {})
    ]


def _errors(text):
    turn = parse_turn(text)
    return turn, turn.errors


def test_malformed_json_is_an_error_in_place():
    turn, errors = _errors(
        '<tool_call>{"name": "A", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "B", arguments}</tool_call>'
        '<memory>{"action": read}</memory>'
    )
    assert len(errors) == 2
    assert "not valid JSON" in errors[0] and "<tool_call>" in errors[0]
    assert "<memory> body is not valid JSON" in errors[1]
    assert isinstance(turn.actions[0], ToolCall)
    assert [a.kind for a in turn.actions[1:]] == ["tool", "memory"]  # answered in the right block


def test_structural_errors():
    cases = {
        '<tool_call>{"name": "A", "arguments": [1]}</tool_call>': "must be a JSON object, got list",
        '<tool_call>{"arguments": {}}</tool_call>': 'needs a string "name"',
        '<tool_call>["A"]</tool_call>': "must be a JSON object",
        '<tool_call>{"name": "A", "arguments": {}, "id": 1}</tool_call>': "unknown field(s) ['id']",
        "<memory>[1, 2]</memory>": "<memory> body must be a JSON object",
        '<tool_call>{"name": "A", "arguments": {}}': "<tool_call> is never closed",
        "<result>plan</result>": "unknown tag <result>",
        "</think>": "closing tag </think> without a matching opening tag",
        "I will now search.": 'text outside any tag: "I will now search."',
        "<answer>[]</answer><answer>[1]</answer>": "more than one <answer>",
    }
    for text, fragment in cases.items():
        turn, errors = _errors(text)
        assert len(errors) == 1, (text, errors)
        assert fragment in errors[0], (text, errors)
        assert turn.tool_calls == []


def test_unclosed_unknown_tag_does_not_swallow_later_calls():
    turn = parse_turn('<br><tool_call>{"name": "A", "arguments": {}}</tool_call>')
    assert turn.tool_calls == [ToolCall("A", {})]
    assert turn.errors == ["unknown tag <br>; the allowed tags are <think>, <tool_call>, <memory>, <answer>"]


def test_unclosed_think_keeps_text_and_flags_it():
    turn = parse_turn("<think>still thinking when the token cap hit")
    assert turn.think == "still thinking when the token cap hit"
    assert turn.errors == ["<think> is never closed with </think>"]


def test_empty_and_whitespace_turns_have_no_actions_and_no_errors():
    for text in ("", "  \n", "<|im_end|>", "<think></think>\n<|im_end|>"):
        turn = parse_turn(text)
        assert turn.actions == [] and turn.answer is None


def test_non_text_input_is_an_error_not_an_exception():
    assert parse_turn(None).errors == ["the turn must be text, got NoneType"]  # type: ignore[arg-type]


_pieces = st.sampled_from(
    [
        "<think>",
        "</think>",
        "<tool_call>",
        "</tool_call>",
        "<memory>",
        "</memory>",
        "<answer>",
        "</answer>",
        "<foo>",
        "{",
        "}",
        '"name"',
        ":",
        '"arguments"',
        "[",
        "]",
        "<|im_end|>",
        " ",
        "\n",
        "null",
        '{"name": "X", "arguments": {}}',
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_pieces, st.text(max_size=8)), max_size=30))
def test_random_text_never_raises_and_every_action_is_typed(parts):
    turn = parse_turn("".join(parts))
    assert len(turn.actions) == len(turn.tool_calls) + len(turn.memory_ops) + len(turn.errors)
    for a in turn.actions:
        assert isinstance(a, (ToolCall, ParseError, dict))
        if isinstance(a, ToolCall):
            assert isinstance(a.name, str) and isinstance(a.arguments, dict)


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_json_nested_past_the_recursion_limit_is_a_parse_error():
    for levels in (33, 1000, 100_000):
        turn = parse_turn(
            f'<tool_call>{{"name": "X", "arguments": {{"a": {_nested(levels)}}}}}</tool_call>'
            f'<memory>{{"action": "write", "key": "k", "value": {_nested(levels)}}}</memory>'
        )
        assert [(a.kind, a.message) for a in turn.actions] == [
            ("tool", "<tool_call> JSON is nested more than 32 levels deep"),
            ("memory", "<memory> JSON is nested more than 32 levels deep"),
        ]
    ok = parse_turn(f'<tool_call>{{"name": "X", "arguments": {{"a": {_nested(30)}}}}}</tool_call>')
    assert ok.errors == [] and len(ok.tool_calls) == 1


def test_unclosed_tags_are_parsed_in_linear_time():
    # Each unclosed tag used to search the rest of the text for its closing tag (quadratic: ~9 s here).
    for tag in ("<foo>", "<memory_response>"):
        assert cpu_seconds(parse_turn, tag * 50_000) < 4.0
        turn = parse_turn(tag * 50_000)
        assert len(turn.errors) == 50_000 and turn.errors[0].startswith("unknown tag")
