"""models.chat.render must equal Qwen3's official chat template rendered with jinja2."""

from __future__ import annotations

import json

import jinja2.ext
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jinja2.sandbox import ImmutableSandboxedEnvironment

from models.chat import assistant_header, render, render_tool_turn, render_user_turn
from models.tokenizer import qwen3_reference_config

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "HotelSearch",
            "description": "Search hotels in a city. 搜索酒店",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "n": {"type": "integer", "default": 5}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "Weather",
            "description": "Forecast",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]


def _official_template():
    """The reference template in an environment configured like transformers' chat renderer."""
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = lambda x, ensure_ascii=False, indent=None, separators=None, sort_keys=False: (
        json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
    )
    return env.from_string(qwen3_reference_config()["chat_template"])


TEMPLATE = _official_template()


def official(messages, tools=None, add_generation_prompt=False, enable_thinking=True) -> str:
    return TEMPLATE.render(
        messages=messages,
        tools=tools,
        add_generation_prompt=add_generation_prompt,
        enable_thinking=enable_thinking,
    )


SYSTEM = {"role": "system", "content": "You are a travel planner. 你是旅行规划师。"}
USER = {"role": "user", "content": "Plan 3 days in Chengdu for 2 people, budget 6000 CNY."}
CALL_TURN = {
    "role": "assistant",
    "content": "<think>\nI need hotels first.\n</think>\n\n",
    "tool_calls": [
        {"type": "function", "function": {"name": "HotelSearch", "arguments": {"city": "成都", "n": 3}}},
        {"type": "function", "function": {"name": "Weather", "arguments": '{"city": "Chengdu"}'}},
    ],
}
TOOL_A = {"role": "tool", "content": '{"hotels": [{"name": "Jinjiang", "price": 980.0}]}'}
TOOL_B = {"role": "tool", "content": "Error: unknown city"}
ANSWER = {"role": "assistant", "content": '<think>\nEnough info.\n</think>\n\n<answer>[{"day": 1}]</answer>'}

