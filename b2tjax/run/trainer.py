"""The training loop: an optional SFT warm start, then GRPO on rollouts of a task, with checkpoints.

One global step counter runs through both phases (SFT steps 1..S, GRPO steps S+1..S+N), so a run
has one CheckpointManager and `--resume` continues wherever it stopped. What is task-specific
(sampling episodes, rewards, SFT examples, the final evaluation) sits behind the `Task` protocol:
the agent task on a benchmark (b2tjax/tasks/benchmark.py) and the toy digit task
(b2tjax/tasks/toy.py) share this loop.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import time
from pathlib import Path
from typing import NoReturn

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx

from b2tjax.config import TrainConfig
from b2tjax.config.schema import GRPO_MODES, Phase
from b2tjax.data.pipeline import BatchIterator, example_dataset
from b2tjax.grpo.update import UpdateSpec, grpo_update
from b2tjax.run.adapters import base_identity, check_base
from b2tjax.run.agreement import StepShape, agree_step, pool
from b2tjax.run.checkpoint import PreemptionGuard, RunCheckpointer, stop_agreed
from b2tjax.run.mesh import build_mesh, check_placement
from b2tjax.run.metrics import MetricsWriter, save_step_records, scalar_leaves, stop_if_not_finite, wandb_run
from b2tjax.run.model_build import build_model as build_model  # re-exported for the trainer's callers
from b2tjax.run.phases import phase_optimizer, phase_step_fns
from b2tjax.run.resume import ResumePoint, check_model_config, fresh_path
from b2tjax.run.streaming import RolloutSchedule, StepRollouts
from b2tjax.sft.batches import sft_rows, sft_step_batch
from b2tjax.step.packing import row_devices
from b2tjax.step.train_step import BoundModel, StepFns, TrainState, init_train_state, state_shardings
from b2tjax.tasks.base import Task
from models.sharding import state_shardings as param_shardings
from rollout.engine import RolloutStopped


class Preempted(Exception):
    """Raised after the final checkpoint of a SIGTERM'd run; launch/train.py exits with 143."""


@dataclasses.dataclass
class RunResult:
    final_step: int
    last_metrics: dict
    eval_metrics: dict | None
    eval_table: str | None


