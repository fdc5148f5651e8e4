"""One agent per episode (`agent: single`): the Agent strategy of BenchmarkTask for the benchmark's
own prompt, its sandbox tools (and the optional Python tool), one record per episode judged by its
own answer, and the benchmark's expert traces as the SFT warm start."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from b2tjax.errors import UserError
from b2tjax.grpo.update import RolloutBatch
from b2tjax.sft.traces import sft_examples
from b2tjax.tasks.base import Scored
from b2tjax.tasks.scoring import score_records, segments_by_episode
from b2tjax.tasks.spec import RewardSpec, SftSpec
from rollout.agents.single import agent_episodes
from rollout.config import RolloutConfig
from rollout.prompt import token_counter
from sandbox.benchmarks import Benchmark, BenchmarkError, Instance
from sandbox.python_tool import PythonSandbox


class SingleAgent:
    """b2tjax.tasks.base.Agent for one agent per episode; see the module docstring."""

    def __init__(
        self, benchmark: Benchmark, tokenizer: Any, rollout: RolloutConfig, reward: RewardSpec, sft: SftSpec
    ):
        self.benchmark, self.tokenizer, self.rollout, self.reward, self.sft = (
            benchmark,
            tokenizer,
            rollout,
            reward,
            sft,
        )
        # built now: an unjailed Python tool is refused at start-up, not after the SFT phase
        self.python = PythonSandbox(isolation=rollout.python_tool_isolation) if rollout.python_tool else None

    def check_prompts(self, instances: Sequence[dict]) -> None:
        """The prompt of the largest instance, compacted as far as the benchmark can (a B2T
        trajectory is dropped), must fit rollout.max_prompt_tokens."""
        if not instances:
            return
        r = self.rollout
        largest = max(instances, key=lambda visible: len(json.dumps(visible)))
        try:
            self.benchmark.prompt(
                largest,
                variant=r.prompt_style,
                memory=r.memory_enabled,
                max_tokens=r.prompt_budget,
                count_tokens=token_counter(self.tokenizer),
                python=r.python_tool,
            )
        except BenchmarkError as err:
            raise UserError(f"rollout.max_prompt_tokens={r.prompt_budget} is too small: {err}") from None

    def sft_examples(self, train: Sequence[Instance]) -> list[dict] | None:
        traces = self.benchmark.sft_traces(self.sft.max_examples)
        if traces is None:
            return None
        return sft_examples(traces, self.tokenizer, self.sft.max_seq_len, python=self.rollout.python_tool)

    def episodes(self, pairs: Sequence[Instance]) -> list[Any]:
        visible = [inst for inst, _ in pairs]
        return agent_episodes(visible, self.benchmark, self.tokenizer, self.rollout, self.python)

    def score(self, episodes, records, pairs, local) -> list[Any]:
        """(its records, verdict, reward) per local episode: judged by the answer its last record
        (segment) holds, the reward on each of its records."""
        mine = [pair for pair, here in zip(pairs, local or [True] * len(pairs)) if here]
        g = self.reward
        verdicts, rewards = score_records(
            records, mine, self.benchmark, action_penalty=g.action_penalty, format_gate=g.format_gate
        )
        return list(zip(segments_by_episode(records), verdicts, rewards))

    def pooled(self, episodes: list[Any], items: list[Any]) -> Scored:
        """This process' episodes stand for everyone's (a single agent's are alike on every process)."""
        records = [r for segments, _, _ in items for r in segments]
        return Scored(episodes, records, [t[1] for t in items], [t[2] for t in items])

    def batch(self, scored: Scored, metrics: dict, group_size: int) -> RolloutBatch:
        """A prompt's G episodes contiguous; an episode of several segments says which records are
        one episode (they share its advantage: b2tjax/grpo/credit.py)."""
        records = scored.records
        if len({r.episode for r in records}) == len(records):
            return RolloutBatch(records, metrics)  # one record per episode
        return RolloutBatch(
            records,
            metrics,
            groups=[r.episode // group_size for r in records],
            episodes=[r.episode for r in records],
        )

    def metrics(self, scored: Scored) -> dict[str, Any]:
        return {}

    def answers(self, scored: Scored) -> list[str | None]:
        """A single agent's answer is its last segment's."""
        return [segments[-1].answer for segments in segments_by_episode(scored.records)]

    def eval_extras(self, scored: Scored) -> dict[str, Any]:
        return {}

    def eval_setting(self, scored: Scored, metrics: dict) -> str:
        """The prompt style, and whether the episodes had memory: the benchmark's prompt decides
        (`Prompt.memory`, which the episode's env follows), not the style's name."""
        memory = bool(scored.episodes) and all(e.env.memory_enabled for e in scored.episodes)
        return f"prompt {self.rollout.prompt_style}, memory {memory}"

    def length_caps(self) -> str:
        r = self.rollout
        return f"rollout.max_turns={r.max_turns}, rollout.max_turn_tokens={r.max_turn_tokens}"

    def report_sessions(self, scored: Scored) -> dict[int, Any] | None:
        return None
