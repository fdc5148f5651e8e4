"""What the trainer asks of a task: prompts, rollouts with rewards, SFT examples, the evaluation.

The trainer (b2tjax.run.trainer) knows nothing else of a task, so the benchmark agent, HiMAP teams
and the toy tasks share one loop.

`rollout(model, prompts, group_size, seed, should_stop=None)` passes `should_stop` to the engine
(a SIGTERM inside a step); a task whose rollout is one jitted call may ignore it. It returns a
`b2tjax.grpo.update.RolloutBatch(records, metrics, groups=None, episodes=None, local_rewards=None)`:
any number of records, `record.reward` the episode's team reward on every stream; `groups[i]` /
`episodes[i]` the prompt and episode of record i (None for both: one record per episode, the G of
a prompt contiguous); `local_rewards[i]` a record's own local term or None.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from flax import nnx

from b2tjax.grpo.update import RolloutBatch
from rollout.config import RolloutConfig
from rollout.session import RolloutSession


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
    ) -> RolloutBatch:
        """Sample `group_size` episodes per prompt with `model` and score them. A long rollout polls
        `should_stop` between its segments and raises `rollout.engine.RolloutStopped` when it is true."""

    def sft_examples(self) -> list[dict] | None:
        """Tokenised traces {"ids": [...], "mask": [...]} (mask 1 on assistant tokens), or None."""

    def evaluate(self, model: nnx.Module) -> tuple[dict, str]:
        """Final evaluation: (metrics, printable table)."""

    def report_episodes(self) -> list[dict] | None:
        """The HTML report's episodes of the last `evaluate` (None: no report, e.g. the toy tasks)."""


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
    ) -> RolloutBatch:
        """Decode until the handle's episodes have finished; their scored batch."""