CASES = {
    "system_user_prompt": ([SYSTEM, USER], None, True, True),
    "user_only_no_thinking": ([USER], None, True, False),
    "tools_full_episode": ([SYSTEM, USER, CALL_TURN, TOOL_A, TOOL_B, ANSWER], TOOLS, False, True),
    "tools_without_system": ([USER, CALL_TURN, TOOL_A], TOOLS, True, True),
    "multi_turn_drops_old_reasoning": (
        [
            SYSTEM,
            USER,
            {"role": "assistant", "content": "<think>old reasoning</think>First answer."},
            {"role": "user", "content": "Cheaper please."},
            {"role": "assistant", "content": "Second answer.", "reasoning_content": "\nnew reasoning\n"},
        ],
        None,
        False,
        True,
    ),
    "last_assistant_without_reasoning": (
        [USER, {"role": "assistant", "content": "Plain reply."}],
        None,
        False,
        True,
    ),
    "tool_calls_no_content_flat_form": (
        [
            USER,
            {"role": "assistant", "content": None, "tool_calls": [{"name": "Weather", "arguments": {}}]},
            TOOL_A,
        ],
        TOOLS,
        True,
        True,
    ),
    "user_pasted_tool_response_is_not_a_query": (
        [
            USER,
            CALL_TURN,
            {"role": "user", "content": "<tool_response>\nraw\n</tool_response>"},
            {"role": "assistant", "content": "<think>\nstep 2\n</think>\n\ndone"},
        ],
        TOOLS,
        False,
        True,
    ),
    "system_in_the_middle": ([USER, {"role": "system", "content": "Be brief."}, USER], None, True, True),
    "tool_content_not_string": ([USER, CALL_TURN, {"role": "tool", "content": None}], None, True, True),
    "several_think_tags": (
        [USER, {"role": "assistant", "content": "<think>a</think>b<think>c</think>\nd"}],
        None,
        False,
        True,
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_render_equals_official_template(name):
    messages, tools, gen, thinking = CASES[name]
    ours = render(messages, tools=tools, add_generation_prompt=gen, enable_thinking=thinking)
    assert ours == official(messages, tools, gen, thinking)


_contents = st.sampled_from(
    [
        "",
        "hi",
        "多行\n内容",
        "\n\nlead",
        "<think>r</think>x",
        "<think>\nr\n</think>\n\n",
        "<tool_response>x</tool_response>",
    ]
)
_call = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["HotelSearch", "Weather"]),
        "arguments": st.sampled_from([{}, {"city": "成都"}, '{"n": 1}']),
    }
)
_message = st.one_of(
    st.fixed_dictionaries({"role": st.just("user"), "content": _contents}),
    st.fixed_dictionaries({"role": st.just("tool"), "content": _contents}),
    st.fixed_dictionaries({"role": st.just("assistant"), "content": _contents}),
    st.fixed_dictionaries(
        {
            "role": st.just("assistant"),
            "content": _contents,
            "reasoning_content": st.sampled_from(["", "\nwhy\n"]),
        }
    ),
    st.fixed_dictionaries(
        {
            "role": st.just("assistant"),
            "content": _contents,
            "tool_calls": st.lists(_call, min_size=1, max_size=3),
        }
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    system=st.sampled_from([None, "sys"]),
    body=st.lists(_message, min_size=1, max_size=8),
    tools=st.sampled_from([None, [], TOOLS]),
    gen=st.booleans(),
    thinking=st.booleans(),
)
def test_render_equals_official_on_random_conversations(system, body, tools, gen, thinking):
    messages = ([{"role": "system", "content": system}] if system else []) + body
    assert render(messages, tools, gen, thinking) == official(messages, tools, gen, thinking)


def test_transformers_apply_chat_template_on_saved_tokenizer(tmp_path):
    transformers = pytest.importorskip("transformers")
    from models.tokenizer import load_tokenizer

    load_tokenizer("qwen3").save_hf(tmp_path)
    hf = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    for messages, tools, gen, thinking in CASES.values():
        expected = hf.apply_chat_template(
            messages, tools=tools, add_generation_prompt=gen, enable_thinking=thinking, tokenize=False
        )
        assert render(messages, tools, gen, thinking) == expected


def test_turn_helpers_compose_into_render():
    history = [SYSTEM, USER]
    prompt = render(history, tools=TOOLS, add_generation_prompt=True)
    assert prompt.endswith(assistant_header()) and assistant_header() == "<|im_start|>assistant\n"
    # What a rollout builds token by token equals the template's rendering of the finished episode:
    generated = '<think>\nhotels\n</think>\n\n<tool_call>\n{"name": "Weather", "arguments": {}}\n</tool_call>'
    env_turn = render_tool_turn(["sunny", '{"t": 20}'])
    assert env_turn == render_user_turn(
        '<tool_response>\nsunny\n</tool_response>\n<tool_response>\n{"t": 20}\n</tool_response>'
    )
    final = "<think>\ndone\n</think>\n\n<answer>[]</answer>"
    built = prompt + generated + "<|im_end|>\n" + env_turn + assistant_header() + final + "<|im_end|>\n"
    episode = history + [
        {
            "role": "assistant",
            "content": "<think>\nhotels\n</think>\n\n",
            "tool_calls": [{"name": "Weather", "arguments": {}}],
        },
        {"role": "tool", "content": "sunny"},
        {"role": "tool", "content": '{"t": 20}'},
        {"role": "assistant", "content": final},
    ]
    assert built == render(episode, tools=TOOLS) == official(episode, TOOLS)
    assert (
        render_user_turn("Hi")
        == render([{"role": "user", "content": "Hi"}])
        == "<|im_start|>user\nHi<|im_end|>\n"
    )


def test_a_tool_response_wrapped_reply_keeps_earlier_reasoning():
    """How our environment's replies keep every turn's reasoning under the official template: a
    user turn wrapped in <tool_response> (a memory reply) is not a new query, a bare one is."""
    memory = "<memory_response>\nStored 'k'\n</memory_response>"
    first = {"role": "assistant", "content": "<think>\nold reasoning\n</think>\n\n<memory>{}</memory>"}
    last = {"role": "assistant", "content": "<think>\ndone\n</think>\n\n<answer>[]</answer>"}
    for reply, kept in ((f"<tool_response>\n{memory}\n</tool_response>", True), (memory, False)):
        messages = [SYSTEM, USER, first, {"role": "user", "content": reply}, last]
        text = render(messages)
        assert text == official(messages)
        assert ("<think>\nold reasoning\n</think>\n\n<memory>{}</memory><|im_end|>" in text) == kept


def test_bad_messages_raise():
    with pytest.raises(ValueError, match="at least one"):
        render([])
    with pytest.raises(ValueError, match="role"):
        render([{"role": "narrator", "content": "x"}])
