"""A checkpoint's policy as launch/eval.py's single-agent plan writer: one greedy episode per
instance through the RolloutEngine, as the training run's final evaluation rolls them out.

The engine's settings are the policy defaults (b2tjax.run.policy.ROLLOUT_DEFAULTS) under a recipe's
`rollout:` section; the episodes' prompt, memory and Python tool follow that section as in training.
How each episode ended is kept in `AgentFigures` (launch/eval.py prints it and writes it beside the
metrics).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from b2tjax.errors import UserError
from b2tjax.run.policy import ROLLOUT_DEFAULTS
from sandbox.benchmarks import Benchmark, Instance


@dataclasses.dataclass
class AgentFigures:
    """Per-episode figures of a model's run: instance id, stop reason, assistant turns, sampled tokens."""

    episodes: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def summary(self) -> str:
        """One line: episodes, sampled tokens and stop reasons (most common first)."""
        reasons = collections.Counter(e["stop_reason"] for e in self.episodes)
        counts = ", ".join(f"{reason} {n}" for reason, n in reasons.most_common())
        tokens = sum(e["sampled_tokens"] for e in self.episodes)
        return f"model: {len(self.episodes)} episodes, {tokens} sampled tokens, stop reasons: {counts}"


def single_answers(
    bench: Benchmark,
    pairs: Sequence[Instance],
    checkpoint: Path,
    rollout_overrides: dict[str, Any],
    figures: AgentFigures,
) -> Iterator[tuple[str, str | None]]:
    """(instance id, answer) of the greedy single-agent episode of the model in `checkpoint` (a
    training run's checkpoints/, a model checkpoint or a Hugging Face directory) on each pair."""
    from b2tjax.run.policy import load_policy
    from rollout import RolloutEngine
    from rollout.agents.single import agent_episodes
    from sandbox.python_tool import PythonSandbox

    try:
        config = dataclasses.replace(ROLLOUT_DEFAULTS, **{**rollout_overrides, "temperature": 0.0})
        bench.check_prompt_variant(config.prompt_style)  # a BenchmarkError is a ValueError
        policy = load_policy(checkpoint)
    except ValueError as err:
        raise UserError(str(err)) from None
    python_tool = PythonSandbox(isolation=config.python_tool_isolation) if config.python_tool else None
    try:
        episodes = agent_episodes(
            [inst.visible for inst in pairs], bench, policy.tokenizer, config, python_tool
        )
        records = RolloutEngine(policy.model, policy.tokenizer, config).run(episodes, rng=0)
    finally:
        if python_tool is not None:
            python_tool.close()
    by_episode = {record.episode: record for record in records}
    for index, inst in enumerate(pairs):
        record = by_episode[index]
        figures.episodes.append(
            {
                "id": inst.id,
                "stop_reason": str(record.stop_reason),
                "turns": len(record.turns),
                "sampled_tokens": record.num_sampled,
            }
        )
        yield inst.id, record.answer
