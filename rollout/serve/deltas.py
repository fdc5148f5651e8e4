"""A streamed reply's text deltas: what of a completion decoded so far can no longer change.

`assistant_message` (rollout/serve/chat.py) splits a finished completion into reasoning, content and
tool calls. While it is still being decoded, `TextDeltas` sends only what that split cannot revise
once more tokens arrive: reasoning up to a possible `</think>`, content up to a possible
`<tool_call>` or stop string, never a trailing blank (the finished message is stripped) nor a
character still being decoded; the text it is given is `stable_text`, what the tokens so far settle.
So the deltas a client concatenates are prefixes of the finished message's fields, and `finish`
sends the rest: the remaining text and the parsed tool calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rollout.serve.chat import CALL_OPEN, THINK_CLOSE, THINK_OPEN


def _held_tail(text: str, marks: tuple[str, ...]) -> int:
    """Where a suffix of `text` that may grow into one of `marks` starts (len(text): none)."""
    longest = max(map(len, marks), default=0)
    for start in range(max(0, len(text) - longest + 1), len(text)):
        if any(m.startswith(text[start:]) for m in marks):
            return start
    return len(text)


def stable_text(decode: Callable[[list[int]], str], ids: list[int]) -> str:
    """The text of `ids` that more tokens cannot change: decoded up to a boundary before a token
    that decodes on its own to several characters, where the two sides' texts join into the whole's.
    A byte-fallback tokenizer decodes a run of byte tokens together (a byte valid alone turns into
    a replacement character beside the next), a byte-level one a character split across tokens; a
    token of several characters is no byte token and ends such a run, so what precedes it is final.
    The last token is always held back."""
    whole = decode(ids)
    for cut in range(len(ids) - 1, 0, -1):
        head = decode(ids[:cut])
        if len(decode(ids[cut : cut + 1])) > 1 and head + decode(ids[cut:]) == whole:
            return head
    return ""


def settled(text: str, parse_tools: bool, stops: tuple[str, ...]) -> tuple[str, str]:
    """(reasoning, content) of the completion's `text` so far that more text cannot change."""
    # a character whose bytes are still being decoded: a trailing replacement character (one inside
    # the text is final: bytes after a whole character cannot complete one before it)
    text = text.rstrip("\ufffd")
    found = [text.find(s) for s in stops if s in text]
    text = text[: min(found)] if found else text[: _held_tail(text, stops)] if stops else text
    body = text.lstrip()
    if THINK_OPEN.startswith(body):  # may still become a reasoning block
        return "", ""
    reasoning = ""
    if body.startswith(THINK_OPEN):
        inner = body[len(THINK_OPEN) :]
        if THINK_CLOSE not in inner:
            return inner[: _held_tail(inner, (THINK_CLOSE,))].strip("\n"), ""
        reasoning, body = inner.split(THINK_CLOSE, 1)
        reasoning, body = reasoning.strip("\n"), body.lstrip()
    if parse_tools:
        body = body[: body.index(CALL_OPEN)] if CALL_OPEN in body else body[: _held_tail(body, (CALL_OPEN,))]
    return reasoning, body.rstrip()


class TextDeltas:
    """One choice's streamed reasoning and content: what was sent, and what to send next."""

    def __init__(self, parse_tools: bool, stops: tuple[str, ...]):
        self.parse_tools, self.stops = parse_tools, stops
        self.sent = {"reasoning_content": "", "content": ""}

    def update(self, text: str) -> list[dict[str, Any]]:
        """The deltas that `text` (the whole completion so far) settles."""
        reasoning, content = settled(text, self.parse_tools, self.stops)
        return self._extend({"reasoning_content": reasoning, "content": content})

    def finish(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        """The finished assistant message's remaining deltas, its tool calls last."""
        fields = {key: message.get(key) or "" for key in self.sent}
        deltas = self._extend(fields)
        if "tool_calls" in message:
            deltas.append({"tool_calls": [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]})
        return deltas

    def _extend(self, fields: dict[str, str]) -> list[dict[str, Any]]:
        deltas = []
        for key, value in fields.items():
            sent = self.sent[key]
            if len(value) > len(sent) and value.startswith(sent):
                deltas.append({key: value[len(sent) :]})
                self.sent[key] = value
        return deltas
