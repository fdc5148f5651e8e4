"""An agent stream's turns as report data: each assistant turn parsed into its thought, tool calls
(with arguments), memory operations, answer and parse errors, followed by the environment's
response blocks; token counts per turn and, optionally, per-token log-probs for shading.

Streams come from a rollout record (decoded from its exact token ids) or from chat messages (the
scripted experts' traces). Responses are clipped to `max_chars` here so a 200-episode page stays
small; the page shows the clipped text and says how much was cut.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from sandbox.parser import ToolCall, parse_turn

# Every reply block is a <tool_response>; a memory reply holds a <memory_response> inside it
# (docs/SPEC.md section 6). A bare <memory_response> block is what records written before that
# framing hold; reports still read them.
_RESPONSE = re.compile(
    r"<tool_response>\n?(.*?)\n?</tool_response>|<memory_response>\n?(.*?)\n?</memory_response>", re.DOTALL
)
_MEMORY = re.compile(r"<memory_response>\n?(.*?)\n?</memory_response>", re.DOTALL)
_CHAT_TOKENS = re.compile(r"<\|im_(?:start|end)\|>(?:user|assistant|system)?\n?")
MAX_CHARS = 1500  # per response / thought kept in the page


def clip(text: str, max_chars: int = MAX_CHARS) -> dict[str, Any]:
    """{"text": the first `max_chars` characters, "cut": how many more there were}."""
    return {"text": text[:max_chars], "cut": max(0, len(text) - max_chars)}


def turn(
    text: str,
    reply: str,
    *,
    tokens: int | None = None,
    shade: list[tuple[str, float]] | None = None,
    max_chars: int = MAX_CHARS,
) -> dict[str, Any]:
    """One assistant turn and the environment's reply to it."""
    text = _CHAT_TOKENS.sub("", text)
    parsed = parse_turn(text)
    calls, memory = [], []
    for action in parsed.actions:
        if isinstance(action, ToolCall):
            calls.append({"name": action.name, "args": json.dumps(action.arguments, ensure_ascii=False)})
        elif isinstance(action, dict):
            memory.append(json.dumps(action, ensure_ascii=False))
    names = [
        a.name if isinstance(a, ToolCall) else "memory" if isinstance(a, dict) else "" for a in parsed.actions
    ]
    plain = not (parsed.think or parsed.tool_calls or parsed.memory_ops or parsed.answer is not None)
    return {
        "tokens": tokens,
        "think": clip(parsed.think or "", max_chars),
        "calls": calls,
        "memory": memory,
        "answer": clip(parsed.answer, max_chars) if parsed.answer is not None else None,
        "errors": list(parsed.errors),
        "text": clip(text.strip(), max_chars) if plain else None,
        # one response block per action, in order: name each by its call (parse errors stay "")
        "responses": [
            {
                "kind": kind,
                "name": names[k] if k < len(names) else "",
                "error": False,
                **clip(body, max_chars),
            }
            for k, (kind, body) in enumerate(_blocks(reply))
        ],
        "shade": [[piece, round(lp, 3)] for piece, lp in shade] if shade else None,
    }


def _blocks(reply: str) -> list[tuple[str, str]]:
    """(kind, body) of each response block of an environment reply, in order."""
    out = []
    for block in _RESPONSE.finditer(reply):
        wrapped, bare = block.groups()
        memory = _MEMORY.fullmatch(wrapped) if wrapped is not None else None
        if bare is not None:
            out.append(("memory", bare))
        elif memory is not None:
            out.append(("memory", memory.group(1)))
        else:
            out.append(("tool", wrapped))
    return out


def mark_errors(turns: list[dict[str, Any]], calls: Sequence[str], errors: Sequence[bool]) -> None:
    """Name each response and flag the failed ones from a record's per-call lists (in call order)."""
    responses = [r for t in turns for r in t["responses"]]
    for response, name, failed in zip(responses, calls, errors):
        response["name"], response["error"] = name, bool(failed)


def from_record(record: Any, tokenizer: Any, *, shading: bool = False) -> list[dict[str, Any]]:
    """The turns of an EpisodeRecord, decoded from its ids (assistant turn, then the tokens up to
    the next turn: the environment's reply); with `shading`, each sampled token and its log-prob."""
    turns = []
    for k, (start, end) in enumerate(record.turns):
        until = record.turns[k + 1][0] if k + 1 < len(record.turns) else len(record.ids)
        shade = None
        if shading:
            shade = [(tokenizer.decode([record.ids[i]]), record.logprobs[i]) for i in range(start, end)]
        turns.append(
            turn(
                tokenizer.decode(record.ids[start:end]),
                tokenizer.decode(record.ids[end:until]),
                tokens=sum(record.loss_mask[start:end]),
                shade=shade,
            )
        )
    mark_errors(turns, record.calls, record.errors)
    return turns


def from_messages(messages: Sequence[dict[str, str]]) -> list[dict[str, Any]]:
    """The turns of a chat (each assistant message and the message that answers it)."""
    turns = []
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            reply = messages[i + 1]["content"] if i + 1 < len(messages) else ""
            turns.append(turn(message["content"], reply))
    return turns
