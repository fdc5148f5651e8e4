"""A chat-completions request, read and checked: every refusal is an `ApiError` that the HTTP layer
answers as OpenAI's JSON error with its status code (never a traceback)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from rollout.sampling import TOP_LOGPROBS
from rollout.serve.chat import CALL_OPEN


class ApiError(Exception):
    """A refused request: HTTP `status`, OpenAI's error `kind` and the offending `param`."""

    def __init__(
        self, status: int, message: str, kind: str = "invalid_request_error", param: str | None = None
    ):
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": None}}


@dataclasses.dataclass(frozen=True)
class ChatRequest:
    """The fields the server acts on; unknown fields of a request are ignored (as OpenAI-compatible
    servers do), so newer clients keep working."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    parse_tools: bool  # tool_choice "none": tools stay in the prompt, calls stay text
    call_start: str  # tool_choice "required" / a named function: the given opening of the completion
    temperature: float
    top_p: float
    top_k: int
    max_tokens: int | None
    stop: tuple[str, ...]
    seed: int | None
    n: int
    logprobs: bool
    top_logprobs: int  # alternatives per token (0-20), only with logprobs
    stream: bool
    include_usage: bool


_ROLES = ("system", "user", "assistant", "tool")


def _number(body: dict, name: str, kind: type, default: Any, low: float, high: float) -> Any:
    value = body.get(name)
    if value is None:
        return default
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (kind is int and value != int(value))
    ):
        raise ApiError(
            400, f"{name} must be a{'n integer' if kind is int else ' number'}, got {value!r}", param=name
        )
    if not low <= value <= high:
        raise ApiError(400, f"{name} must be in [{low}, {high}], got {value}", param=name)
    return kind(value)


def _messages(body: dict) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list", param="messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in _ROLES:
            raise ApiError(400, f"messages[{i}]: role must be one of {', '.join(_ROLES)}", param="messages")
        content = m.get("content")
        if isinstance(content, list):  # OpenAI's content parts: text only
            if not all(isinstance(p, dict) and p.get("type") == "text" for p in content):
                raise ApiError(400, f"messages[{i}]: only text content parts are served", param="messages")
            m["content"] = "".join(str(p.get("text", "")) for p in content)
        elif content is not None and not isinstance(content, str):
            raise ApiError(400, f"messages[{i}]: content must be a string or text parts", param="messages")
        calls = m.get("tool_calls")
        if calls is not None and not (
            isinstance(calls, list)
            and all(isinstance(c, dict) and isinstance(c.get("function"), dict) for c in calls)
        ):
            raise ApiError(
                400, f"messages[{i}]: tool_calls must be a list of {{'function': ...}}", param="messages"
            )
    return messages


CALL_START = CALL_OPEN + "\n"  # how Qwen3's template opens a tool call


def _tools(body: dict) -> tuple[list[dict[str, Any]] | None, bool, str]:
    """(tools, whether calls are parsed, the completion's given opening). Decoding is not
    constrained: "required" opens a call for the model and a named function also writes its name,
    so the model samples the arguments (Qwen3's format, as the records' template renders a call)."""
    tools = body.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise ApiError(400, "tools must be a list of function schemas", param="tools")
    choice = body.get("tool_choice", "auto")
    if choice in ("auto", "none"):
        return tools or None, choice == "auto", ""
    if not tools:
        raise ApiError(400, "tool_choice other than 'auto' or 'none' needs tools", param="tool_choice")
    if choice == "required":
        return tools, True, CALL_START
    named = choice.get("function") if isinstance(choice, dict) and choice.get("type") == "function" else None
    name = named.get("name") if isinstance(named, dict) else None
    if name is None:
        raise ApiError(
            400,
            "tool_choice must be 'auto', 'none', 'required' or {'type': 'function', 'function': {'name': N}}",
            param="tool_choice",
        )
    if name not in [(t.get("function") or {}).get("name") for t in tools]:
        raise ApiError(400, f"tool_choice names {name!r}, which is not one of the tools", param="tool_choice")
    return tools, True, CALL_START + '{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": '


def _stop(body: dict) -> tuple[str, ...]:
    stop = body.get("stop")
    stop = [stop] if isinstance(stop, str) else stop or []
    if not isinstance(stop, list) or len(stop) > 4 or not all(isinstance(s, str) and s for s in stop):
        raise ApiError(400, "stop must be a string or a list of at most 4 non-empty strings", param="stop")
    return tuple(stop)


def parse_chat(body: Any, model_name: str) -> ChatRequest:
    """The request in `body` (decoded JSON), or ApiError (400 bad field, 404 unknown model)."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    if body.get("model") not in (None, model_name):
        raise ApiError(
            404,
            f"The model {body.get('model')!r} does not exist; this server serves {model_name!r}",
            kind="not_found_error",
            param="model",
        )
    top_logprobs = _number(body, "top_logprobs", int, 0, 0, TOP_LOGPROBS)
    if top_logprobs and not body.get("logprobs"):
        raise ApiError(400, "top_logprobs needs logprobs: true", param="top_logprobs")
    tools, parse_tools, call_start = _tools(body)
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    options = body.get("stream_options") or {}
    return ChatRequest(
        messages=_messages(body),
        tools=tools,
        parse_tools=parse_tools,
        call_start=call_start,
        temperature=_number(body, "temperature", float, 1.0, 0.0, 2.0),
        top_p=_number(body, "top_p", float, 1.0, 1e-9, 1.0),
        top_k=_number(body, "top_k", int, 0, -1, 2**31 - 1) if body.get("top_k") != -1 else 0,
        max_tokens=_number({"max_tokens": limit}, "max_tokens", int, None, 1, 2**31 - 1),
        stop=_stop(body),
        seed=_number(body, "seed", int, None, -(2**63), 2**63 - 1),
        n=_number(body, "n", int, 1, 1, 16),
        logprobs=bool(body.get("logprobs")),
        top_logprobs=top_logprobs,
        stream=bool(body.get("stream")),
        include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
    )
