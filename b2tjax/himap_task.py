"""The trainer's Task with HiMAP episodes (`agent: himap`): a coordinator and day executors per episode.

Same data, tokenizer and engine as BenchmarkTask; what changes is the episode and its scoring.
Each (prompt, group member) is one HiMAP episode of 1 + days (+ re-planned days) streams, all run
through the same RolloutEngine. An episode's merged answer is judged once by the benchmark and that
team reward is set on every stream (`rollout.scoring.score_team_episodes`); the RolloutBatch says
which prompt (`groups`) and episode (`episodes`) each record belongs to, and carries each day
executor's local reward (its day accepted or not) for `grpo.credit=team_local`. The SFT warm start
is the scripted HiMAP expert's role-split traces on the train split; evaluation runs HiMAP
episodes greedily.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from flax import nnx

from b2tjax.cli import UserError
from b2tjax.sft import sft_examples
from b2tjax.task import BenchmarkTask
from b2tjax.trainer import RolloutBatch
from sandbox.benchmarks import Pair
from sandbox.himap.options import HimapOptions


class HimapTask(BenchmarkTask):
    """BenchmarkTask whose episodes are HiMAP teams; see the module docstring."""

    def __init__(self, cfg, benchmark, tokenizer):
        self.options = cfg.himap.options(cfg.rollout.max_response_chars)
        super().__init__(cfg, benchmark, tokenizer)

    def _check_prompt_budget(self) -> None:
        """At start-up: HiMAP prompts are not compacted (the coordinator reads the whole request), so
        the largest instance's first prompts must fit the coordinator's / executors' stream length."""
        from rollout.prompt import prompt_ids
        from sandbox.himap.protocol import HimapSession

        instances = [visible for visible, _ in self._train + self._eval]
        if not instances:
            return
        largest = max(instances, key=lambda visible: len(str(visible)))
        try:
            started = HimapSession(self.benchmark.himap_domain(largest), self.options).start().start
        except ValueError as err:
            raise UserError(f"agent: himap on {self.benchmark.name}: {err}") from None
        for stream in started:
            limit = self.options.limits(stream.role).max_total_tokens or self.cfg.rollout.max_seq_len
            length = len(prompt_ids(stream.prompt, self.tokenizer))
            if length >= limit:
                raise UserError(
                    f"the HiMAP {stream.role} prompt of instance {largest['id']} has {length} tokens, "
                    f"but its streams hold {limit} (rollout.max_seq_len / himap.{stream.role}_limits."
                    "max_seq_len): HiMAP prompts are not compacted"
                )

    # -- Task protocol --------------------------------------------------------------------------
    def sft_examples(self) -> list[dict] | None:
        """The scripted HiMAP expert's role-split traces (one per stream) on the train split; None
        (no warm start) when the benchmark has no scripted HiMAP expert."""
        # the role limits budget the sampler; the expert keeps its own turn counts (default limits)
        defaults = HimapOptions()
        expert_options = dataclasses.replace(
            self.options,
            coordinator_limits=defaults.coordinator_limits,
            executor_limits=defaults.executor_limits,
        )
        traces = himap_expert_traces(
            self.benchmark, self._train, expert_options, self.cfg.himap.sft_instances
        )
        if traces is None:
            print(f"no scripted HiMAP expert for {self.benchmark.name}: no SFT warm start", flush=True)
            return None
        limit = self.cfg.sft.max_examples
        return sft_examples(traces[:limit] if limit else traces, self.tokenizer, self.cfg.sft.max_seq_len)

    def _himap_episodes(self, pairs: Sequence[Pair]) -> list[Any]:
        from rollout.agents.himap import himap_episode

        return [himap_episode(visible, self.benchmark, self.tokenizer, self.options) for visible, _ in pairs]

    def _run_and_score(self, engine, pairs: Sequence[Pair], seed: int, should_stop=None):
        """Run one HiMAP episode per pair; (episodes, records, verdicts, rewards), records rewarded."""
        from rollout.scoring import score_team_episodes

        episodes = self._himap_episodes(pairs)
        records = engine.run(episodes, seed, should_stop=should_stop)
        g = self.cfg.grpo
        verdicts, rewards = score_team_episodes(
            records,
            [e.answer for e in episodes],
            pairs,
            self.benchmark,
            action_penalty=g.action_penalty,
            format_gate=g.format_gate,
        )
        return episodes, records, verdicts, rewards

    def rollout(
        self,
        model: nnx.Module,
        prompts: list[Any],
        group_size: int,
        seed: int,
        should_stop: Callable[[], bool] | None = None,
    ) -> RolloutBatch:
        from rollout.himap_metrics import himap_metrics, local_day_rewards

        pairs = [p for p in prompts for _ in range(group_size)]
        engine = self._sampler(model)
        episodes, records, verdicts, rewards = self._run_and_score(engine, pairs, seed, should_stop)
        metrics = {
            **self.benchmark.headline(self.benchmark.metrics(verdicts)),
            "r_format": float(np.mean([r.r_format for r in rewards])),
            "p_action": float(np.mean([r.p_action for r in rewards])),
            "action_error_rate": float(np.mean(episode_errors(records, len(episodes)))),
            "truncated_rate": float(np.mean([rec.truncated for rec in records])),
            "turns": float(np.mean([len(rec.turns) for rec in records])),
            **himap_metrics(episodes, records),
        }
        return RolloutBatch(
            records,
            metrics,
            groups=[r.episode // group_size for r in records],
            episodes=[r.episode for r in records],
            local_rewards=local_day_rewards(episodes, records),
        )

    def evaluate(self, model: nnx.Module) -> tuple[dict, str]:
        from rollout.himap_metrics import himap_metrics

        self._engine = None  # the training sampler's weights make room for the greedy one's
        engine = self._engine_for(model, temperature=0.0)  # greedy
        episodes, records, verdicts, rewards = self._run_and_score(engine, self._eval, 0)
        self._last_eval = (records, {i: e.session for i, e in enumerate(episodes)})  # report_episodes
        metrics = self.benchmark.metrics(verdicts)
        metrics["mean_reward"] = float(np.mean([x.total for x in rewards])) if rewards else 0.0
        metrics["himap"] = himap_metrics(episodes, records)
        header = (
            f"{self.benchmark.name} HiMAP evaluation on {len(self._eval)} {self.eval_split} instances "
            f"(greedy, {len(records)} streams, mean rounds {metrics['himap'].get('rounds', 0):.2f}); "
            f"mean reward {metrics['mean_reward']:.3f}"
        )
        return metrics, header + "\n" + self.benchmark.format_metrics(metrics)


def himap_expert_traces(
    benchmark: Any, pairs: Sequence[Pair], options: Any, instances: int = 0
) -> list[dict] | None:
    """Role-split SFT traces of the scripted HiMAP expert on the first `instances` pairs (0 = all);
    None when the benchmark has no scripted expert. Episodes the expert does not deliver teach
    nothing and are left out."""
    from sandbox.himap.scripted import solve

    pairs = pairs[:instances] if instances else pairs
    if pairs:
        try:  # policies are built per instance; building one tells whether the benchmark has them
            benchmark.himap_expert(*pairs[0])
        except ValueError:
            return None
    traces: list[dict] = []
    for visible, truth in pairs:
        result = solve(benchmark, visible, truth, options)
        if result.answer is not None:
            traces += result.traces
    return traces


def episode_errors(records: Sequence[Any], episodes: int) -> list[bool]:
    """Per episode: did any of its streams make an action error (what P_action penalises)."""
    errors = [False] * episodes
    for record in records:
        errors[record.episode] = errors[record.episode] or record.any_error
    return errors
