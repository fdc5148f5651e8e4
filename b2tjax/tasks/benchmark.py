"""The trainer's Task over any benchmark: its splits, the sampler, rollouts, metrics, evaluation.

`b2tjax.run.task_build.build_task` opens a built DATA, the run's tokenizer and the benchmark, and
gives the task a `TaskSpec` and an `Agent` (b2tjax.tasks.single / b2tjax.tasks.himap): what an
episode is, how it is scored and what it adds to the metrics are the agent's; the task owns the
rest. Rollouts run through the RolloutEngine; rewards are the benchmark's judge and reward (action
penalty and format gate switchable for the ablations, `RewardSpec`). How the final evaluation
samples is an `EvalSampling` passed to `evaluate`, not a change to the task.

Several processes: each runs and scores the episodes it owns (rollout.hosts.episode_owner, a
group on one process) and returns them as its `ProcessPart`; the orchestrator pools the parts.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from flax import nnx

from b2tjax.grpo.update import RolloutBatch
from b2tjax.tasks.base import Agent, EvalEpisodes, ProcessPart, Scored
from b2tjax.tasks.eval_report import evaluation_header, model_params
from b2tjax.tasks.hosts import engine_counts, episode_owners, host_counts
from b2tjax.tasks.scoring import episode_metrics
from b2tjax.tasks.spec import DataSpec, TaskSpec
from b2tjax.tasks.verdicts import Tally, episode_verdicts
from rollout.config import RolloutConfig
from rollout.sampler import Sampler
from rollout.session import RolloutSession
from sandbox.benchmarks import Benchmark, Instance, interleave_difficulties
from sandbox.env import EXECUTED


def select_pairs(benchmark: Benchmark, split: str, difficulties: Sequence[str], limit: int) -> list[Instance]:
    """The split's pairs of these difficulties, levels interleaved, the first `limit` (0 = all): the
    instances a run trains or is evaluated on (benchmarks/results_table.py scores the expert on them)."""
    wanted = set(difficulties)
    pairs = [p for p in benchmark.load_split(split) if (p[0].get("difficulty") or "easy") in wanted]
    return interleave_difficulties(pairs)[:limit] if limit else pairs


@dataclasses.dataclass(frozen=True)
class EvalSampling:
    """How an evaluation samples, passed to `evaluate`: greedy (temperature 0) from a fixed seed by
    default; the other sampling knobs are the recipe's `rollout:` ones."""

    temperature: float = 0.0
    seed: int = 0


@dataclasses.dataclass
class Splits:
    """The instances a run trains on and is evaluated on, and the evaluation split's name."""

    train: list[Instance]
    eval: list[Instance]
    eval_split: str

    @classmethod
    def load(cls, benchmark: Benchmark, data: DataSpec) -> Splits:
        eval_split = data.eval_split or benchmark.eval_split
        return cls(
            select_pairs(benchmark, data.train_split, data.difficulties, data.max_train_instances),
            select_pairs(benchmark, eval_split, data.difficulties, data.eval_instances),
            eval_split,
        )


@dataclasses.dataclass
class _Stream:
    """One step's episodes submitted to a streaming session (the handle `collect_stream` takes)."""

    pairs: list[Instance]
    episodes: list[Any]
    owners: list[int] | None
    local: list[bool] | None
    indices: list[int]
    group_size: int


