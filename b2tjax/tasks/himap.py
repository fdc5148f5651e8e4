"""HiMAP teams (`agent: himap`): the Agent strategy of BenchmarkTask whose episodes are a coordinator
and day executors.

Same data, tokenizer and engine as a single agent; what changes is the episode and its scoring.
Each (prompt, group member) is one HiMAP episode of 1 + days (+ re-planned days) streams, all run
through the same RolloutEngine. An episode's merged answer is judged once by the benchmark and that
team reward is set on every stream (`b2tjax.tasks.scoring.score_team_episodes`); the RolloutBatch says
which prompt (`groups`) and episode (`episodes`) each record belongs to, and carries each day
executor's local reward (its day accepted or not) for `grpo.credit=team_local`. The SFT warm start
is the scripted HiMAP expert's role-split traces on the train split; evaluation runs HiMAP
episodes greedily.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from b2tjax.errors import UserError
from b2tjax.grpo.update import RolloutBatch
from b2tjax.sft.traces import sft_examples
from b2tjax.tasks.base import Scored
from b2tjax.tasks.himap_figures import himap_metrics, local_day_rewards
from b2tjax.tasks.scoring import score_team_episodes
from b2tjax.tasks.spec import RewardSpec, SftSpec
from rollout.agents.himap import himap_episode
from rollout.config import RolloutConfig
from rollout.prompt import prompt_ids
from sandbox.benchmarks import Benchmark, Instance
from sandbox.himap.options import HimapOptions
from sandbox.himap.protocol import HimapSession
from sandbox.himap.scripted import expert_traces
from sandbox.himap.summary import SessionSummary, session_summary


def expert_options(options: HimapOptions) -> HimapOptions:
    """The scripted expert's switches for the SFT warm start: the run's, with the default role
    limits (the role limits budget the sampler; the expert keeps its own turn counts)."""
    defaults = HimapOptions()
    return dataclasses.replace(
        options, coordinator_limits=defaults.coordinator_limits, executor_limits=defaults.executor_limits
    )


class HimapTeam:
    """b2tjax.tasks.base.Agent for HiMAP teams; see the module docstring. `options`: the run's
    HiMAP switches with the rollout's cap on environment replies (b2tjax.run.task_build)."""

    def __init__(
        self,
        benchmark: Benchmark,
        tokenizer: Any,
        options: HimapOptions,
        rollout: RolloutConfig,
        reward: RewardSpec,
        sft: SftSpec,
    ):
        self.benchmark, self.tokenizer, self.options = benchmark, tokenizer, options
        self.rollout, self.reward, self.sft = rollout, reward, sft

    def check_prompts(self, instances: Sequence[dict]) -> None:
        """HiMAP prompts are not compacted (the coordinator reads the whole request), so the largest
        instance's first prompts must fit the coordinator's / executors' stream length."""
        if not instances:
            return
        largest = max(instances, key=lambda visible: len(str(visible)))
        try:
            started = HimapSession(self.benchmark.himap_domain(largest), self.options).start().start
        except ValueError as err:
            raise UserError(f"agent: himap on {self.benchmark.name}: {err}") from None
        for stream in started:
            limit = self.options.limits(stream.role).max_total_tokens or self.rollout.max_seq_len
            length = len(prompt_ids(stream.prompt, self.tokenizer))
            if length >= limit:
                raise UserError(
                    f"the HiMAP {stream.role} prompt of instance {largest['id']} has {length} tokens, "
                    f"but its streams hold {limit} (rollout.max_seq_len / himap.{stream.role}_limits."
                    "max_seq_len): HiMAP prompts are not compacted"
                )

    def sft_examples(self, train: Sequence[Instance]) -> list[dict] | None:
        """The scripted HiMAP expert's role-split traces (one per stream) on the first
        `himap.sft_instances` train instances, only from those whose merged plan passes every check
        (sandbox.himap.scripted.expert_traces: SFT imitates correct plans); None (no warm start)
        when the benchmark has no scripted HiMAP expert or none of its plans passes."""
        n = self.options.sft_instances
        pairs = train[:n] if n else train
        try:  # policies are built per instance; building one tells whether the benchmark has them
            if pairs:
                self.benchmark.himap_expert(*pairs[0])
        except ValueError:
            print(f"no scripted HiMAP expert for {self.benchmark.name}: no SFT warm start", flush=True)
            return None
        traces = list(expert_traces(self.benchmark, pairs, expert_options(self.options)))
        if not traces:  # e.g. the flat ablation: an equal budget split fails the budget check
            print(
                "no scripted HiMAP plan passes every check under these switches: no SFT warm start",
                flush=True,
            )
            return None
        limit = self.sft.max_examples
        return sft_examples(traces[:limit] if limit else traces, self.tokenizer, self.sft.max_seq_len)

    def episodes(self, pairs: Sequence[Instance]) -> list[Any]:
        return [himap_episode(visible, self.benchmark, self.tokenizer, self.options) for visible, _ in pairs]

    def score(self, episodes, records, pairs, local) -> list[Any]:
        """(team, its records, verdict, reward) per local episode, judged by its merged answer (the
        team reward on every stream). The team is the episode itself on one process, its
        `TeamSummary` (small, picklable) when other processes receive it."""
        g = self.reward
        verdicts, rewards = score_team_episodes(
            records,
            [e.answer if local is None or local[i] else None for i, e in enumerate(episodes)],
            pairs,
            self.benchmark,
            action_penalty=g.action_penalty,
            format_gate=g.format_gate,
        )
        team = (lambda e: e) if local is None else TeamSummary.of
        return [
            (team(episodes[i]), [r for r in records if r.episode == i], verdicts[i], rewards[i])
            for i in range(len(pairs))
            if local is None or local[i]
        ]

    def pooled(self, episodes: list[Any], items: list[Any]) -> Scored:
        return Scored(
            [t[0] for t in items],
            [r for t in items for r in t[1]],
            [t[2] for t in items],
            [t[3] for t in items],
        )

    def batch(self, scored: Scored, metrics: dict, group_size: int) -> RolloutBatch:
        """Several records per episode: say which prompt and episode each belongs to, and carry each
        day executor's own day score for `grpo.credit=team_local`."""
        records = scored.records
        return RolloutBatch(
            records,
            metrics,
            groups=[r.episode // group_size for r in records],
            episodes=[r.episode for r in records],
            local_rewards=local_day_rewards(scored.episodes, records),
        )

    def metrics(self, scored: Scored) -> dict[str, Any]:
        return himap_metrics(scored.episodes, scored.records)

    def answers(self, scored: Scored) -> list[str | None]:
        """A team's answer is its episode's merged plan (no record carries it when the flat team
        has no coordinator)."""
        return [e.answer for e in scored.episodes]

    def eval_extras(self, scored: Scored) -> dict[str, Any]:
        return {"himap": self.metrics(scored)}

    def eval_setting(self, scored: Scored, metrics: dict) -> str:
        return f"HiMAP, {len(scored.records)} streams, mean rounds {metrics['himap'].get('rounds', 0):.2f}"

    def length_caps(self) -> str:
        return (
            "himap.coordinator_limits / himap.executor_limits, "
            f"rollout.max_turn_tokens={self.rollout.max_turn_tokens}"
        )

    def report_sessions(self, scored: Scored) -> dict[int, Any] | None:
        return {i: session_summary(e.session) for i, e in enumerate(scored.episodes)}


@dataclasses.dataclass
class TeamSummary:
    """What the trainer reads of a finished HiMAP episode (its answer and its session's summary:
    figures, day outcomes, Σ's events, for the metrics and the report), small and picklable: how a
    team driven by another process reaches this one."""

    answer: str | None
    session: SessionSummary

    @classmethod
    def of(cls, episode: Any) -> TeamSummary:
        return cls(episode.answer, session_summary(episode.session))
