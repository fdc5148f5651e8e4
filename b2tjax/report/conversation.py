"""An agent stream's turns as report data: each assistant turn parsed into its thought, tool calls
(with arguments), memory operations, answer and parse errors, followed by the environment's
response blocks; token counts per turn and, optionally, per-token log-probs for shading.

Streams come from a rollout record (decoded from its exact token ids) or from chat messages (the
scripted experts' traces). Responses are clipped to `max_chars` here so a 200-episode page stays
small; the page shows the clipped text, says how much was cut and shows the rest on a click.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from b2tjax.report.clip import clip as clip_text
from sandbox.parser import ToolCall, parse_turn

# Every reply block is a <tool_response>; a memory reply holds a <memory_response> inside it
# (docs/SPEC.md section 6). A bare <memory_response> block is what records written before that
# framing hold; reports still read them.
_RESPONSE = re.compile(
    r"<tool_response>\n?(.*?)\n?</tool_response>|<memory_response>\n?(.*?)\n?</memory_response>", re.DOTALL
)
_MEMORY = re.compile(r"<memory_response>\n?(.*?)\n?</memory_response>", re.DOTALL)
MAX_CHARS = 1500  # per response / thought / tool arguments shown in the page
LABEL_CHARS = 120  # per name (a tool name the model wrote can be any length)


def clip(text: str, max_chars: int = MAX_CHARS) -> dict[str, Any]:
    """The first `max_chars` characters shown, the rest (to a cap) one click away (report.clip)."""
    return clip_text(text, max_chars)


def turn(
    text: str,
    reply: str | None,
    *,
    tokens: int | None = None,
    shade: list[tuple[str, float]] | None = None,
    max_chars: int = MAX_CHARS,
    responses: Sequence[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One assistant turn and the environment's reply to it: `responses` as the environment gave
    them ({"kind", "name", "error", "text"}), else (our scripted traces only) `reply`'s blocks."""
    parsed = parse_turn(text)  # as the environment parsed it: a chat token the model wrote is an error
    calls, memory = [], []
    for action in parsed.actions:
        if isinstance(action, ToolCall):
            args = json.dumps(action.arguments, ensure_ascii=False)
            calls.append({"name": clip(action.name, LABEL_CHARS)["text"], "args": clip(args, max_chars)})
        elif isinstance(action, dict):
            memory.append(clip(json.dumps(action, ensure_ascii=False), max_chars))
    if responses is None:
        names = [
            a.name if isinstance(a, ToolCall) else "memory" if isinstance(a, dict) else ""
            for a in parsed.actions
        ]
        found = _blocks(reply or "")
        responses = [
            {"kind": kind, "name": names[k] if k < len(names) else "", "error": False, "text": body}
            for k, (kind, body) in enumerate(found)
        ]
    plain = not (parsed.think or parsed.tool_calls or parsed.memory_ops or parsed.answer is not None)
    return {
        "tokens": tokens,
        "think": clip(parsed.think or "", max_chars),
        "calls": calls,
        "memory": memory,
        "answer": clip(parsed.answer, max_chars) if parsed.answer is not None else None,
        "errors": [clip(e, max_chars) for e in parsed.errors],
        "text": clip(text.strip(), max_chars) if plain else None,
        "responses": [
            {
                "kind": str(r["kind"]),
                "name": clip(str(r["name"]), LABEL_CHARS)["text"],
                "error": bool(r["error"]),
                **clip(str(r["text"]), max_chars),
            }
            for r in responses
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


def from_record(record: Any, tokenizer: Any, *, shading: bool = False) -> list[dict[str, Any]]:
    """The turns of an EpisodeRecord, decoded from its ids; each turn's responses are the record's
    own (`EpisodeRecord.responses`, as the environment gave them), never split out of the decoded
    reply, whose tags the model's output can imitate. A record written before responses were kept
    shows each reply as one block, with the record's per-call names and error flags listed apart.
    With `shading`, each sampled token and its log-prob."""
    kept = list(getattr(record, "responses", None) or [])
    turns = []
    for k, (start, end) in enumerate(record.turns):
        until = record.turns[k + 1][0] if k + 1 < len(record.turns) else len(record.ids)
        shade = None
        if shading:
            shade = [(tokenizer.decode([record.ids[i]]), record.logprobs[i]) for i in range(start, end)]
        if kept:
            responses = [r for r in kept if r.get("turn") == k]
        else:
            reply = tokenizer.decode(record.ids[end:until]).strip()
            responses = [{"kind": "reply", "name": "", "error": False, "text": reply}] if reply else []
        turns.append(
            turn(
                tokenizer.turn_text(record.ids[start:end]),  # exactly the text the environment parsed
                None,
                tokens=sum(record.loss_mask[start:end]),
                shade=shade,
                responses=responses,
            )
        )
    return turns


def from_messages(messages: Sequence[dict[str, str]]) -> list[dict[str, Any]]:
    """The turns of a chat (each assistant message and the message that answers it)."""
    turns = []
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            reply = messages[i + 1]["content"] if i + 1 < len(messages) else ""
            turns.append(turn(message["content"], reply))
    return turns
