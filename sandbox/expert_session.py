"""The scripted expert's side of an episode: it acts through the same EpisodeEnv an agent does.

Shared by every benchmark's expert (B2T's sandbox/benchmarks/b2t/expert/planner.py, TravelPlanner's
expert), so all write their SFT traces through one transcript format, fail the same way when the
environment objects, and report one result type.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sandbox.env import EpisodeEnv, Response
from sandbox.types import ResponseKind


class ExpertFailure(RuntimeError):
    """The expert found no plan it can stand behind (the instance gets regenerated)."""


@dataclass
class ExpertResult:
    """One expert solve: `ok` with the answer (and the plan it wrote), or the reason it gave up."""

    ok: bool
    reason: str
    turns: list[dict[str, str]]  # assistant/user messages after the prompt
    answer: str | None = None
    any_error: bool = False
    plan: list[dict[str, Any]] | None = None
    replies: list[tuple[Response, ...]] = field(default_factory=list)  # the blocks of each user message


@dataclass
class ExpertSession:
    """The expert's running episode: environment, transcript and what it has learned."""

    env: EpisodeEnv
    turns: list[dict[str, str]] = field(default_factory=list)
    legs: dict[tuple[str, str], dict[str, tuple[int, float]]] = field(default_factory=dict)
    # the response blocks of each user message in `turns`, as the environment gave them: what an
    # episode under a context budget folds (rollout/replay.py)
    replies: list[tuple[Response, ...]] = field(default_factory=list)

    def act(self, think: str, memory: list[dict] = (), calls: list[dict] = ()) -> list[str]:
        """One assistant turn; returns the reply text of each tool call, in order."""
        if self.env.done:
            raise ExpertFailure("ran out of turns before finishing the plan")
        text = turn_text(think, memory, calls)
        step = self.env.step(text)
        self.turns.append({"role": "assistant", "content": text})
        self.turns.append({"role": "user", "content": step.rendered})
        self.replies.append(tuple(step.responses))
        errors = [r.text for r in step.responses if r.is_error]
        if errors:
            raise ExpertFailure(f"environment reported an error: {errors[0][:200]}")
        return [r.text for r in step.responses if r.kind is ResponseKind.TOOL]

    def answer(self, think: str, plan: list[dict[str, Any]]) -> str:
        body = json.dumps(plan, ensure_ascii=False)
        text = think_block(think) + f"<answer>{body}</answer>"
        step = self.env.step(text)
        self.turns.append({"role": "assistant", "content": text})
        if not step.done or step.answer is None:
            raise ExpertFailure("the environment did not accept the answer")
        return step.answer


def think_block(think: str) -> str:
    """Qwen3's native reasoning block: `<think>`, newline, the reasoning, newline, `</think>`, two
    newlines. What Qwen3 generates, and what its chat template renders from `reasoning_content`
    (docs/SPEC.md section 6), so a released Qwen3 is taught no new format."""
    return "<think>\n" + think.strip("\n") + "\n</think>\n\n"


def turn_text(think: str, memory: Sequence[dict] = (), calls: Sequence[dict] = ()) -> str:
    """One assistant turn in the agent's action format: the think block, then the memory
    operations, then the tool calls, one per line. Tool calls come last, each written as Qwen3's
    template writes an assistant message's `tool_calls` entry, so the turn is exactly the
    template's rendering of reasoning_content + content (the memory operations) + tool_calls."""
    parts = [f"<memory>{json.dumps(m, ensure_ascii=False)}</memory>" for m in memory]
    parts += ["<tool_call>\n" + json.dumps(c, ensure_ascii=False) + "\n</tool_call>" for c in calls]
    return think_block(think) + "\n".join(parts)


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    """A tool call as the parser reads it; arguments left as None are omitted."""
    return {"name": name, "arguments": {k: v for k, v in arguments.items() if v is not None}}


def unseen(names: Sequence[str], shown: str) -> list[str]:
    """The `names` (a plan's places and transport ids) that `shown` (the replies an answer's
    context still holds whole) does not contain: facts the answer could not read back there."""
    return [name for name in names if name not in shown]


def trace_replies(world: Any, turns: Sequence[dict[str, str]]) -> list[tuple[Response, ...]]:
    """The response blocks of each user message of an expert trace's `turns` (after its prompt), by
    stepping a fresh environment on `world` through the trace's assistant turns: what the trace
    folds under a context budget. ExpertFailure where a reply is not the one recorded (the trace was
    made on another world or with other tools)."""
    env = EpisodeEnv(world, memory_enabled=True, max_turns=len(turns))
    replies = []
    for i, message in enumerate(turns[:-1]):
        if message["role"] != "assistant":
            continue
        step = env.step(message["content"])
        if step.rendered != turns[i + 1]["content"]:
            raise ExpertFailure(
                f"turn {i // 2 + 1}: the environment's reply is not the one the trace recorded"
            )
        replies.append(tuple(step.responses))
    return replies
