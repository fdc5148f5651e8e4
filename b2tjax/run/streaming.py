"""Where a GRPO step's rollout batch comes from: the synchronous rollout of its prompts, or, with
`rollout.max_staleness` = S > 0, a streaming session that never drains (issue 37).

Streaming schedule (co-located: decoding and training alternate on one mesh). Before step t trains,
the prompts of steps t .. t + S are submitted to one `rollout.session.RolloutSession` (each step's
prompts drawn from the data iterator, and its episodes built with that step's seed, once, in step
order); the session decodes until step t's groups have finished, while the rows left free by its
long episodes' tail run the next steps' episodes. Step t takes exactly its own groups, the weights
are updated, and every episode still running continues under the new policy. A group of step j is
submitted during step j - S at the earliest, so its oldest token is at most S updates old when step
j trains on it: the bound holds by construction, so no group is ever dropped or re-rolled for
staleness (`b2tjax.grpo.offpolicy.staleness_metrics` checks it and logs the histogram), and long
episodes are never selected against. Taking whichever groups finish first would fill the rows
better but drop (or keep re-rolling) exactly the long episodes the tail is made of.

Checkpoints and resume: the in-flight episodes of steps after t are dropped explicitly. A
checkpoint of step t records the data iterator as it was before step t + 1's prompts were drawn
(`data_state`), so `--resume` draws the same prompts for t + 1 .. t + 1 + S with the same seeds
and rolls them afresh from the restored weights: every record a resumed run trains on is at most
S updates old, as in the uninterrupted run (the records themselves differ: fresher tokens).

A task streams when it has `open_session(model, seed, rollout_config)`, `submit_stream(session, prompts,
group_size, seed)` and `collect_stream(session, handle, should_stop)` (b2tjax/tasks/toy_tools.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flax import nnx

from b2tjax.config import TrainConfig
from b2tjax.data.pipeline import BatchIterator
from b2tjax.errors import UserError
from b2tjax.grpo.update import RolloutBatch
from b2tjax.tasks.base import Task

STREAM_HOOKS = ("open_session", "submit_stream", "collect_stream")


class StepRollouts:
    """The rollout batch of each GRPO step, and the data state a checkpoint records."""

    def __init__(self, cfg: TrainConfig, task: Task, data: BatchIterator, step_seed: Callable[[int], int]):
        self.cfg, self.task, self.data, self.step_seed = cfg, task, data, step_seed
        self.staleness = cfg.rollout.max_staleness
        if self.staleness and not all(hasattr(task, hook) for hook in STREAM_HOOKS):
            raise UserError(
                f"rollout.max_staleness={self.staleness} needs a task that streams rollouts "
                f"({type(task).__name__} does not); set rollout.max_staleness=0"
            )
        self.session: Any = None
        self.ahead: dict[int, Any] = {}  # global step -> the task's handle of its submitted groups
        self.states: dict[int, dict] = {}  # global step -> data state before its prompts were drawn
        self.next_step = 0  # the first step whose batch has not been taken

    def get_state(self) -> dict:
        """What a checkpoint records as the data state: the iterator before the prompts of the next
        step not yet trained, however far ahead they were drawn (a resume draws them again)."""
        return self.states.get(self.next_step) or self.data.get_state()

    def rollout(
        self, model: nnx.Module, global_step: int, last_step: int, should_stop: Callable[[], bool]
    ) -> RolloutBatch:
        """Step `global_step`'s scored batch under `model` (the weights this step trains from)."""
        r = self.cfg.rollout
        self.next_step = global_step
        if not self.staleness:
            prompts = self.data.next_batch(r.prompts_per_step)
            seed = self.step_seed(global_step)
            return self.task.rollout(model, prompts, r.group_size, seed, should_stop=should_stop)
        if self.session is None:
            self.session = self.task.open_session(model, self.cfg.seed, r)
        else:
            self.session.update_weights(model)
        for step in range(global_step, min(global_step + self.staleness, last_step) + 1):
            if step not in self.ahead:
                self.states[step] = self.data.get_state()
                prompts = self.data.next_batch(r.prompts_per_step)
                seed = self.step_seed(step)
                self.ahead[step] = self.task.submit_stream(self.session, prompts, r.group_size, seed)
        batch = self.task.collect_stream(self.session, self.ahead.pop(global_step), should_stop)
        self.states.pop(global_step, None)
        self.next_step = global_step + 1
        batch.policy_version = self.session.version
        return batch

    def close(self) -> None:
        """End the session; its episodes still in flight are dropped (see the module docstring)."""
        if self.session is not None:
            self.session.close()
            self.session = None
