"""Where a GRPO step's rollout batch comes from: the synchronous rollout of its prompts, or, with
`rollout.max_staleness` = S > 0, a streaming session that never drains.

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

Decoding during the update (`rollout.decode_during_update`, needs S >= 1). After step t takes its
batch, the session goes on decoding while step t's update runs: it submits the prompts of steps
t + 1 .. t + S and decodes until step t + 1's groups have finished, still under the weights step t
trained from; the new weights reach the sampler when step t + 1 begins. So every token step t + 1
trains on is at least one update old, and a group is submitted one step later than without (during
step j - S + 1's update at the earliest), which keeps the bound at S. With the split placement
(`mesh.rollout_devices`) the decoding runs in a second thread on the rollout sub-mesh while the
update runs on the train sub-mesh, each thread agreeing over its own devices only
(`rollout.hosts.agreeing_on`); co-located, the same decoding runs after the update, in the same
order, so the two placements give the same records, and the trainer's step waits only for what
decoding outlasts the update. A stop request (SIGTERM) during that decoding lets the update finish;
the trainer then saves the step and exits.

Checkpoints and resume: the in-flight episodes of steps after t are dropped explicitly. A
checkpoint of step t records the data iterator as it was before step t + 1's prompts were drawn
(`data_state`), so `--resume` draws the same prompts for t + 1 .. t + 1 + S with the same seeds
and rolls them afresh from the restored weights: every record a resumed run trains on is at most
S updates old, as in the uninterrupted run (the records themselves differ: fresher tokens).

The schedule is chosen once, at start-up (`RolloutSchedule.of`, from `rollout.max_staleness`,
`rollout.decode_during_update` and `mesh.rollout_devices`), into one object that owns it:
`SyncRollouts`, or `StreamedRollouts` with its overlap with the update (none, after it co-located,
beside it on the split placement). A task streams when it is a `b2tjax.tasks.base.StreamingTask`
(the benchmark tasks, b2tjax/tasks/toy_tools.py).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import functools
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from flax import nnx

from b2tjax.config.schema import MeshConfig
from b2tjax.data.pipeline import BatchIterator
from b2tjax.errors import UserError
from b2tjax.grpo.update import RolloutBatch
from b2tjax.run.agreement import pool
from b2tjax.run.mesh import split_devices
from b2tjax.tasks.base import StreamingTask, Task
from rollout.config import RolloutConfig
from rollout.hosts import agreeing_on
from rollout.run import RolloutStopped

Decode = Callable[..., float]  # decode the next step's batch (should_stop, devices) -> its wall
StepSeed = Callable[[int], int]  # global step -> the seed of its episodes


@dataclasses.dataclass(frozen=True)
class RolloutSchedule:
    """Where each GRPO step's rollouts come from, resolved once from the recipe (module docstring)."""

    staleness: int  # S: how many updates old a token may be; 0 = synchronous
    during_update: bool  # the next step decodes while this step updates (S >= 1)
    rollout_devices: int  # > 0: the split placement; with during_update, in a second thread

    @classmethod
    def of(cls, rollout: RolloutConfig, mesh: MeshConfig) -> RolloutSchedule:
        during = bool(rollout.max_staleness and rollout.decode_during_update)
        return cls(rollout.max_staleness, during, mesh.rollout_devices)

    def step_rollouts(
        self, task: Task, data: BatchIterator, step_seed: StepSeed, rollout: RolloutConfig, seed: int
    ) -> StepRollouts:
        """The object that rolls out each step of this schedule."""
        if not self.staleness:
            return SyncRollouts(task, data, step_seed, rollout)
        if not isinstance(task, StreamingTask):
            raise UserError(
                f"rollout.max_staleness={self.staleness} needs a task that streams rollouts "
                f"({type(task).__name__} does not); set rollout.max_staleness=0"
            )
        overlap = None
        if self.during_update and self.rollout_devices > 0:
            overlap = DecodeBesideUpdate(split_devices(self.rollout_devices))
        elif self.during_update:
            overlap = DecodeAfterUpdate()
        return StreamedRollouts(task, data, step_seed, rollout, seed, self.staleness, overlap)


class SyncRollouts:
    """S = 0: each step rolls out its own prompts under its own weights, nothing runs across steps."""

    def __init__(self, task: Task, data: BatchIterator, step_seed: StepSeed, rollout: RolloutConfig):
        self.task, self.data, self.step_seed, self.cfg = task, data, step_seed, rollout
        self.timing: dict[str, float] = {}  # nothing decodes during an update

    def get_state(self) -> dict:
        return self.data.get_state()

    def rollout(
        self, model: nnx.Module, global_step: int, last_step: int, should_stop: Callable[[], bool]
    ) -> RolloutBatch:
        prompts = self.data.next_batch(self.cfg.prompts_per_step)
        seed = self.step_seed(global_step)
        return pool(self.task.rollout(model, prompts, self.cfg.group_size, seed, should_stop=should_stop))

    def during(self, global_step: int, last_step: int, should_stop: Callable[[], bool]) -> Any:
        return contextlib.nullcontext()

    def shutdown(self) -> None:
        pass


class DecodeAfterUpdate:
    """Co-located: the next step's batch decodes after the update, on the same devices."""

    @contextlib.contextmanager
    def around_update(self, decode: Decode, should_stop: Callable[[], bool], timing: dict) -> Iterator[None]:
        yield
        took = decode(should_stop)
        timing.update(decode_ahead_time_s=took, decode_wait_time_s=took)

    def shutdown(self) -> None:
        pass


