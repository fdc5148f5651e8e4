"""Messages -> the exact prompt tokens, and a completion's tokens -> OpenAI's assistant message.

Prompts are rendered with the records' chat template (models.chat.encode_chat, as rollout/prompt.py
does). An agent resends its whole conversation each turn; re-encoding the assistant turns it got
back could tokenise them differently from what the model sampled (drift the trainer would see as
off-policy tokens). `TurnCache` remembers the exact ids of each conversation the server answered,
keyed by the messages as the client will send them back, so a longer conversation continues those
ids token for token and the engine's prefix reuse finds them in its rows.

A completion is split as the Qwen3 reasoning and tool parsers of common servers do: a leading
`<think>...</think>` block is `reasoning_content` (all of the text when the turn was cut inside
it), each `<tool_call>` block holding a JSON {"name", "arguments"} object is a tool call (one that
does not parse stays in the content).
"""

from __future__ import annotations

import collections
import json
import re
import uuid
from typing import Any

from models.chat import encode_chat, render

THINK_OPEN, THINK_CLOSE, CALL_OPEN = "<think>", "</think>", "<tool_call>"  # Qwen3's template's tags
_THINK = re.compile(rf"^\s*{THINK_OPEN}(.*?)(?:{THINK_CLOSE}\s*|\Z)", re.S)  # unclosed: cut while reasoning
_CALL = re.compile(rf"{CALL_OPEN}\s*(.*?)\s*</tool_call>", re.S)


def message_key(message: dict[str, Any]) -> str:
    """What identifies a message when a client sends it back (ids of tool calls and reasoning that
    clients may drop are left out: the template renders neither differently)."""
    calls = [
        (c["function"].get("name"), _arguments_text(c["function"].get("arguments")))
        for c in message.get("tool_calls") or []
    ]
    return json.dumps([message.get("role"), message.get("content") or "", calls])


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


class TurnCache:
    """conversation (messages + tools) -> the exact ids of its prompt and the completion answering
    it; the oldest entries are dropped past `size`."""

    def __init__(self, size: int = 4096):
        self.size = size
        self.ids: collections.OrderedDict[str, list[int]] = collections.OrderedDict()

    @staticmethod
    def key(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        return json.dumps([[message_key(m) for m in messages], tools], sort_keys=True)

    def put(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, ids: list[int]) -> None:
        self.ids[self.key(messages, tools)] = list(ids)
        while len(self.ids) > self.size:
            self.ids.popitem(last=False)

    def prompt_ids(
        self, tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> list[int]:
        """The prompt's ids: the cached ids of the conversation up to its last assistant message
        (exactly as sampled, earlier reasoning kept as the records keep it), then the newer
        messages' tokens; without such an entry the whole conversation encoded."""
        last = max((i for i, m in enumerate(messages) if m["role"] == "assistant"), default=-1)
        known = self.ids.get(self.key(messages[: last + 1], tools)) if last >= 0 else None
        tail = messages[last + 1 :]
        if known and known[-1] == tokenizer.im_end_id and tail and tail[0]["role"] != "system":
            tail_text = render(tail, None, add_generation_prompt=True)
            whole = render(messages, tools, add_generation_prompt=True)
            if whole.endswith("<|im_end|>\n" + tail_text):  # the newer messages render on their own
                return (
                    known
                    + tokenizer.encode("\n")
                    + encode_chat(tokenizer, tail, None, add_generation_prompt=True)
                )
        try:
            return encode_chat(tokenizer, messages, tools, add_generation_prompt=True)
        except ValueError as err:
            raise ValueError(f"messages: {err}") from None


def assistant_message(text: str, parse_tools: bool) -> tuple[dict[str, Any], bool]:
    """OpenAI's assistant message for a completion's text, and whether it calls tools."""
    reasoning = None
    if match := _THINK.match(text):
        reasoning, text = match.group(1).strip("\n"), text[match.end() :]
    calls = []
    if parse_tools:
        kept = []
        for block in _CALL.finditer(text):
            call = _tool_call(block.group(1))
            (calls if call else kept).append(call or block.group(0))
        text = _CALL.sub("", text) + "".join(kept)
    message: dict[str, Any] = {"role": "assistant", "content": text.strip() or None}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    return message, bool(calls)


def _tool_call(body: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    arguments = obj.get("arguments", {})
    return {
        "id": f"call_{uuid.uuid4().hex[:24]}",
        "type": "function",
        "function": {"name": obj["name"], "arguments": _arguments_text(arguments)},
    }
