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

from sandbox.env import EpisodeEnv


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


@dataclass
class ExpertSession:
    """The expert's running episode: environment, transcript and what it has learned."""

    env: EpisodeEnv
    turns: list[dict[str, str]] = field(default_factory=list)
    legs: dict[tuple[str, str], dict[str, tuple[int, float]]] = field(default_factory=dict)

    def act(self, think: str, memory: list[dict] = (), calls: list[dict] = ()) -> list[str]:
        """One assistant turn; returns the reply text of each tool call, in order."""
        if self.env.done:
            raise ExpertFailure("ran out of turns before finishing the plan")
        text = turn_text(think, memory, calls)
        step = self.env.step(text)
        self.turns.append({"role": "assistant", "content": text})
        self.turns.append({"role": "user", "content": step.rendered})
        errors = [r.text for r in step.responses if r.is_error]
        if errors:
            raise ExpertFailure(f"environment reported an error: {errors[0][:200]}")
        return [r.text for r in step.responses if r.kind == "tool"]

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