class DecodeBesideUpdate:
    """The split placement: the next step's batch decodes in a second thread on the rollout
    sub-mesh while the update runs on the train sub-mesh, each agreeing over its own devices."""

    def __init__(self, sides: tuple[Any, Any]):
        self.sides = sides
        self.thread = concurrent.futures.ThreadPoolExecutor(1, "decode-during-update")

    @contextlib.contextmanager
    def around_update(self, decode: Decode, should_stop: Callable[[], bool], timing: dict) -> Iterator[None]:
        abort = threading.Event()  # the update failed: stop decoding, in the same round everywhere
        stop = lambda: abort.is_set() or should_stop()  # noqa: E731
        future = self.thread.submit(decode, stop, self.sides[1])
        try:
            with agreeing_on(self.sides[0]):
                yield
        except BaseException:
            abort.set()
            future.result()
            raise
        t0 = time.perf_counter()
        took = future.result()
        timing.update(decode_ahead_time_s=took, decode_wait_time_s=time.perf_counter() - t0)

    def shutdown(self) -> None:
        self.thread.shutdown(wait=True)


class StreamedRollouts:
    """S > 0: one streaming session across steps (module docstring); `overlap`, when the next
    step decodes during this step's update, says where."""

    def __init__(
        self,
        task: StreamingTask,
        data: BatchIterator,
        step_seed: StepSeed,
        rollout: RolloutConfig,
        seed: int,
        staleness: int,
        overlap: DecodeAfterUpdate | DecodeBesideUpdate | None,
    ):
        self.task, self.data, self.step_seed, self.cfg, self.seed = task, data, step_seed, rollout, seed
        self.staleness, self.overlap = staleness, overlap
        self.session: Any = None
        self.ahead: dict[int, Any] = {}  # global step -> the task's handle of its submitted groups
        self.ready: dict[int, RolloutBatch] = {}  # global step -> its batch, decoded during an update
        self.states: dict[int, dict] = {}  # global step -> data state before its prompts were drawn
        self.next_step = 0  # the first step whose batch has not been taken
        self.timing: dict[str, float] = {}  # of the decoding during the last update (`during`)

    def get_state(self) -> dict:
        """What a checkpoint records as the data state: the iterator before the prompts of the next
        step not yet trained, however far ahead they were drawn (a resume draws them again)."""
        return self.states.get(self.next_step) or self.data.get_state()

    def rollout(
        self, model: nnx.Module, global_step: int, last_step: int, should_stop: Callable[[], bool]
    ) -> RolloutBatch:
        """Step `global_step`'s scored batch under `model` (the weights this step trains from)."""
        self.next_step = global_step
        if self.session is None:
            self.session = self.task.open_session(model, self.seed, self.cfg)
        else:
            self.session.update_weights(model)
        batch = self.ready.pop(global_step, None)
        if batch is None:  # nothing decoded ahead: the first step, or after a resume
            batch = self._decode(global_step, last_step, should_stop)
        self.states.pop(global_step, None)
        self.next_step = global_step + 1
        batch.policy_version = self.session.version
        return batch

    def _decode(self, step: int, last_step: int, should_stop: Callable[[], bool]) -> RolloutBatch:
        """Submit the steps whose groups may start now, then decode until `step`'s have finished."""
        r = self.cfg
        reach = self.staleness - int(self.overlap is not None)  # how far ahead a group may start (docstring)
        for ahead in range(step, min(step + reach, last_step) + 1):
            if ahead not in self.ahead:
                self.states[ahead] = self.data.get_state()
                prompts = self.data.next_batch(r.prompts_per_step)
                self.ahead[ahead] = self.task.submit_stream(
                    self.session, prompts, r.group_size, self.step_seed(ahead)
                )
        return pool(self.task.collect_stream(self.session, self.ahead.pop(step), should_stop))

    @contextlib.contextmanager
    def during(self, global_step: int, last_step: int, should_stop: Callable[[], bool]) -> Iterator[None]:
        """Around step `global_step`'s update: with `rollout.decode_during_update`, step
        `global_step + 1`'s batch is decoded meanwhile (`overlap`). Sets `timing`: that decoding's
        wall (decode_ahead_time_s) and how long the step waited for it after its update
        (decode_wait_time_s; co-located: all of it)."""
        self.timing = {}
        if self.overlap is None or global_step + 1 > last_step:
            yield
            return
        decode = functools.partial(self._decode_ahead, global_step + 1, last_step)
        with self.overlap.around_update(decode, should_stop, self.timing):
            yield

    def _decode_ahead(
        self, step: int, last_step: int, should_stop: Callable[[], bool], devices: Any = None
    ) -> float:
        """Decode `step`'s batch into `ready` (agreeing over `devices`); its wall. A stop drops the
        episodes in flight and rewinds the data to the first step not taken (as a resume would)."""
        t0 = time.perf_counter()
        try:
            with agreeing_on(devices):
                self.ready[step] = self._decode(step, last_step, should_stop)
        except RolloutStopped:
            self.data.set_state(self.states[min(self.states)])
            self.close()
            self.ahead, self.ready, self.states = {}, {}, {}
        return time.perf_counter() - t0

    def close(self) -> None:
        """End the session; its episodes still in flight are dropped (see the module docstring)."""
        if self.session is not None:
            self.session.close()
            self.session = None

    def shutdown(self) -> None:
        """`close`, and end the decoding thread of the split placement."""
        self.close()
        if self.overlap is not None:
            self.overlap.shutdown()


StepRollouts = SyncRollouts | StreamedRollouts  # what a schedule rolls out each GRPO step with
