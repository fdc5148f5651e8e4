"""Run checkpoints: an Orbax CheckpointManager over params / opt_state / train_state / config items.

Layout (docs/ARCHITECTURE.md): OUT/checkpoints/<step>/{params,opt_state,train_state,config} and
OUT/checkpoints/config.json (the HF-style model config), so `models.checkpoint.load_model(OUT/checkpoints)`
and launch/export_hf.py read a training run directly. `params` is the `nnx.to_pure_dict` tree.

Saves are asynchronous (the train loop continues while tensorstore writes); Orbax writes into a
temporary directory and renames it when complete, so a run killed mid-save leaves the previous
checkpoint intact. As soon as a step's save has committed, a background thread (process 0) seals it:
it writes the step's SHA-256 manifest (`models.checksums`, files hashed in parallel;
`checkpoints/config.json` gets one when written), so a kill -9 later than the seal loses nothing, and
close() only waits for the last step's seal. A restore checks the step against its manifest first:
a flipped byte is damage, and such a step (or one that does not restore) is reported and set aside
into `checkpoints.unrestorable/` by a resume (never deleted). A step without a manifest (killed
between its commit and its seal) is not damage and is never moved: a resume stops and says to pass
`--trust-unverified`, which restores it and seals it (`RunCheckpointer.restore_newest`).
A SIGTERM (TPU preemption) sets a flag the loop polls; the loop then saves
and exits, see `PreemptionGuard`.
"""

from __future__ import annotations

import json
import logging
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from b2tjax.run.resume import ResumePoint
from b2tjax.step.train_step import TrainState
from models.checkpoint import restore_newest
from models.checksums import UnverifiedError, has_manifest, verify_manifest, write_manifest
from rollout.hosts import agree

ITEMS = ("params", "opt_state", "train_state", "config")