class BenchmarkTask:
    """The trainer's Task for one benchmark: its instances as prompts, `agent`'s episodes on them."""

    def __init__(self, spec: TaskSpec, benchmark: Benchmark, tokenizer: Any, agent: Agent):
        self.spec, self.benchmark, self.tokenizer, self.agent = spec, benchmark, tokenizer, agent
        self.vocab_size = tokenizer.vocab_size
        self.splits = Splits.load(benchmark, spec.data)
        # at start-up, not after SFT: the largest instance's prompts must fit the engine
        agent.check_prompts([visible for visible, _ in self.splits.train + self.splits.eval])
        self.sampler = Sampler(tokenizer, spec.mesh)  # the engine, kept across steps
        self._last_eval: EvalEpisodes | None = None
        self._executed: list[int] = []  # EXECUTED's counts when the stream last collected

    def train_examples(self) -> Sequence[Any]:
        return self.splits.train

    def sft_examples(self) -> list[dict] | None:
        return self.agent.sft_examples(self.splits.train)

    def rollout(
        self,
        model: nnx.Module,
        prompts: list[Any],
        group_size: int,
        seed: int,
        should_stop: Callable[[], bool] | None = None,
    ) -> ProcessPart[RolloutBatch]:
        pairs = [p for p in prompts for _ in range(group_size)]
        before = EXECUTED.snapshot()
        episodes = self.agent.episodes(pairs)
        owners, local = episode_owners(len(pairs), group_size, seed)
        engine = self.sampler.engine_for(model, self.spec.rollout)
        records = engine.run(episodes, seed, should_stop=should_stop, local=local)
        executed = [now - then for now, then in zip(EXECUTED.snapshot(), before)]
        return self._part(
            pairs, episodes, records, owners, local, engine_counts(executed, engine.stats), group_size
        )

    def _part(self, pairs, episodes, records, owners, local, counts, group_size) -> ProcessPart[RolloutBatch]:
        """This process' scored episodes; pooled, the step's batch with its metrics."""
        finish = functools.partial(self._batch, episodes, group_size)
        return ProcessPart(finish, self.agent.score(episodes, records, pairs, local), owners, counts)

    def _batch(
        self, episodes: list[Any], group_size: int, items: list[Any], counts: np.ndarray
    ) -> RolloutBatch:
        scored = self.agent.pooled(episodes, items)
        metrics = {
            **self.benchmark.headline(self.benchmark.metrics(scored.verdicts)),
            **episode_metrics(scored.records, scored.rewards),
            **self.agent.metrics(scored),
            **host_counts(scored.records, counts),
        }
        return self.agent.batch(scored, metrics, group_size)

    # -- streaming (rollout.max_staleness > 0; b2tjax/run/streaming.py) -----------------------------
    def open_session(self, model: nnx.Module, seed: int, rollout: RolloutConfig) -> RolloutSession:
        """A session on the training engine (the run's `rollout` section: its streaming knobs)."""
        self._executed = EXECUTED.snapshot()
        return self.sampler.engine_for(model, rollout).session(seed)

    def submit_stream(
        self, session: RolloutSession, prompts: list[Any], group_size: int, seed: int
    ) -> _Stream:
        """Queue one step's P x G episodes; the handle `collect_stream` takes them back with."""
        pairs = [p for p in prompts for _ in range(group_size)]
        episodes = self.agent.episodes(pairs)
        owners, local = episode_owners(len(pairs), group_size, seed)
        return _Stream(pairs, episodes, owners, local, session.submit(episodes, local), group_size)

    def collect_stream(
        self, session: RolloutSession, handle: _Stream, should_stop=None
    ) -> ProcessPart[RolloutBatch]:
        """Decode until the handle's episodes have finished; their scored share. The tool runs
        counted are those of every episode running meanwhile (streaming interleaves steps)."""
        records = session.advance(handle.indices, should_stop)
        for record in records:  # numbered within the step, as a plain run numbers them
            record.episode = handle.indices.index(record.episode)
        now = EXECUTED.snapshot()
        executed, self._executed = [a - b for a, b in zip(now, self._executed)], now
        counts = engine_counts(executed, session.stats)
        return self._part(
            handle.pairs, handle.episodes, records, handle.owners, handle.local, counts, handle.group_size
        )

    # -- evaluation ---------------------------------------------------------------------------------
    def evaluate(
        self, model: nnx.Module, sampling: EvalSampling = EvalSampling()
    ) -> ProcessPart[tuple[dict, str]]:
        """The benchmark's metrics on the eval split, plus the mean reward and the episode metrics
        training logs; pooled: (metrics, a printable header and table)."""
        pairs = self.splits.eval
        episodes = self.agent.episodes(pairs)
        owners, local = episode_owners(len(pairs), 1, sampling.seed)
        rollout = dataclasses.replace(self.spec.rollout, temperature=sampling.temperature)
        records = self.sampler.engine_for(model, rollout).run(episodes, sampling.seed, local=local)
        finish = functools.partial(self._evaluated, episodes, sampling, model_params(model))
        return ProcessPart(finish, self.agent.score(episodes, records, pairs, local), owners)

    def _evaluated(
        self, episodes, sampling: EvalSampling, params: int | None, items, _counts
    ) -> tuple[dict, str]:
        scored: Scored = self.agent.pooled(episodes, items)
        pairs = self.splits.eval
        results = episode_verdicts(pairs, self.agent.answers(scored), scored.verdicts, scored.rewards)
        sessions = self.agent.report_sessions(scored)
        self._last_eval = EvalEpisodes(
            self.benchmark, pairs, scored.records, self.tokenizer, sessions, results
        )
        metrics = self.benchmark.metrics([r.verdict for r in results])
        metrics["mean_reward"] = Tally.of(results).mean_reward
        metrics.update(episode_metrics(scored.records, scored.rewards))  # the same rates as training logs
        metrics.update(self.agent.eval_extras(scored))
        header = evaluation_header(
            f"{self.benchmark.name} evaluation on {len(pairs)} {self.splits.eval_split} instances "
            f"(temperature {sampling.temperature:g}, {self.agent.eval_setting(scored, metrics)})",
            metrics,
            scored.records,
            self.agent.length_caps(),
            params,
            Tally.of(results),
        )
        return metrics, header + "\n" + self.benchmark.format_metrics(metrics)

    def eval_episodes(self) -> EvalEpisodes | None:
        """The report's data of the last evaluation (None before one): its records and the verdicts
        `evaluate` tallied (the report never judges them again)."""
        return self._last_eval
