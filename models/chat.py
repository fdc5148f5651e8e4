"""Qwen3's chat format in plain Python, text-identical to the official Jinja template.

``render(messages, tools)`` reproduces the ``chat_template`` of Qwen3's tokenizer_config.json
(``models/data/qwen3_tokenizer_config.json``) for: a system prompt with or without tool schemas,
user turns, assistant turns with reasoning (``<think>`` in ``content`` or a separate
``reasoning_content``) and ``tool_calls``, tool results (consecutive ``tool`` messages become one
user turn of ``<tool_response>`` blocks), multi-turn conversations and the generation prompt.
Tests compare it against the template rendered with jinja2.  Doing it in Python keeps the
rollout free of Jinja and lets us render pieces of a turn (``render_user_turn``,
``assistant_header``).

The template drops the ``<think>`` block of assistant turns before the last real user query; a
user message counts as a tool result (not a query) when it starts with ``<tool_response>`` and ends
with ``</tool_response>``. Our environment wraps every reply, memory replies included, that way
(docs/SPEC.md section 6), so an agent conversation keeps every turn's reasoning under the official
template, as our token-in/token-out records do. Messages the template silently skips (unknown
roles, an empty list) raise ``ValueError`` here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"

_TOOLS_PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
_TOOLS_POSTAMBLE = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    'within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, '
    '"arguments": <args-json-object>}\n</tool_call>' + IM_END + "\n"
)
_ROLES = ("system", "user", "assistant", "tool")


def tojson(value: Any) -> str:
    """The ``tojson`` filter transformers installs for chat templates (no HTML escaping, keeps unicode)."""
    return json.dumps(value, ensure_ascii=False)


def render_user_turn(content: str) -> str:
    """One user turn: ``<|im_start|>user\\n{content}<|im_end|>\\n``."""
    return f"{IM_START}user\n{content}{IM_END}\n"


def render_tool_turn(responses: Sequence[str]) -> str:
    """The user turn that returns tool results: one ``<tool_response>`` block per result, in order.

    Equals the template's rendering of consecutive ``tool`` messages.
    """
    if not responses:
        raise ValueError("render_tool_turn needs at least one response")
    body = "\n".join(f"<tool_response>\n{r}\n</tool_response>" for r in responses)
    return render_user_turn(body)


def assistant_header() -> str:
    """What precedes a generated assistant turn (the template's generation prompt)."""
    return f"{IM_START}assistant\n"


def render_tool_call(name: str, arguments: Mapping[str, Any] | str) -> str:
    """One ``<tool_call>`` block as the template writes it (arguments: dict -> JSON, str -> as is)."""
    args = arguments if isinstance(arguments, str) else tojson(arguments)
    return f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


def render_system(content: str | None, tools: Sequence[Mapping[str, Any]] | None) -> str:
    """The leading system turn: the system prompt, then the tool schemas when there are tools."""
    if tools:
        head = f"{IM_START}system\n" + (content + "\n\n" if content is not None else "")
        body = "".join("\n" + tojson(tool) for tool in tools)
        return head + _TOOLS_PREAMBLE + body + _TOOLS_POSTAMBLE
    if content is None:
        return ""
    return f"{IM_START}system\n{content}{IM_END}\n"


def _is_tool_response_text(content: Any) -> bool:
    return (
        isinstance(content, str)
        and content.startswith("<tool_response>")
        and content.endswith("</tool_response>")
    )


def _last_query_index(messages: Sequence[Mapping[str, Any]]) -> int:
    """Index of the last user message that is a real query (not a pasted tool response)."""
    for index in range(len(messages) - 1, -1, -1):
        m = messages[index]
        if (
            m["role"] == "user"
            and isinstance(m.get("content"), str)
            and not _is_tool_response_text(m["content"])
        ):
            return index
    return len(messages) - 1


def _split_reasoning(message: Mapping[str, Any], content: str) -> tuple[str, str]:
    """(reasoning, answer) from ``reasoning_content`` or from a ``<think>…</think>`` prefix of content."""
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        return reasoning, content
    if "</think>" in content:
        reasoning = content.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
        return reasoning, content.split("</think>")[-1].lstrip("\n")
    return "", content


def _render_assistant(message: Mapping[str, Any], content: str, show_reasoning: bool, is_last: bool) -> str:
    reasoning, content = _split_reasoning(message, content)
    if show_reasoning and (is_last or reasoning):
        text = (
            f"{IM_START}assistant\n<think>\n{reasoning.strip(chr(10))}\n</think>\n\n{content.lstrip(chr(10))}"
        )
    else:
        text = f"{IM_START}assistant\n{content}"
    for i, call in enumerate(message.get("tool_calls") or []):
        if content or i > 0:
            text += "\n"
        fn = call.get("function") or call
        text += render_tool_call(fn["name"], fn["arguments"])
    return text + f"{IM_END}\n"


def render(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = False,
    enable_thinking: bool = True,
) -> str:
    """Render OpenAI-style messages in Qwen3's chat format (== the official template).

    messages: dicts with ``role`` in {system, user, assistant, tool} and ``content``; assistant
    messages may carry ``reasoning_content`` and ``tool_calls`` (``[{"function": {"name",
    "arguments"}}]`` or ``[{"name", "arguments"}]``; arguments a dict or a JSON string).
    tools: OpenAI-style function schemas, written into the system turn.
    enable_thinking=False with add_generation_prompt pre-fills an empty ``<think>`` block.
    """
    if not messages:
        raise ValueError("render needs at least one message")
    for i, m in enumerate(messages):
        if m.get("role") not in _ROLES:
            raise ValueError(f"message {i}: role must be one of {_ROLES}, got {m.get('role')!r}")

    first_is_system = messages[0]["role"] == "system"
    parts = [render_system(messages[0]["content"] if first_is_system else None, tools)]
    last_query = _last_query_index(messages)
    n = len(messages)
    for i, m in enumerate(messages):
        role = m["role"]
        content = m.get("content") if isinstance(m.get("content"), str) else ""
        if role == "user" or (role == "system" and i > 0):
            parts.append(f"{IM_START}{role}\n{content}{IM_END}\n")
        elif role == "assistant":
            parts.append(_render_assistant(m, content, show_reasoning=i > last_query, is_last=i == n - 1))
        elif role == "tool":
            if i == 0 or messages[i - 1]["role"] != "tool":
                parts.append(f"{IM_START}user")
            parts.append(f"\n<tool_response>\n{content}\n</tool_response>")
            if i == n - 1 or messages[i + 1]["role"] != "tool":
                parts.append(f"{IM_END}\n")
    if add_generation_prompt:
        parts.append(assistant_header())
        if not enable_thinking:
            parts.append("<think>\n\n</think>\n\n")
    return "".join(parts)


# Private-use characters that bracket each message's text while it is rendered (encode_chat); any in
# the text itself are dropped, so a message cannot end its own bracket.
_OPEN, _CLOSE = "\ue000", "\ue001"
_TEXT_ROLES = ("system", "user", "tool")
_TURN_TOKENS = re.compile(f"({re.escape(IM_START)}|{re.escape(IM_END)})")  # the special tokens it writes


def _bracketed(message: Mapping[str, Any]) -> Mapping[str, Any]:
    """`message` with its text between the brackets (inside a `<tool_response>` wrapper, so the
    template still counts such a user turn as a tool result)."""
    content = message.get("content")
    if message.get("role") not in _TEXT_ROLES or not isinstance(content, str):
        return message
    content = content.replace(_OPEN, "").replace(_CLOSE, "")
    head, tail = ("<tool_response>", "</tool_response>") if _is_tool_response_text(content) else ("", "")
    body = content[len(head) : len(content) - len(tail)]
    return {**message, "content": f"{head}{_OPEN}{body}{_CLOSE}{tail}"}


def encode_chat(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = False,
) -> list[int]:
    """Token ids of `render(messages, tools, add_generation_prompt)` (private-use U+E000/U+E001
    dropped from the messages): the turn tokens the template writes are special ids, and a
    `<|im_end|>` written in a system, user or tool message (a tool's output, a sub-goal another
    agent wrote) is text (`tokenizer.encode_text`), so it cannot end a turn. Without such text the
    ids equal `tokenizer.encode(render(...))`: the text between turn tokens is encoded whole."""
    text = render([_bracketed(m) for m in messages], tools, add_generation_prompt)
    pieces = text.replace(_CLOSE, _OPEN).split(_OPEN)  # template, text, template, ... template
    ids: list[int] = []
    run: list[str] = []  # the text since the last turn token, encoded whole (as `encode` splits)
    for i, piece in enumerate(pieces):
        for j, part in enumerate([piece] if i % 2 else _TURN_TOKENS.split(piece)):
            if j % 2:  # a turn token the template wrote
                ids += tokenizer.encode_text("".join(run)) + [tokenizer.token_to_id(part)]
                run = []
            else:
                run.append(part)
    return ids + tokenizer.encode_text("".join(run))


__all__ = [
    "encode_chat",
    "render",
    "render_user_turn",
    "render_tool_turn",
    "assistant_header",
    "render_tool_call",
    "render_system",
    "tojson",
]
