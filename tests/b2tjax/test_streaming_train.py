"""Streaming GRPO through the real Trainer (b2tjax/run/streaming.py) on the lookup task: the
staleness bound, the off-policy metrics, and the data state a checkpoint records (what --resume
draws its prompts from)."""

from __future__ import annotations

import pytest

from b2tjax.config import TrainConfig
from b2tjax.data.pipeline import BatchIterator, example_dataset
from b2tjax.run.streaming import RolloutSchedule
from b2tjax.tasks.toy_tools import LookupConfig, LookupTask
from tests.lookup_fixtures import (
    NUM_VALUES,
    shared_compilations,  # noqa: F401  (fixture)
    train_lookup,
    xla_cache_dir,  # noqa: F401  (fixture of shared_compilations)
)

STREAM = ("sft.steps=20", "steps=3", "eval_at_end=false")


@pytest.fixture(scope="module")
def straight(tmp_path_factory, shared_compilations):  # noqa: F811
    """A finished streaming run at max_staleness 1 with the records of every step:
    the staleness test's S = 1 run and the straight run a preempted one is compared against."""
    out = tmp_path_factory.mktemp("straight")
    _train(out, LookupTask(LookupConfig(num_values=NUM_VALUES)))
    return out


@pytest.mark.slow
@pytest.mark.usefixtures("shared_compilations")
@pytest.mark.parametrize("staleness", [1, 2])
def test_streaming_run_trains_within_the_staleness_bound(tmp_path, straight, staleness):
    from b2tjax.run.metrics import read_metrics

    if staleness == 1:  # the module's straight run (saving its records does not change training)
        rows = [row for _, row in sorted(read_metrics(straight / "metrics.jsonl", phase="grpo").items())]
    else:
        task = LookupTask(LookupConfig(num_values=NUM_VALUES))
        overrides = [*STREAM, f"rollout.max_staleness={staleness}"]
        rows, _ = train_lookup(tmp_path, task, seed=0, overrides=overrides)
    assert len(rows) == 3
    for step, row in enumerate(rows):
        hist = [row[f"staleness/{k}"] for k in range(staleness + 1)]
        assert sum(hist) == pytest.approx(1.0)
        assert row["staleness_max"] <= min(step, staleness)  # step 1 trains on fresh weights only
        # 0 when every episode of the step finished during earlier steps (nothing left to decode)
        assert 0 <= row["rollout/row_occupancy"] <= 1
        assert 1.0 <= row["is_weight_max"] and 0 <= row["is_capped_share"] <= 1
    assert rows[0]["rollout/row_occupancy"] > 0
    # later steps train on episodes that ran across an update
    assert max(row["staleness_max"] for row in rows[1:]) >= 1


class _Recording:
    """A streaming task that only records which prompts each step submitted."""

    def __init__(self):
        self.submitted: dict[int, list[int]] = {}

    def open_session(self, model, seed, rollout):
        return self

    def update_weights(self, model):
        self.version += 1

    def submit_stream(self, session, prompts, group_size, seed):
        self.submitted[seed] = list(prompts)
        return seed

    def collect_stream(self, session, handle, should_stop):
        from b2tjax.grpo.update import RolloutBatch
        from b2tjax.tasks.base import ProcessPart

        return ProcessPart.alone(RolloutBatch([], {"prompts": self.submitted[handle]}))

    def close(self):
        pass

    version = 0


def _rollouts(staleness: int, task, during_update: bool = False):
    cfg = TrainConfig(task="toy")
    cfg.rollout.prompts_per_step, cfg.rollout.max_staleness = 3, staleness
    cfg.rollout.decode_during_update = during_update
    data = BatchIterator(example_dataset(list(range(50)), 0))
    schedule = RolloutSchedule.of(cfg.rollout, cfg.mesh)
    return schedule.step_rollouts(task, data, lambda step: step, cfg.rollout, cfg.seed), data


