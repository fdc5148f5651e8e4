"""Environment replies as Qwen3 chat tokens, checked against the chat template and the real tokenizer."""

from __future__ import annotations

import pytest

from tests.sandbox_fixtures import small_world, small_world_path  # noqa: F401


@pytest.fixture(scope="module")
def qwen3():
    from models.tokenizer import load_tokenizer

    return load_tokenizer("qwen3")


def test_tool_reply_equals_template_tool_turn(small_world, qwen3):
    from models.chat import assistant_header, render_tool_turn
    from rollout.render import render_env_reply, reply_text
    from sandbox.env import EpisodeEnv

    env = EpisodeEnv(small_world, max_response_chars=200)
    step = env.step(
        '<tool_call>{"name": "AttractionSearch", "arguments": {"city": "Chengdu", "n": 3}}</tool_call>'
        '<tool_call>{"name": "NoSuchTool", "arguments": {}}</tool_call>'
    )
    assert [r.is_error for r in step.responses] == [False, True]
    text = reply_text(step.rendered)
    # after the sampled <|im_end|>: "\n" + the template's tool turn + the generation header
    assert text == "\n" + render_tool_turn([r.text for r in step.responses]) + assistant_header()
    ids = render_env_reply(qwen3, step.rendered)
    assert ids == qwen3.encode(text)  # piecewise == whole-text tokenisation
    assert ids[0] == qwen3.encode("\n")[0] and ids[-3:] == qwen3.encode("<|im_start|>assistant\n")
    assert "characters truncated" in step.responses[0].text  # long output cut in the middle...
    assert qwen3.decode(ids).count("</tool_response>") == 2  # ...closing tags survive


def test_memory_and_mixed_replies_are_the_templates_tool_turn(small_world, qwen3):
    """A memory reply is a tool message whose content is its <memory_response> block; a mixed turn
    is consecutive tool messages (docs/SPEC.md section 6)."""
    from models.chat import assistant_header, render_tool_turn
    from rollout.render import render_env_reply
    from sandbox.env import EpisodeEnv

    env = EpisodeEnv(small_world)
    step = env.step(
        '<memory>{"action": "write", "key": "k", "value": 1}</memory>'
        '<tool_call>{"name": "WeatherSearch", "arguments": {"city": "Chengdu"}}</tool_call>'
    )
    assert [r.kind for r in step.responses] == ["memory", "tool"]
    ids = render_env_reply(qwen3, step.rendered)
    want = "\n" + render_tool_turn([r.content for r in step.responses]) + assistant_header()
    assert qwen3.decode(ids) == want and ids == qwen3.encode(want)
    assert step.rendered.startswith("<tool_response>\n<memory_response>\nStored 'k'")
