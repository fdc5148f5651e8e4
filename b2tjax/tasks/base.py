"""What the trainer asks of a task, and what a benchmark task asks of its agent architecture.

The trainer (b2tjax.run.trainer) knows nothing else of a task, so the benchmark agent, HiMAP teams
and the toy tasks share one loop. A task never talks to other processes: its rollouts and its
evaluation return this process' `ProcessPart`, and the orchestrator pools the parts
(b2tjax.run.agreement.pool), the one place those values cross processes.

`rollout(model, prompts, group_size, seed, should_stop=None)` passes `should_stop` to the engine
(a SIGTERM inside a step); a task whose rollout is one jitted call may ignore it. Pooled, it gives
a `b2tjax.grpo.update.RolloutBatch(records, metrics, groups=None, episodes=None, local_rewards=None)`:
any number of records, `record.reward` the episode's team reward on every stream; `groups[i]` /
`episodes[i]` the prompt and episode of record i (None for both: one record per episode, the G of
a prompt contiguous); `local_rewards[i]` a record's own local term or None.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

import numpy as np
from flax import nnx

from b2tjax.grpo.update import RolloutBatch
from rollout.config import RolloutConfig
from rollout.record import EpisodeRecord
from rollout.session import RolloutSession
from sandbox.benchmarks import Instance

T = TypeVar("T")
U = TypeVar("U")


@dataclasses.dataclass
class ProcessPart(Generic[T]):
    """One process' share of a rollout or an evaluation. The orchestrator gathers `mine` (this
    process' per-episode results, picklable, in episode order) from every process back into
    episode order by `owners` (None: one process, `mine` is everything), shows every process'
    `counts` (ints, [processes, k]; None: none), and hands both to `finish`, which makes the result."""

    finish: Callable[[list[Any], np.ndarray | None], T]
    mine: list[Any] = dataclasses.field(default_factory=list)
    owners: list[int] | None = None
    counts: list[int] | None = None

    @classmethod
    def alone(cls, value: T) -> ProcessPart[T]:
        """A result that needs nothing of the other processes (e.g. one jitted global call)."""
        return cls(lambda _mine, _counts: value)

    def then(self, after: Callable[[T], U]) -> ProcessPart[U]:
        """This part with its pooled result passed through `after`."""
        return dataclasses.replace(self, finish=lambda mine, counts: after(self.finish(mine, counts)))


@dataclasses.dataclass(frozen=True)
class EvalEpisodes:
    """What the HTML report needs of the last evaluation (b2tjax.report.build.record_episodes):
    its instances, records and tokenizer, the HiMAP sessions by episode (None for a single agent)
    and the verdicts the evaluation tallied (b2tjax.tasks.verdicts.EpisodeVerdict)."""

    bench: Any
    pairs: Sequence[Instance]
    records: Sequence[EpisodeRecord]
    tokenizer: Any
    sessions: dict[int, Any] | None
    results: Sequence[Any]


class Task(Protocol):
    def train_examples(self) -> Sequence[Any]:
        """What the GRPO prompt pipeline shuffles (instances)."""

    def rollout(
        self,
        model: nnx.Module,
        prompts: list[Any],
        group_size: int,
        seed: int,
        should_stop: Callable[[], bool] | None = None,
    ) -> ProcessPart[RolloutBatch]:
        """Sample `group_size` episodes per prompt with `model` and score this process' share. A long
        rollout polls `should_stop` between its segments and raises `rollout.engine.RolloutStopped`."""

    def sft_examples(self) -> list[dict] | None:
        """Tokenised traces {"ids": [...], "mask": [...]} (mask 1 on assistant tokens), or None."""

    def evaluate(self, model: nnx.Module) -> ProcessPart[tuple[dict, str]]:
        """Final evaluation; pooled: (metrics, printable table)."""

    def eval_episodes(self) -> EvalEpisodes | None:
        """The report's data of the last pooled `evaluate` (None: no report, e.g. the toy tasks)."""


@runtime_checkable
class StreamingTask(Protocol):
    """What a Task adds to stream its rollouts (`rollout.max_staleness` > 0, b2tjax/run/streaming.py):
    one session on the training engine, each step's episodes submitted ahead and collected in order."""

    def open_session(self, model: nnx.Module, seed: int, rollout: RolloutConfig) -> RolloutSession:
        """A session on the training engine, with the run's `rollout` section (its streaming knobs)."""

    def submit_stream(self, session: RolloutSession, prompts: list[Any], group_size: int, seed: int) -> Any:
        """Queue one step's prompts x group_size episodes; the handle `collect_stream` takes."""

    def collect_stream(
        self, session: RolloutSession, handle: Any, should_stop: Callable[[], bool] | None = None
    ) -> ProcessPart[RolloutBatch]:
        """Decode until the handle's episodes have finished; this process' share of their batch."""


@dataclasses.dataclass
class Scored:
    """A scored batch of episodes, every process' (pooled): the episodes (or what another process
    sent of them), their records, one verdict and one reward per episode."""

    episodes: list[Any]
    records: list[EpisodeRecord]
    verdicts: list[Any]
    rewards: list[Any]


class Agent(Protocol):
    """What differs between agent architectures on one benchmark (b2tjax.tasks.single.SingleAgent,
    b2tjax.tasks.himap.HimapTeam); BenchmarkTask owns the rest."""

    def check_prompts(self, instances: Sequence[dict]) -> None:
        """At start-up: the largest instance's first prompts fit the engine; else a UserError."""

    def sft_examples(self, train: Sequence[Instance]) -> list[dict] | None:
        """The warm start's tokenised traces on the train split, or None."""

    def episodes(self, pairs: Sequence[Instance]) -> list[Any]:
        """One `rollout.episodes.Episode` per pair."""

    def score(
        self,
        episodes: list[Any],
        records: list[EpisodeRecord],
        pairs: Sequence[Instance],
        local: list[bool] | None,
    ) -> list[Any]:
        """This process' episodes (`local`; None: all), each judged and its records rewarded: one
        picklable item per episode, in episode order (what the orchestrator gathers)."""

    def pooled(self, episodes: list[Any], items: list[Any]) -> Scored:
        """Every process' items (episode order) as one Scored batch."""

    def batch(self, scored: Scored, metrics: dict, group_size: int) -> RolloutBatch:
        """The trainer's batch of a scored step."""

    def metrics(self, scored: Scored) -> dict[str, Any]:
        """Figures of the architecture beside the episode metrics (none for a single agent)."""

    def answers(self, scored: Scored) -> list[str | None]:
        """The answer judged for each episode."""

    def eval_extras(self, scored: Scored) -> dict[str, Any]:
        """Entries of the evaluation's metrics beyond the shared ones."""

    def eval_setting(self, scored: Scored, metrics: dict) -> str:
        """The evaluation title's words on how the episodes ran."""

    def length_caps(self) -> str:
        """The limits that truncate an episode, in the recipe's terms."""

    def report_sessions(self, scored: Scored) -> dict[int, Any] | None:
        """What the report needs of the episodes beyond their records (HiMAP: Σ's sessions)."""
