"""Orbax model checkpoints (docs/ARCHITECTURE.md "Checkpoint layout").

A model checkpoint is `DIR/config.json` (HF-style) + `DIR/params` (Orbax StandardSave of
`nnx.to_pure_dict(nnx.state(model, nnx.Param))`). `load_model` also accepts a training run's
CheckpointManager directory (`OUT/checkpoints`, config.json beside the step dirs) and restores the
`params` item of its newest step (or `step`); a newest step that does not restore is an error, not
a quiet fall back to an older model, unless the caller asks for that (`fallback=True`). Every
checkpoint is checked against its SHA-256 manifest first (`models.checksums`; a run's
`checkpoints/config.json` has its own), and one without a manifest is refused unless the user
trusts it (`--trust-unverified`). Restores go straight into the target dtype and sharding.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
from flax import nnx
from jax.sharding import Mesh, SingleDeviceSharding

from models.checksums import UnverifiedError, verify_manifest, write_manifest
from models.config import Qwen3Config
from models.qwen3 import abstract_model, on_mesh
from models.settings import DEFAULT_RUNTIME, ModelRuntime
from models.sharding import variable_sharding

T = TypeVar("T")
PARAMS_ITEM = "params"
CONFIG_FILE = "config.json"


def write_config(cfg: Qwen3Config, directory: str, dtype: Any = jnp.float32) -> None:
    """`directory/config.json` in Hugging Face form (also what a CheckpointManager dir carries)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, CONFIG_FILE), "w") as f:
        json.dump(cfg.to_hf(np.dtype(dtype).name), f, indent=2)


def save_model(model, directory: str | os.PathLike) -> str:
    """Write config.json + params (overwriting). Returns the absolute directory."""
    directory = os.path.abspath(os.fspath(directory))
    write_config(model.config, directory, model.param_dtype)
    pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    with ocp.StandardCheckpointer() as ckptr:
        ckptr.save(os.path.join(directory, PARAMS_ITEM), pure, force=True)
        ckptr.wait_until_finished()
    write_manifest(directory, only=(CONFIG_FILE, PARAMS_ITEM))
    return directory


def restore_target(cfg: Qwen3Config, runtime: ModelRuntime, mesh: Mesh | None):
    """(graphdef, abstract Param state, pure dict of ShapeDtypeStructs carrying target shardings)."""
    abstract = abstract_model(cfg, on_mesh(runtime, mesh))
    graphdef, state = nnx.split(abstract)
    device = SingleDeviceSharding(jax.devices()[0])

    def target(v: nnx.Variable) -> jax.ShapeDtypeStruct:
        sharding = device if mesh is None else variable_sharding(v, mesh)
        return jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=sharding)

    targets = nnx.to_pure_dict(jax.tree.map(target, state, is_leaf=lambda x: isinstance(x, nnx.Variable)))
    return graphdef, state, targets


class CheckpointError(FileNotFoundError):
    """No checkpoint can be read from a directory; the message says which and why."""


def _reason(err: BaseException) -> str:
    """The first line of an error, short enough for a one-line report."""
    first = (str(err).strip().splitlines() or [""])[0]
    return f"{type(err).__name__}: {first[:160]}"


def restore_newest(
    steps: Sequence[int], restore: Callable[[int], T], where: str, report: Callable[[str], None] | None = None
) -> tuple[int, T, list[int]]:
    """(step, restored, skipped steps) for the newest step that restores. A step that fails (a
    missing or truncated file, a deleted item) is reported in one line and left on disk untouched:
    it may hold the only copy of something worth recovering by hand. A step without a manifest
    (`UnverifiedError`) is no proof of damage: it ends the search, so the user decides."""
    report = report or (lambda line: print(line, file=sys.stderr, flush=True))
    skipped: list[int] = []
    for step in sorted(steps, reverse=True):
        try:
            return step, restore(step), skipped
        except UnverifiedError:
            raise
        except Exception as err:  # whatever the damage, this step cannot serve; an older one may
            report(
                f"warning: skipping checkpoint step {step} of {where}, it does not restore ({_reason(err)})"
            )
            skipped.append(step)
    if not steps:
        raise CheckpointError(f"{where} holds no checkpoint step")
    raise CheckpointError(f"no checkpoint step of {where} restores (tried {sorted(steps, reverse=True)})")


def _verified(step_dir: str, restore: Callable[[], T]) -> T:
    verify_manifest(step_dir)  # a flipped byte fails here; Orbax would read it silently
    return restore()


def load_model(
    directory: str | os.PathLike,
    runtime: ModelRuntime = DEFAULT_RUNTIME,
    mesh: Mesh | None = None,
    step: int | None = None,
    fallback: bool = False,
    edit_config: Callable[[Qwen3Config], Qwen3Config] | None = None,
):
    """Qwen3ForCausalLM from a model checkpoint or a CheckpointManager directory: `step`, or the
    newest step (with `fallback`, the newest that restores; damaged newer steps are reported and
    skipped), executed as `runtime` says; with `mesh`, params are restored already sharded;
    `edit_config` changes the saved config before the model is built (a recipe's RoPE scaling)."""
    directory = os.path.abspath(os.fspath(directory))
    if not os.path.isdir(directory):
        raise CheckpointError(f"checkpoint directory {directory} does not exist")
    if not os.path.exists(os.path.join(directory, CONFIG_FILE)):
        raise CheckpointError(f"no {CONFIG_FILE} in checkpoint directory {directory}")
    steps_on_disk = [n for n in os.listdir(directory) if n.isdigit()]
    if steps_on_disk and not os.path.isdir(os.path.join(directory, PARAMS_ITEM)):
        verify_manifest(directory)  # a run's checkpoints/config.json, sealed by RunCheckpointer
    cfg = Qwen3Config.from_hf(directory)
    cfg = edit_config(cfg) if edit_config is not None else cfg
    graphdef, state, targets = restore_target(cfg, runtime, mesh)
    if os.path.isdir(os.path.join(directory, PARAMS_ITEM)):
        with ocp.StandardCheckpointer() as ckptr:
            item = os.path.join(directory, PARAMS_ITEM)
            pure = _verified(directory, lambda: ckptr.restore(item, targets))
    else:
        args = ocp.args.Composite(**{PARAMS_ITEM: ocp.args.StandardRestore(targets)})
        with ocp.CheckpointManager(directory) as manager:
            steps = manager.all_steps()

            def restore(s: int) -> Any:
                return _verified(os.path.join(directory, str(s)), lambda: manager.restore(s, args=args))

            if not steps:
                raise CheckpointError(f"{directory} holds no checkpoint step")
            if fallback and step is None:
                _, restored, _ = restore_newest(steps, restore, directory)
            else:
                restored = _restore_exactly(max(steps) if step is None else step, restore, directory, steps)
        pure = restored[PARAMS_ITEM]
    nnx.replace_by_pure_dict(state, pure)
    return nnx.merge(graphdef, state)


def _restore_exactly(step: int, restore: Callable[[int], T], where: str, steps: Sequence[int]) -> T:
    """`restore(step)`, or a one-line CheckpointError: an older step is the user's choice to make."""
    if step not in steps:
        raise CheckpointError(f"{where} has no checkpoint step {step} (steps: {sorted(steps)})")
    try:
        return restore(step)
    except Exception as err:  # noqa: BLE001 - whatever the damage, say which step and why
        older = sorted(s for s in steps if s < step)
        hint = f"; choose an older step explicitly (on disk: {older})" if older else ""
        raise CheckpointError(
            f"checkpoint step {step} of {where} does not restore ({_reason(err)}){hint}"
        ) from None