class RunCheckpointer:
    """Save every `every_steps` steps (and on demand), keep the last `keep`."""

    def __init__(
        self,
        directory: str | Path,
        *,
        every_steps: int,
        keep: int,
        async_save: bool = True,
        model_config_json: dict | None = None,
    ):
        self.directory = Path(directory).absolute()
        self.async_save = async_save
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep,
            save_interval_steps=every_steps,
            enable_async_checkpointing=async_save,
            create=True,
        )
        self.manager = ocp.CheckpointManager(self.directory, options=options, item_names=ITEMS)
        self._sealers: list[threading.Thread] = []  # one per step this run saved, until sealed
        if model_config_json is not None and jax.process_index() == 0:
            (self.directory / "config.json").write_text(json.dumps(model_config_json, indent=2))
            # sealed too: an edited rms_norm_eps would otherwise export a changed model
            write_manifest(self.directory, only=("config.json",))

    def save(
        self, step: int, state: TrainState, train_state: ResumePoint, config: dict, *, force: bool = False
    ) -> bool:
        """Start an (async) save if `step` is due or `force`; returns whether one was started."""
        if not force and not self.manager.should_save(step):
            return False
        if force and step in self.manager.all_steps():
            return False
        self.manager.wait_until_finished()  # (Orbax's save waits for the previous one anyway)
        args = ocp.args.Composite(
            params=ocp.args.StandardSave(state.params),
            opt_state=ocp.args.StandardSave(
                {"opt": state.opt_state, "step": state.step, "skipped": state.skipped}
            ),
            train_state=ocp.args.JsonSave(train_state.to_json()),
            config=ocp.args.JsonSave(config),
        )
        started = bool(self.manager.save(step, args=args, force=force))
        if started:
            self._seal_when_committed(step)
        return started

    def restore(self, step: int, abstract_state: TrainState) -> tuple[TrainState, ResumePoint, dict]:
        """Restore `step` into the shapes/shardings of `abstract_state` (arrays or ShapeDtypeStructs)."""
        target = jax.tree.map(_abstract, abstract_state)
        self._join_sealers()
        step_dir = self.directory / str(step)
        sealed = has_manifest(step_dir)
        try:
            verify_manifest(step_dir)
        except UnverifiedError:
            raise UnverifiedError(
                f"checkpoint step {step} in {self.directory} has no checksum manifest (a run stopped "
                "between its save and its seal, or it was removed), so it is not restored unchecked; "
                "run again with --trust-unverified to continue from it (it is then sealed), or move "
                f"{step_dir} out of the way to continue from the step before"
            ) from None
        restored = self.manager.restore(
            step,
            args=ocp.args.Composite(
                params=ocp.args.StandardRestore(target.params),
                opt_state=ocp.args.StandardRestore(
                    {"opt": target.opt_state, "step": target.step, "skipped": target.skipped}
                ),
                train_state=ocp.args.JsonRestore(),
                config=ocp.args.JsonRestore(),
            ),
        )
        if not sealed and jax.process_index() == 0:  # trusted and restored: sealed from now on
            write_manifest(step_dir)
        opt = restored["opt_state"]
        state = TrainState(restored["params"], opt["opt"], opt["step"], opt["skipped"])
        return state, ResumePoint.from_json(restored["train_state"]), restored["config"]

    def newest_train_state(self) -> tuple[int, ResumePoint] | None:
        """(step, resume point) of the newest step, read alone (before restoring arrays into a
        layout that may not be theirs), or None when there is none or it does not read."""
        steps = self.manager.all_steps()
        if not steps:
            return None
        try:
            verify_manifest(self.directory / str(max(steps)), hashes=False)  # no FIFO read, no hang
            item = self.manager.restore(
                max(steps), args=ocp.args.Composite(train_state=ocp.args.JsonRestore())
            )
        except Exception:  # a damaged step: restore_newest reports it and falls back
            return None
        return max(steps), ResumePoint.from_json(item["train_state"])

    def restore_newest(
        self, abstract_state: TrainState, report: Callable[[str], None]
    ) -> tuple[int, TrainState, ResumePoint, dict] | None:
        """Restore the newest step that restores, or None when there is no step at all.

        Steps that fail are reported and moved to `checkpoints.unrestorable/` beside this
        directory (never deleted): the resumed run will save those step numbers again. A step
        without a manifest is no proof of damage: its UnverifiedError stops the resume, moving nothing.
        """
        steps = self.manager.all_steps()
        if not steps:
            return None
        step, (state, train_state, config), skipped = restore_newest(
            steps, lambda s: self.restore(s, abstract_state), str(self.directory), report
        )
        if skipped:
            self._set_aside(skipped, report)
        return step, state, train_state, config

    def _set_aside(self, steps: list[int], report: Callable[[str], None]) -> None:
        aside = self.directory.with_name(self.directory.name + ".unrestorable")
        if jax.process_index() == 0:
            aside.mkdir(exist_ok=True)
            for step in steps:
                target = aside / str(step)
                while target.exists():  # an earlier resume set the same step number aside
                    target = target.with_name(target.name + "+")
                (self.directory / str(step)).rename(target)
                report(f"kept the unrestorable step {step} as {target}")
        self.manager.reload()

    def reached_preemption(self, step: int) -> bool:
        """Multi-host preemption notice (JAX's coordination service); False on a single process."""
        try:
            return bool(self.manager.reached_preemption(step))
        except Exception:  # no distributed runtime: only the local SIGTERM flag applies
            return False

    def _seal_when_committed(self, step: int) -> None:
        """Seal `step` in a background thread as soon as its save has committed (process 0)."""
        if jax.process_index() != 0:
            return

        def seal() -> None:
            try:
                self.manager.wait_until_finished()  # this step's commit (or a later one's)
                write_manifest(self.directory / str(step))
            except Exception as err:  # a failed save (the training thread hears of it), a step
                # deleted meanwhile (max_to_keep): a resume then names the unsealed step
                logging.getLogger(__name__).warning("checkpoint step %s not sealed: %s", step, err)

        sealer = threading.Thread(target=seal, name=f"checkpoint-seal-{step}", daemon=True)
        sealer.start()
        self._sealers = [t for t in self._sealers if t.is_alive()] + [sealer]

    def _join_sealers(self) -> None:
        for sealer in self._sealers:
            sealer.join()
        self._sealers = []

    def wait(self) -> None:
        """Until every started save has committed and been sealed."""
        self.manager.wait_until_finished()
        self._join_sealers()

    def close(self) -> None:
        self.wait()
        self.manager.close()


def _abstract(x: Any) -> Any:
    if isinstance(x, jax.Array):
        return jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding)
    return x


class PreemptionGuard:
    """Turns SIGTERM, and a first Ctrl-C (SIGINT), into a flag so the train loop can checkpoint and
    stop between steps; a second Ctrl-C stops at once (KeyboardInterrupt), without the save."""

    def __init__(self) -> None:
        self.requested = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> PreemptionGuard:
        try:
            self._previous = {s: signal.signal(s, self._handle) for s in (signal.SIGTERM, signal.SIGINT)}
        except ValueError:  # not the main thread: no handler, the flag stays False
            self._previous = {}
        return self

    def _handle(self, signum, frame) -> None:
        if signum == signal.SIGINT:
            if self.requested:
                raise KeyboardInterrupt
            print("Ctrl-C: stopping after a checkpoint of the finished step (Ctrl-C again: now)", flush=True)
        self.requested = True

    def __exit__(self, *exc) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)


def stop_agreed(asked: bool) -> bool:
    """Whether any process was asked to stop (a SIGTERM reaches one host): every process then saves
    the same step and exits together; one process alone would leave the others in a collective."""
    if jax.process_count() == 1:
        return asked
    return bool(agree([asked]).any())