@pytest.mark.parametrize("staleness", [1, 2])
def test_checkpoints_record_the_data_before_the_next_untrained_step(staleness):
    """Prompts drawn ahead are in flight, not trained: the state a checkpoint records after step t
    is the synchronous run's, so a resume draws step t + 1's prompts again (and rolls them afresh)."""
    sync, _ = _rollouts(0, None)
    sync_states, sync_prompts = [], []
    for _ in range(5):
        sync_prompts.append(sync.data.next_batch(3))
        sync_states.append(sync.get_state())
    task = _Recording()
    stream, _ = _rollouts(staleness, task)
    for step in range(1, 6):
        batch = stream.rollout(None, step, last_step=5, should_stop=lambda: False)
        assert batch.metrics["prompts"] == sync_prompts[step - 1]  # each step trains its own prompts
        assert batch.policy_version == step - 1
        assert stream.get_state() == sync_states[step - 1]
        assert max(task.submitted) == min(step + staleness, 5)  # submitted exactly S steps ahead
    resumed, data = _rollouts(staleness, _Recording())
    data.set_state(sync_states[1])  # --resume after step 2
    assert (
        resumed.rollout(None, 3, last_step=5, should_stop=lambda: False).metrics["prompts"] == sync_prompts[2]
    )


def _sync_prompts_and_states(steps: int) -> tuple[list, list]:
    """The synchronous run's prompts per step and the data state after each step's draw."""
    sync, _ = _rollouts(0, None)
    prompts, states = [], []
    for _ in range(steps):
        prompts.append(sync.data.next_batch(3))
        states.append(sync.get_state())
    return prompts, states


@pytest.mark.parametrize("staleness", [1, 2])
def test_decoding_during_the_update_starts_each_step_one_update_earlier(staleness):
    """With rollout.decode_during_update, step t + 1's batch is decoded around step t's update (here
    co-located: after it), before the new weights reach the sampler; groups are submitted one step
    later than without, so the bound stays S; checkpoints record the synchronous run's data state."""
    sync_prompts, sync_states = _sync_prompts_and_states(5)
    task = _Recording()
    stream, _ = _rollouts(staleness, task, during_update=True)
    for step in range(1, 6):
        batch = stream.rollout(None, step, last_step=5, should_stop=lambda: False)
        assert batch.metrics["prompts"] == sync_prompts[step - 1]
        assert batch.policy_version == step - 1
        # the first step decodes its own groups (S - 1 steps ahead); later ones were decoded before
        assert max(task.submitted) == min(step + staleness - 1, 5)
        assert set(stream.ready) == set()
        with stream.during(step, last_step=5, should_stop=lambda: False):
            assert step + 1 not in stream.ready  # the update runs first (co-located)
        assert set(stream.ready) == ({step + 1} if step < 5 else set())
        assert max(task.submitted) == min(step + staleness, 5)  # never more than S steps ahead
        assert stream.get_state() == sync_states[step - 1]  # what the step's checkpoint records
        assert task.version == step - 1  # the new weights reach the sampler only at the next step


class _StopsAhead(_Recording):
    """Stopped (as by a SIGTERM) while collecting its second step, i.e. during step 1's update."""

    stopped = False

    def collect_stream(self, session, handle, should_stop):
        if handle == 2 and not self.stopped:
            self.stopped = True
            from rollout.run import RolloutStopped

            raise RolloutStopped("stopped by the test")
        return super().collect_stream(session, handle, should_stop)


def test_a_stop_while_decoding_during_the_update_drops_the_next_steps():
    """The update finishes; the episodes decoded ahead are dropped and the data rewinds to the
    first step not taken, so a run continuing (or resumed) draws step 2's prompts again."""
    sync_prompts, sync_states = _sync_prompts_and_states(3)
    stream, data = _rollouts(1, _StopsAhead(), during_update=True)
    stream.rollout(None, 1, last_step=3, should_stop=lambda: False)
    with stream.during(1, last_step=3, should_stop=lambda: False):
        pass
    assert not stream.ready and not stream.ahead and stream.session is None
    assert stream.get_state() == data.get_state() == sync_states[0]
    assert (
        stream.rollout(None, 2, last_step=3, should_stop=lambda: False).metrics["prompts"] == sync_prompts[1]
    )


@pytest.mark.slow
@pytest.mark.usefixtures("shared_compilations")
def test_decoding_during_the_update_trains_on_tokens_exactly_one_update_old(tmp_path):
    """Co-located, max_staleness 1: every token a later step trains on was sampled by the weights
    before the previous update (version t - 2 at step t), none by the step's own weights."""
    from b2tjax.run.metrics import read_metrics

    task = LookupTask(LookupConfig(num_values=NUM_VALUES))
    extra = ["rollout.max_staleness=1", "rollout.decode_during_update=true", "save_records=true"]
    rows, _ = train_lookup(tmp_path, task, seed=0, overrides=[*STREAM, *extra])
    metrics = read_metrics(tmp_path / "metrics.jsonl")
    assert [metrics[s]["staleness_max"] for s in (21, 22, 23)] == [0.0, 1.0, 1.0]
    assert [metrics[s]["staleness/1"] for s in (22, 23)] == [1.0, 1.0]
    for step in (21, 22, 23):
        versions = {v for r in _step_records(tmp_path, step) for v in r["versions"] if v >= 0}
        assert versions == {max(step - 22, 0)}
    assert all(metrics[s]["decode_ahead_time_s"] > 0 for s in (21, 22))
    assert "decode_ahead_time_s" not in metrics[23]  # nothing after the last step


