"""The single-agent episode: one stream ("main") and a sandbox EpisodeEnv between its turns, plus
ForcedTokens (scripted assistant starts, teacher-forced) and `agent_episode`, which builds one
from a benchmark's visible instance."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rollout.config import RolloutConfig
from rollout.episodes import Continue, Episode, Stop, TurnOutcome
from rollout.prompt import prompt_ids, token_counter
from rollout.render import render_env_reply
from sandbox.benchmarks import as_benchmark
from sandbox.env import EpisodeEnv
from sandbox.types import StopReason


class AgentEpisode(Episode):
    """Single-agent tool-using episode: one stream, a sandbox EpisodeEnv between turns.

    `env` needs `step(text)` returning an object with `responses` (each with name and is_error),
    `rendered`, `done`, `answer` and `stop_reason` -- sandbox.EpisodeEnv's contract. The env's own
    `max_turns` ending maps to StopReason.MAX_TURNS (truncated).
    """

    def __init__(self, instance_id: str, prompt_ids: Sequence[int], env: Any, tokenizer: Any):
        self.instance_id = instance_id
        self.prompt_ids = list(prompt_ids)
        self.env = env
        self.tokenizer = tokenizer
        self.steps: list[Any] = []  # every StepResult, in order (for inspection and tests)

    def start(self) -> list[Continue]:
        return [Continue("main", self.prompt_ids)]

    def next_forced(self) -> list[int]:
        """Assistant tokens to teacher-force at the start of the next turn (none by default)."""
        return []

    def on_turn_end(self, stream: str, text: str, eos: bool) -> TurnOutcome:
        step = self.env.step(text)
        self.steps.append(step)
        errors = [bool(r.is_error) for r in step.responses]
        names = [str(r.name) for r in step.responses]
        if step.done:
            reason = (
                StopReason.ANSWER
                if step.answer is not None
                else StopReason.MAX_TURNS
                if step.stop_reason == StopReason.MAX_TURNS
                else StopReason.DONE
            )
            return TurnOutcome([Stop(stream, reason, step.answer)], errors, names)
        if eos:
            return TurnOutcome([Stop(stream, StopReason.EOS)], errors, names)
        reply = render_env_reply(self.tokenizer, step.rendered)
        answer = Continue(stream, reply, forced=self.next_forced(), responses=step.responses)
        return TurnOutcome([answer], errors, names)


class ForcedTokens(AgentEpisode):
    """An AgentEpisode whose turns start with scripted assistant text, teacher-forced.

    `forced_turns[k]` (k = 0-based turn index) is appended after the assistant header of turn k
    through the normal append path, with loss mask 0 and its span listed in `record.forced`, so it
    is never trained on; the model then samples the rest of the turn. A script that ends with
    `<|im_end|>` completes the turn without sampling. Used by tests and demos to drive a random
    model into tool calls, memory operations and answers.
    """

    def __init__(self, *args: Any, forced_turns: dict[int, str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.forced_turns = dict(forced_turns)
        self._turn = 0

    def _forced_for(self, turn: int) -> list[int]:
        text = self.forced_turns.get(turn)
        return self.tokenizer.encode(text) if text else []

    def start(self) -> list[Continue]:
        return [Continue("main", self.prompt_ids, forced=self._forced_for(0))]

    def next_forced(self) -> list[int]:
        return self._forced_for(self._turn)

    def on_turn_end(self, stream: str, text: str, eos: bool) -> TurnOutcome:
        self._turn += 1
        return super().on_turn_end(stream, text, eos)


def agent_episode(
    instance: dict[str, Any],
    benchmark: Any,
    tokenizer: Any,
    *,
    max_turns: int = 10,
    max_prompt_tokens: int | None = None,
    memory: bool = True,
    variant: str = "tool_agent",
    max_response_chars: int = 6000,
    python_tool: Any = None,
) -> AgentEpisode:
    """A tool-using episode for one visible instance of `benchmark` (a sandbox Benchmark; a B2T
    world is also accepted): the benchmark's prompt, a fresh EpisodeEnv on its world for the instance.

    The env offers memory exactly when the prompt does (`Prompt.memory`)."""

    bench = as_benchmark(benchmark)
    prompt = bench.prompt(
        instance,
        variant=variant,
        memory=memory,
        max_tokens=max_prompt_tokens,
        count_tokens=token_counter(tokenizer),
        python=python_tool is not None,
    )
    env = EpisodeEnv(
        bench.world_for(instance),
        memory_enabled=prompt.memory,
        python_tool=python_tool,
        max_turns=max_turns,
        max_response_chars=max_response_chars,
    )
    return AgentEpisode(str(instance["id"]), prompt_ids(prompt, tokenizer), env, tokenizer)


def agent_episodes(
    instances: Sequence[dict[str, Any]],
    benchmark: Any,
    tokenizer: Any,
    config: RolloutConfig,
    python_tool: Any = None,
) -> list[AgentEpisode]:
    """One episode per visible instance with `config`'s prompt and limits (training, evaluation
    and the rollouts script build them alike)."""
    return [
        agent_episode(
            inst,
            benchmark,
            tokenizer,
            max_turns=config.max_turns,
            max_prompt_tokens=config.prompt_budget,
            memory=config.memory_enabled,
            variant=config.prompt_style,
            max_response_chars=config.max_response_chars,
            python_tool=python_tool,
        )
        for inst in instances
    ]
