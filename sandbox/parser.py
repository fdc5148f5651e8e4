"""Parse one assistant turn in the action format of SPEC.md section 6.

A turn is `<think>…</think>`, then any number of `<tool_call>{"name": …, "arguments": {…}}</tool_call>`
and `<memory>{…}</memory>` blocks, or a final `<answer>…</answer>`. The bodies of `<think>` and
`<answer>` are free text (tags inside them are not interpreted). Anything else — malformed JSON,
unknown or unclosed tags, stray closing tags, text outside the blocks — becomes a `ParseError`
at its position, so the environment answers every problem in order. `parse_turn` never raises and
runs in time linear in the turn (up to a log factor): JSON bodies are read strictly
(`sandbox.strict_json`: finite numbers, bounded integers, no lone surrogates).
"""

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import Any

from sandbox.strict_json import StrictJSONError, loads_strict, scrub_surrogates
from sandbox.types import ResponseKind

_TRAILERS = ("<|im_end|>", "<|endoftext|>")
_TAG = re.compile(r"<(/?)([A-Za-z_][A-Za-z0-9_\-]*)>")
_KNOWN = ("think", "tool_call", "memory", "answer")
_SNIPPET = 60


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ParseError:
    """A problem in the turn; `kind` says which response block answers it."""

    message: str
    kind: ResponseKind = ResponseKind.TOOL


Action = ToolCall | dict | ParseError


@dataclass
class ParsedTurn:
    think: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    memory_ops: list[dict] = field(default_factory=list)
    answer: str | None = None
    errors: list[str] = field(default_factory=list)
    # Every tool call, memory operation and error in the order it appears in the text.
    actions: list[Action] = field(default_factory=list)

    def _add(self, action: Action) -> None:
        self.actions.append(action)
        if isinstance(action, ToolCall):
            self.tool_calls.append(action)
        elif isinstance(action, ParseError):
            self.errors.append(action.message)
        else:
            self.memory_ops.append(action)


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return json.dumps(text if len(text) <= _SNIPPET else text[:_SNIPPET] + "...", ensure_ascii=False)


def _load_json(body: str, tag: str, kind: ResponseKind) -> Any:
    """The body's JSON value, or a ParseError saying why it is not acceptable."""
    try:
        return loads_strict(body)
    except StrictJSONError as e:
        if e.syntax:
            return ParseError(f"<{tag}> body is {e}: {_snippet(body)}", kind=kind)
        return ParseError(f"<{tag}> {e}", kind=kind)


def _parse_tool_call(body: str) -> Action:
    obj = _load_json(body, "tool_call", ResponseKind.TOOL)
    if isinstance(obj, ParseError):
        return obj
    if not isinstance(obj, dict):
        return ParseError('<tool_call> body must be a JSON object {"name": ..., "arguments": {...}}')
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return ParseError('<tool_call> needs a string "name"')
    arguments = obj.get("arguments", {})
    if not isinstance(arguments, dict):
        return ParseError(
            f'<tool_call> "arguments" of {name} must be a JSON object, got {type(arguments).__name__}'
        )
    extra = sorted(set(obj) - {"name", "arguments"})
    if extra:
        return ParseError(f"<tool_call> of {name} has unknown field(s) {extra}; use only name and arguments")
    return ToolCall(name=name, arguments=arguments)


def _parse_memory(body: str) -> Action:
    obj = _load_json(body, "memory", ResponseKind.MEMORY)
    if isinstance(obj, ParseError):
        return obj
    if not isinstance(obj, dict):
        return ParseError(
            '<memory> body must be a JSON object {"action": ..., "key": ...}', kind=ResponseKind.MEMORY
        )
    return obj


def _strip_trailers(text: str) -> str:
    text = text.rstrip()
    changed = True
    while changed:
        changed = False
        for t in _TRAILERS:
            if text.endswith(t):
                text = text[: -len(t)].rstrip()
                changed = True
    return text


def _closing_positions(text: str) -> dict[str, list[int]]:
    """Tag name -> where its closing tags start, in order."""
    closings: dict[str, list[int]] = {}
    for m in _TAG.finditer(text):
        if m.group(1):
            closings.setdefault(m.group(2), []).append(m.start())
    return closings


def parse_turn(text: str) -> ParsedTurn:
    """Split one assistant turn into think text, actions in order, the answer and errors."""
    turn = ParsedTurn()
    if not isinstance(text, str):
        turn._add(ParseError(f"the turn must be text, got {type(text).__name__}"))
        return turn
    text = scrub_surrogates(_strip_trailers(text))  # echoed snippets must be encodable text
    pos = 0
    thinks: list[str] = []
    # Where each closing tag occurs, found in one pass: searching the text again for the closing
    # tag of each of 20k distinctly named unclosed tags would make the parser quadratic.
    closings = _closing_positions(text)
    while pos < len(text):
        m = _TAG.search(text, pos)
        stray = text[pos : m.start() if m else len(text)]
        if stray.strip():
            turn._add(
                ParseError(
                    f"text outside any tag: {_snippet(stray)}; put reasoning inside "
                    "<think>...</think> and actions in <tool_call>/<memory>/<answer> tags"
                )
            )
        if m is None:
            break
        closing, name = m.group(1) == "/", m.group(2)
        end_tag = f"</{name}>"
        if closing:
            turn._add(ParseError(f"closing tag {m.group(0)} without a matching opening tag"))
            pos = m.end()
            continue
        spots = closings.get(name, [])
        i = bisect.bisect_left(spots, m.end())
        close = spots[i] if i < len(spots) else -1
        if name not in _KNOWN:
            # An unclosed unknown tag consumes only itself, so later blocks are still parsed.
            pos = close + len(end_tag) if close >= 0 else m.end()
            turn._add(
                ParseError(
                    f"unknown tag <{name}>; the allowed tags are " + ", ".join(f"<{k}>" for k in _KNOWN)
                )
            )
            continue
        body = text[m.end() : close] if close >= 0 else text[m.end() :]
        pos = close + len(end_tag) if close >= 0 else len(text)
        if close < 0:
            turn._add(
                ParseError(
                    f"<{name}> is never closed with {end_tag}",
                    kind=ResponseKind.MEMORY if name == "memory" else ResponseKind.TOOL,
                )
            )
            if name == "think":
                thinks.append(body.strip())
            continue
        _add_block(turn, thinks, name, body)
    turn.think = "\n".join(thinks) if thinks else None
    return turn


def _add_block(turn: ParsedTurn, thinks: list[str], name: str, body: str) -> None:
    """A closed known block's content: reasoning, an action, or the answer (the first one only)."""
    if name == "think":
        thinks.append(body.strip())
    elif name == "tool_call":
        turn._add(_parse_tool_call(body))
    elif name == "memory":
        turn._add(_parse_memory(body))
    elif turn.answer is None:
        turn.answer = body.strip()
    else:
        turn._add(ParseError("more than one <answer> in a turn; only the first is kept"))