class Trainer:
    def __init__(
        self,
        cfg: TrainConfig,
        task: Task,
        model: nnx.Module,
        *,
        resume: bool = False,
        progress: bool = True,
        valid_vocab: int | None = None,
    ):
        """`valid_vocab`: the tokenizer's size when the model has padded embedding rows past it
        (those ids are then outside every trainer log-softmax, as they are for the sampler)."""
        self.cfg, self.valid_vocab, self.task = cfg, valid_vocab, task
        self.out = Path(cfg.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.mesh = build_mesh(cfg.mesh)
        check_placement(cfg, self.mesh)
        self.rollout_schedule = RolloutSchedule.of(cfg.rollout, cfg.mesh)  # chosen once (run/streaming.py)
        self.model_fn, params = BoundModel.from_model(model)
        self.frozen = BoundModel.frozen_of(model)  # LoRA's frozen base (empty for full fine-tuning)
        self.base = base_identity(cfg) if self.frozen else None
        self.model_config = model.config
        self.params0 = params
        sft_data = task.sft_examples() if cfg.mode in ("sft_grpo", "sft_only") and cfg.sft.steps > 0 else None
        self.sft_examples = sft_data or []
        self.sft_steps = cfg.sft.steps if self.sft_examples else 0
        self.grpo_steps = cfg.steps if cfg.mode in GRPO_MODES else 0
        self.total_steps = self.sft_steps + self.grpo_steps
        model_json = model.config.to_hf(cfg.model.param_dtype)
        if resume:  # before the CheckpointManager opens: a refusal leaves no Orbax thread behind
            check_model_config(self.out / "checkpoints", model_json)
        self.ckpt = RunCheckpointer(
            self.out / "checkpoints",
            every_steps=cfg.checkpoint.every_steps,
            keep=cfg.checkpoint.keep,
            async_save=cfg.checkpoint.async_save,
            model_config_json=model_json,
        )
        self.resume = resume
        self.progress = progress
        self.ref_params = None

    # ------------------------------------------------------------------------------------------
    def _phase_fns(self, phase: Phase, params) -> tuple[StepFns, TrainState]:
        steps = (
            self.sft_steps
            if phase == Phase.SFT
            else self.grpo_steps * self.cfg.grpo.mini_batches * self.cfg.grpo.epochs
        )
        optimizer, schedule = phase_optimizer(self.cfg, phase, steps)
        state = init_train_state(params, optimizer, self.mesh)
        fns = phase_step_fns(
            self.cfg,
            self.model_fn,
            optimizer,
            schedule,
            state_shardings(state) if self.mesh is not None else None,
            self.mesh,
            self.valid_vocab,
            self.frozen,
        )
        return fns, state

    def _place_params(self, params):
        if self.mesh is None:
            return params

        shardings = param_shardings(self.model_fn.abstract_params, self.mesh)
        return jax.device_put(params, shardings)

    def _resume_point(
        self, phase: Phase, phase_step: int, data: BatchIterator | StepRollouts, counters: dict
    ) -> ResumePoint:
        """Where a resume after `phase_step` of `phase` continues (saved with the checkpoint)."""
        return ResumePoint(phase, phase_step, data.get_state(), dict(counters), self.cfg.seed, self.base)

    def _step_seed(self, global_step: int) -> int:
        return int(np.random.default_rng([self.cfg.seed, global_step]).integers(2**31 - 1))

    # ------------------------------------------------------------------------------------------
    def run(self) -> RunResult:
        cfg = self.cfg
        params = self._place_params(self.params0)
        start = ResumePoint(Phase.SFT if self.sft_steps else Phase.GRPO)
        restored_state, latest = None, None
        if self.resume:
            try:
                found = self._restore(params)
            except BaseException:  # a refusal: close Orbax's threads, or they dump at exit
                self.ckpt.close()
                raise
            if found is None:
                print(f"--resume: no checkpoint in {self.out / 'checkpoints'}, starting fresh", flush=True)
            else:
                latest, restored_state, start = found
                params = restored_state.params
                print(f"resuming from step {latest}", flush=True)

        # metrics.jsonl keeps only the steps before the restored one: a killed run's later steps are redone
        writer = MetricsWriter(
            self.out,
            total_steps=max(self.total_steps, 1),
            initial_step=latest or 0,
            progress=self.progress,
            keep_until=latest or 0,
            wandb=wandb_run(cfg),
        )
        last: dict = {}
        try:
            with PreemptionGuard() as guard:
                if start.phase == Phase.SFT and self.sft_steps:
                    params, last = self._run_sft(params, start, restored_state, writer, guard)
                    start, restored_state = ResumePoint(Phase.GRPO), None
                if self.grpo_steps and start.phase == Phase.GRPO:
                    params, last = self._run_grpo(params, start, restored_state, writer, guard)
            self.ckpt.wait()
            eval_metrics, table = None, None
            if cfg.eval_at_end:
                writer.write("evaluating ...")
                eval_metrics, table = pool(self.task.evaluate(self.model_fn(params, self.frozen)))
                writer.log(
                    self.total_steps,
                    scalar_leaves(eval_metrics),  # the phase names them eval/... in TensorBoard and W&B
                    phase=Phase.EVAL,
                    advance=False,
                )
                if jax.process_index() == 0:
                    self._result("eval.json").write_text(json.dumps(eval_metrics, indent=2, default=float))
                    writer.end_progress()
                    writer.write(table)
            return RunResult(self.total_steps, last, eval_metrics, table)
        finally:
            writer.close()
            self.ckpt.close()

    def _restore(self, params) -> tuple[int, TrainState, ResumePoint] | None:
        """(step, state, resume point) of the newest step that restores, None when there is none."""
        newest = self.ckpt.newest_train_state()
        if newest is not None:  # adapters mean nothing on another base: refuse before restoring
            check_base(newest[1].base, self.base, newest[0])
        _, abstract = self._phase_fns(Phase.GRPO, params)
        found = self.ckpt.restore_newest(abstract, report=lambda line: print(line, flush=True))
        return None if found is None else found[:3]

    def _result(self, name: str) -> Path:
        """OUT/name; a resumed run never replaces the results already there (b2tjax/run/resume.py)."""
        return fresh_path(self.out / name) if self.resume else self.out / name

    # ------------------------------------------------------------------------------------------
    def _maybe_stop(
        self,
        guard: PreemptionGuard,
        global_step: int,
        state: TrainState,
        train_state: ResumePoint,
        writer: MetricsWriter,
    ) -> None:
        if stop_agreed(guard.requested or self.ckpt.reached_preemption(global_step)):
            message = f"preempted: saved step {global_step}"
            self._save_and_exit(global_step, state, train_state, writer, message)

    def _stop_mid_step(
        self,
        guard: PreemptionGuard,
        global_step: int,
        state: TrainState,
        train_state: ResumePoint,
        writer: MetricsWriter,
        agreed: bool = False,
    ) -> None:
        """On SIGTERM inside a GRPO step (rollout, or before its first update), give up the step and save
        the last completed one: `state` is still that step's, as no update has consumed it yet.
        Several processes decide together: a stopped rollout (`agreed`) stopped in the same round on
        every process (rollout/lockstep.py); before the update, one collective asks them all."""
        if not (agreed or stop_agreed(guard.requested)):
            return
        done, where = global_step - 1, "the rollout of " if agreed else ""
        message = f"preempted during {where}step {global_step}: saved step {done}"
        self._save_and_exit(done, state, train_state, writer, message)

    def _save_and_exit(
        self, step: int, state: TrainState, train_state: ResumePoint, writer: MetricsWriter, message: str
    ) -> NoReturn:
        """Save `step` synchronously (nothing when no step has completed yet), log, and unwind."""
        if step >= 1:
            self.ckpt.save(step, state, train_state, self.cfg.to_dict(), force=True)
            self.ckpt.wait()
        writer.write(f"{message}, exiting")
        raise Preempted(step)

    def _save(self, global_step: int, state: TrainState, train_state: ResumePoint, final: bool) -> None:
        self.ckpt.save(global_step, state, train_state, self.cfg.to_dict(), force=final)

    # ------------------------------------------------------------------------------------------
    def _run_sft(self, params, start, restored_state, writer, guard):
        cfg = self.cfg
        fns, state = self._phase_fns(Phase.SFT, params)
        if restored_state is not None:
            state = restored_state
        data = BatchIterator(example_dataset(self.sft_examples, cfg.data.shuffle_seed))
        if start.data:
            data.set_state(start.data)
        counters = dict(start.counters)
        writer.set_phase(Phase.SFT)
        last = {}
        for phase_step in range(start.phase_step + 1, self.sft_steps + 1):
            t0 = time.perf_counter()
            rows = data.next_batch(cfg.sft.batch_size)
            agree_step(StepShape.of(min(len(r["ids"]), cfg.sft.max_seq_len) for r in rows))
            step = sft_step_batch(rows, cfg.sft.max_seq_len, sft_rows(cfg.sft, row_devices(fns.mesh)))
            tokens = step.tokens
            state, metrics = step.run(fns, state)
            metrics = {k: float(v) for k, v in jax.device_get(metrics).items()} | step.layout
            dt = time.perf_counter() - t0
            counters["sft_tokens"] = counters.get("sft_tokens", 0) + tokens
            metrics.update(tokens_per_s=tokens / dt, step_time_s=dt, skipped=int(state.skipped))
            last = metrics
            global_step = phase_step
            self._end_step(Phase.SFT, phase_step, global_step, metrics, state, data, counters, writer, guard)
        return state.params, last

    def _end_step(
        self,
        phase: Phase,
        phase_step: int,
        global_step: int,
        metrics: dict,
        state: TrainState,
        data: BatchIterator | StepRollouts,
        counters: dict,
        writer: MetricsWriter,
        guard: PreemptionGuard,
    ) -> None:
        """Every step of either phase ends alike: log, checkpoint (always after the last), honour SIGTERM."""
        last_step = self.sft_steps if phase == Phase.SFT else self.grpo_steps
        writer.log(global_step, metrics, phase=phase)
        stop_if_not_finite(phase, global_step, metrics)
        train_state = self._resume_point(phase, phase_step, data, counters)
        self._save(global_step, state, train_state, final=phase_step == last_step)
        if phase_step < last_step:
            self._maybe_stop(guard, global_step, state, train_state, writer)

    # ------------------------------------------------------------------------------------------
    def _reference_params(self, params, fresh: bool):
        """Frozen reference for the KL term: the policy at the start of GRPO, saved once on disk;
        under LoRA the base model itself, i.e. zero adapters (x A 0 adds exactly nothing)."""
        if self.frozen:
            return jax.tree.map(jnp.zeros_like, params)
        path = (self.out / "reference").absolute()
        checkpointer = ocp.StandardCheckpointer()
        if fresh or not path.exists():
            if path.exists():
                shutil.rmtree(path)
            checkpointer.save(path, params)
            checkpointer.wait_until_finished()
            return jax.tree.map(jnp.copy, params)
        target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), params)
        return checkpointer.restore(path, target)

    def _run_grpo(self, params, start, restored_state, writer, guard):
        cfg, g = self.cfg, self.cfg.grpo
        fns, state = self._phase_fns(Phase.GRPO, params)
        if restored_state is not None:
            state = restored_state
        if g.beta > 0:
            self.ref_params = self._reference_params(state.params, fresh=restored_state is None)
        data = BatchIterator(example_dataset(self.task.train_examples(), cfg.data.shuffle_seed))
        if start.data:
            data.set_state(start.data)
        counters = dict(start.counters)
        writer.set_phase(Phase.GRPO)
        rollouts = self.rollout_schedule.step_rollouts(
            self.task, data, self._step_seed, cfg.rollout, cfg.seed
        )
        try:
            return self._grpo_steps(fns, state, start, rollouts, counters, writer, guard)
        finally:
            rollouts.shutdown()

    def _grpo_steps(self, fns, state, start, rollouts: StepRollouts, counters, writer, guard):
        cfg, last = self.cfg, {}
        spec = UpdateSpec.of(cfg.grpo, cfg.rollout, cfg.rollout_batch, row_devices(fns.mesh))
        for phase_step in range(start.phase_step + 1, self.grpo_steps + 1):
            global_step = self.sft_steps + phase_step
            t0 = time.perf_counter()
            completed = self._resume_point(Phase.GRPO, phase_step - 1, rollouts, counters)
            stop_here = functools.partial(self._stop_mid_step, guard, global_step, state, completed, writer)
            seed = self._step_seed(global_step)
            try:
                model = self.model_fn(state.params, self.frozen)
                batch = rollouts.rollout(model, global_step, self.total_steps, lambda: guard.requested)
            except RolloutStopped:
                stop_here(agreed=True)
                raise
            t_rollout = time.perf_counter() - t0
            if cfg.save_records and jax.process_index() == 0:  # every process holds all records
                save_step_records(self.out / "records", global_step, batch.records)
            agree_step(StepShape.of(len(r.ids) for r in batch.records))
            t_update = time.perf_counter()  # the next step may decode meanwhile (streaming.py)
            with rollouts.during(global_step, self.total_steps, lambda: guard.requested):
                state, metrics = grpo_update(
                    spec, fns, state, batch, seed, self.ref_params, before_update=stop_here
                )
                t_update = time.perf_counter() - t_update
            dt = time.perf_counter() - t0
            counters["samples"] = counters.get("samples", 0) + len(batch.records)
            metrics.update(
                batch.metrics,
                tokens_per_s=sum(len(r.ids) for r in batch.records) / dt,
                rollout_time_s=t_rollout,
                update_time_s=t_update,
                step_time_s=dt,
                **rollouts.timing,
                skipped=int(state.skipped),
                samples=counters["samples"],
            )
            last = metrics
            self._end_step(
                Phase.GRPO, phase_step, global_step, metrics, state, rollouts, counters, writer, guard
            )
        return state.params, last
