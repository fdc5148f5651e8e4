"""The trainer's Task with HiMAP episodes (`agent: himap`): a coordinator and day executors per episode.

Same data, tokenizer and engine as BenchmarkTask; what changes is the episode and its scoring.
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

from flax import nnx

from b2tjax.config import TrainConfig
from b2tjax.errors import UserError
from b2tjax.grpo.update import RolloutBatch
from b2tjax.sft.traces import sft_examples
from b2tjax.tasks.benchmark import BenchmarkTask, episode_owners
from b2tjax.tasks.himap_figures import himap_metrics, local_day_rewards
from b2tjax.tasks.scoring import score_team_episodes
from rollout.agents.himap import himap_episode
from rollout.hosts import gather_objects, merge_by_owner
from rollout.prompt import prompt_ids
from sandbox.benchmarks import Instance
from sandbox.himap.options import HimapOptions
from sandbox.himap.protocol import HimapSession
from sandbox.himap.scripted import expert_traces
from sandbox.himap.summary import SessionSummary, session_summary


def run_options(cfg: TrainConfig) -> HimapOptions:
    """The recipe's HiMAP switches, with the rollout's cap on environment replies."""
    return dataclasses.replace(cfg.himap, max_response_chars=cfg.rollout.max_response_chars)


def expert_options(options: HimapOptions) -> HimapOptions:
    """The scripted expert's switches for the SFT warm start: the run's, with the default role
    limits (the role limits budget the sampler; the expert keeps its own turn counts)."""
    defaults = HimapOptions()
    return dataclasses.replace(
        options, coordinator_limits=defaults.coordinator_limits, executor_limits=defaults.executor_limits
    )


class HimapTask(BenchmarkTask):
    """BenchmarkTask whose episodes are HiMAP teams; see the module docstring."""

    def __init__(self, cfg, benchmark, tokenizer):
        self.options = run_options(cfg)
        super().__init__(cfg, benchmark, tokenizer)

    def _check_prompt_budget(self) -> None:
        """At start-up: HiMAP prompts are not compacted (the coordinator reads the whole request), so
        the largest instance's first prompts must fit the coordinator's / executors' stream length."""

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
        """The scripted HiMAP expert's role-split traces (one per stream) on the first
        `himap.sft_instances` train instances, only from those whose merged plan passes every check
        (sandbox.himap.scripted.expert_traces: SFT imitates correct plans); None (no warm start)
        when the benchmark has no scripted HiMAP expert or none of its plans passes."""

        n = self.cfg.himap.sft_instances
        pairs = self._train[:n] if n else self._train
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
        limit = self.cfg.sft.max_examples
        return sft_examples(traces[:limit] if limit else traces, self.tokenizer, self.cfg.sft.max_seq_len)

    def _episodes(self, pairs: Sequence[Instance]) -> list[Any]:

        return [himap_episode(visible, self.benchmark, self.tokenizer, self.options) for visible, _ in pairs]

    def _run_and_score(
        self,
        model: nnx.Module,
        pairs: Sequence[Instance],
        seed: int,
        temperature: float,
        should_stop=None,
        group_size: int = 1,
    ):
        """One HiMAP episode per pair, run and scored by its merged answer (the team reward on every
        stream): (episodes, records, verdicts, rewards). Several processes: each runs and scores the
        teams it owns; every process then gets all of them, each team as a `TeamSummary`."""

        episodes = self._episodes(pairs)
        owners, local = episode_owners(len(pairs), group_size, seed)
        records = self._sampler(model, temperature).run(episodes, seed, should_stop=should_stop, local=local)
        g = self.cfg.grpo
        verdicts, rewards = score_team_episodes(
            records,
            [e.answer if local is None or local[i] else None for i, e in enumerate(episodes)],
            pairs,
            self.benchmark,
            action_penalty=g.action_penalty,
            format_gate=g.format_gate,
        )
        if local is None:
            return episodes, records, verdicts, rewards
        teams = [
            (TeamSummary.of(episodes[i]), [r for r in records if r.episode == i], verdicts[i], rewards[i])
            for i in range(len(pairs))
            if local[i]
        ]
        teams = merge_by_owner(owners, gather_objects(teams))
        return (
            [t[0] for t in teams],
            [r for t in teams for r in t[1]],
            [t[2] for t in teams],
            [t[3] for t in teams],
        )

    def _agent_metrics(self, episodes: list[Any], records: list[Any]) -> dict[str, Any]:

        return himap_metrics(episodes, records)

    def _batch(self, episodes: list[Any], records: list[Any], metrics: dict, group_size: int) -> RolloutBatch:
        """Several records per episode: say which prompt and episode each belongs to, and carry each
        day executor's own day score for `grpo.credit=team_local`."""

        return RolloutBatch(
            records,
            metrics,
            groups=[r.episode // group_size for r in records],
            episodes=[r.episode for r in records],
            local_rewards=local_day_rewards(episodes, records),
        )

    def _answers(self, episodes: list[Any], records: list[Any]) -> list[str | None]:
        """A team's answer is its episode's merged plan (no record carries it when the flat team
        has no coordinator)."""
        return [e.answer for e in episodes]

    def _eval_extras(self, episodes: list[Any], records: list[Any]) -> dict[str, Any]:
        return {"himap": self._agent_metrics(episodes, records)}

    def _length_caps(self) -> str:
        return (
            "himap.coordinator_limits / himap.executor_limits, "
            f"rollout.max_turn_tokens={self.cfg.rollout.max_turn_tokens}"
        )

    def _report_sessions(self, episodes: list[Any]) -> dict[int, Any] | None:
        return {i: session_summary(e.session) for i, e in enumerate(episodes)}

    def _eval_setting(self, episodes: list[Any], records: list[Any], metrics: dict) -> str:
        return f"HiMAP, {len(records)} streams, mean rounds {metrics['himap'].get('rounds', 0):.2f}"


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