class _StoppedAt(LookupTask):
    """The lookup task, preempted (as by a SIGTERM) during the rollout of its `stop`-th step."""

    def __init__(self, stop: int):
        super().__init__(LookupConfig(num_values=NUM_VALUES))
        self.stop, self.collected = stop, 0

    def collect_stream(self, session, handle, should_stop=None):
        self.collected += 1
        if self.collected == self.stop:
            from rollout.engine import RolloutStopped

            raise RolloutStopped("stopped by the test")
        return super().collect_stream(session, handle, should_stop)


def _train(out, task, resume: bool = False):
    from b2tjax.config import apply_overrides, validate
    from b2tjax.run.trainer import Trainer, build_model
    from tests.lookup_fixtures import RECIPE

    cfg = TrainConfig(task="toy", mode="sft_grpo", seed=0, steps=3, out=str(out))
    shape = f"model.overrides={{vocab_size: {task.tokenizer.vocab_size}, initializer_range: 0.1}}"
    # no periodic checkpoints (RECIPE's every 1,000 steps): a preempted run saves its last step itself
    extra = [*STREAM, "rollout.max_staleness=1", "save_records=true"]
    validate(apply_overrides(cfg, [shape, *RECIPE, *extra]))
    return Trainer(cfg, task, build_model(cfg), resume=resume, progress=False).run()


def _step_records(out, step: int) -> list[dict]:
    import json

    return [json.loads(line) for line in (out / "records" / f"step-{step}.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_resume_drops_in_flight_episodes_and_rolls_them_again(tmp_path, straight):
    """Preempted during step 2's rollout (step 3's episodes in flight too), the run saves step 1;
    --resume rolls steps 2 and 3 from scratch: the same prompts and episode seeds as the straight
    run, every record sampled by weights at most max_staleness = 1 updates old."""
    from b2tjax.run.metrics import read_metrics
    from b2tjax.run.trainer import Preempted

    with pytest.raises(Preempted):
        _train(tmp_path / "cut", _StoppedAt(stop=2))
    _train(tmp_path / "cut", LookupTask(LookupConfig(num_values=NUM_VALUES)), resume=True)
    grpo_steps = (21, 22, 23)  # after sft.steps=20
    rows = read_metrics(tmp_path / "cut" / "metrics.jsonl")
    assert all(rows[s]["staleness_max"] <= 1 for s in grpo_steps)
    assert rows[22]["staleness_max"] == 0  # the first step after --resume: all fresh
    for step in grpo_steps:
        a, b = _step_records(straight, step), _step_records(tmp_path / "cut", step)
        prompts = [(r["instance_id"], r["ids"][: r["prompt_len"]]) for r in a]
        assert prompts == [(r["instance_id"], r["ids"][: r["prompt_len"]]) for r in b]


def test_a_task_that_cannot_stream_is_refused():
    from b2tjax.errors import UserError

    with pytest.raises(UserError, match="rollout.max_staleness=1 needs a task that streams"):
        _rollouts(1, object())


def test_decoding_during_the_update_on_several_cpu_processes_needs_one_device_per_side():
    """Refused at start-up (not after the SFT phase): XLA:CPU's cross-process collectives deadlock
    when both sub-meshes run programs with several local devices at once."""
    from b2tjax.errors import UserError
    from b2tjax.run.mesh import check_concurrent_split

    check_concurrent_split(1, True, "cpu", processes=2)  # one device per side: runs
    check_concurrent_split(2, True, "cpu", processes=1)  # one process: no cross-process collective
    check_concurrent_split(2, True, "tpu", processes=2)
    check_concurrent_split(2, False, "cpu", processes=2)  # the sub-meshes take turns
    refusal = r"mesh.rollout_devices=2 on 2 CPU processes: .* use mesh.rollout_devices=1"
    with pytest.raises(UserError, match=refusal):
        check_concurrent_split(2, True, "cpu", processes=2)
