"""Small value types shared by the tools, the Python sandbox, the episode environment and every
benchmark: a tool's result, why an episode stopped, the World an agent acts in, and the prompt."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolResult:
    """What one tool call returns to the agent: text for the context, and whether it failed.

    Tools never raise into the caller; a failure is a result with `is_error=True` and a message
    that tells the agent what to fix. A failure of the environment itself (a corrupt or unreadable
    store) is `env_fault=True` with `is_error=False`: the agent did nothing wrong and must not be
    penalised, and the run can count or drop such episodes.
    """

    text: str
    is_error: bool = False
    env_fault: bool = False

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(text=f"Error: {message}", is_error=True)

    @classmethod
    def environment_fault(cls, message: str) -> ToolResult:
        return cls(
            text=f"Error: {message}; this is a fault of the environment, not of the call", env_fault=True
        )


class StrEnum(str, enum.Enum):
    """The base of the project's enums of serialized names: JSON writes a member's plain value, a
    value read back from JSON compares equal to the member, and str()/f-strings give the value (as
    enum.StrEnum, which Python 3.10 lacks)."""

    __str__ = str.__str__
    __format__ = str.__format__


class StopReason(StrEnum):
    """Why an episode (one stream) stopped."""

    ANSWER = "answer"  # the environment accepted a final <answer>
    DONE = "done"  # the environment ended the episode without an answer
    EOS = "eos"  # the model emitted <|endoftext|> without an answer
    MAX_TURNS = "max_turns"
    MAX_TURN_TOKENS = "max_turn_tokens"
    MAX_TOTAL_TOKENS = "max_total_tokens"
    ERROR = "error"  # the episode's environment raised; recorded, never re-raised
    FOLDED = "folded"  # a segment ended: the stream goes on in a new segment with old replies folded
    CONTEXT_BUDGET = "context_budget"  # folding every foldable reply left no room for the next turn


# Reasons that mean the episode was cut by a limit: the answer is missing and the record is
# `truncated` (the reward says so).
TRUNCATING = frozenset(
    {StopReason.MAX_TURNS, StopReason.MAX_TURN_TOKENS, StopReason.MAX_TOTAL_TOKENS, StopReason.CONTEXT_BUDGET}
)


class ResponseKind(StrEnum):
    """Which block answers an action: `<tool_response>` (tool calls, malformed blocks) or
    `<memory_response>` (memory operations)."""

    TOOL = "tool"
    MEMORY = "memory"


class World(Protocol):
    """The tools of one instance, as EpisodeEnv and a benchmark's prompt need them: `call_tool`
    never raises (a failure is an error ToolResult) and `tool_schemas` are OpenAI-style."""

    def call_tool(self, name: str, arguments: dict) -> ToolResult: ...

    def tool_schemas(self) -> list[dict[str, Any]]: ...


@dataclasses.dataclass
class Prompt:
    """The agent prompt of one instance as data: rollout.prompt renders it into the exact text.

    `memory` says whether the prompt offers the memory module; the episode's EpisodeEnv enables
    memory exactly when it does. `dropped` counts the items left out to fit a token budget.
    """

    messages: list[dict[str, str]]
    tools: list[dict[str, Any]] | None
    memory: bool = True
    dropped: int = 0
