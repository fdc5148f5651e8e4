"""Run metrics: OUT/metrics.jsonl (one object per step), TensorBoard events in OUT/tb/, a progress bar,
and with `metrics.wandb: true` a Weights & Biases run (imported only then: wandb is no dependency).

Only process 0 writes. The progress bar shows the quantities a person watches during RL (reward,
pass rates, tokens/s); tqdm adds the rate and ETA.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import numpy as np
from tqdm.auto import tqdm

from b2tjax.config.schema import Phase
from b2tjax.errors import UserError
from b2tjax.run.metric_names import warn_undocumented
from sandbox.jsonl import read_jsonl_objects

# Postfix keys shown on the bar, in order, with short labels.
_BAR_KEYS = (
    ("loss", "loss"),
    ("reward", "R"),
    ("final_pass", "final"),
    ("micro_pass_c", "C"),
    ("micro_pass_upc", "UPC"),
    ("tokens_per_s", "tok/s"),
)


def _plain(value: Any) -> Any:
    """JSON-safe scalar: floats stay floats, NaN/inf become None, non-numbers pass through."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return value
    return value if math.isfinite(value) else None


def import_wandb() -> ModuleType:
    """The wandb package, or a one-line UserError saying how to get it (checked before a run starts)."""
    try:
        import wandb  # optional: only a run with metrics.wandb imports it
    except ImportError:
        raise UserError(
            "metrics.wandb: true needs the wandb package: pip install wandb (or set metrics.wandb=false)"
        ) from None
    return wandb


@dataclasses.dataclass(frozen=True)
class WandbRun:
    """Where a run logs on Weights & Biases; `config`: the run's whole config, shown with the run."""

    project: str
    name: str
    config: dict


def wandb_run(cfg: Any) -> WandbRun | None:
    """The W&B run a training config asks for (`metrics.wandb`), None when it asks for none."""
    m = cfg.metrics
    if not m.wandb:
        return None
    return WandbRun(m.wandb_project, m.wandb_run or Path(cfg.out).name, cfg.to_dict())


class MetricsWriter:
    def __init__(
        self,
        out_dir: str | Path,
        *,
        total_steps: int,
        initial_step: int = 0,
        desc: str = "train",
        enabled: bool | None = None,
        progress: bool = True,
        keep_until: int | None = None,
        wandb: WandbRun | None = None,
    ):
        """`keep_until`: drop the records of later steps already in metrics.jsonl, and have
        TensorBoard purge them from OUT/tb (a resumed run redoes the steps after its checkpoint,
        which must not appear twice). `wandb`: also log there."""
        self.enabled = jax.process_index() == 0 if enabled is None else enabled
        self.out_dir = Path(out_dir)
        self._bar = None
        self._tb = None
        self._jsonl = None
        self._wandb = None
        if not self.enabled:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if keep_until is not None:
            _truncate_after(self.out_dir / "metrics.jsonl", keep_until)
        self._jsonl = open(self.out_dir / "metrics.jsonl", "a")
        try:
            from tensorboardX import SummaryWriter

            # purge_step: TensorBoard hides the killed run's events from the redone steps on
            purge = None if keep_until is None else keep_until + 1
            self._tb = SummaryWriter(str(self.out_dir / "tb"), purge_step=purge)
        except ImportError:  # tensorboardX is a dependency; stay usable without it
            self._tb = None
        if wandb is not None:
            self._wandb = _start_wandb(wandb, self.out_dir)
        if progress:
            self._bar = tqdm(
                total=total_steps, initial=initial_step, desc=desc, dynamic_ncols=True, mininterval=0.5
            )

    def set_phase(self, desc: Phase) -> None:
        """Relabel the bar (one bar runs through SFT and GRPO: one global step counter)."""
        if self._bar is not None:
            self._bar.set_description(desc)

    def log(
        self, step: int, metrics: dict[str, Any], *, phase: Phase | str = "", advance: bool = True
    ) -> None:
        """Append one record and (for a train step) advance the bar by one step."""
        if not self.enabled:
            return
        warn_undocumented(metrics, str(phase))
        record = {"step": int(step), "phase": phase, "time": time.time()}
        record.update({k: _plain(v) for k, v in metrics.items()})
        self._jsonl.write(json.dumps(record) + "\n")
        self._jsonl.flush()
        scalars = {
            f"{phase}/{key}" if phase else key: value
            for key, value in record.items()
            if key not in ("step", "time") and isinstance(value, float)
        }
        if self._tb is not None:
            for key, value in scalars.items():
                self._tb.add_scalar(key, value, step)
        if self._wandb is not None:
            self._wandb.log(scalars, step=int(step))
        if self._bar is not None:
            shown = {label: f"{record[k]:.3g}" for k, label in _BAR_KEYS if isinstance(record.get(k), float)}
            self._bar.set_postfix(shown, refresh=False)
            self._bar.update(1 if advance else 0)

    def write(self, text: str) -> None:
        """Print a line without breaking the progress bar."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.write(text)
        else:
            print(text, flush=True)

    def end_progress(self) -> None:
        """Close the bar for good, so that what follows (the evaluation table) prints below it
        instead of inside it with the bar redrawn after."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def close(self) -> None:
        self.end_progress()
        if self._tb is not None:
            self._tb.close()
        if self._jsonl is not None:
            self._jsonl.close()
        if self._wandb is not None:
            self._wandb.finish()
            # finish() returns before the W&B service has written the run's records to its file;
            # tearing the service down waits for that, so a closed writer's run is on disk.
            import_wandb().teardown()
            self._wandb = None


WANDB_ID_FILE = "wandb_id"  # OUT/wandb_id: a resumed run goes on logging to the same W&B run


def _start_wandb(run: WandbRun, out_dir: Path) -> Any:
    """wandb.init in OUT/wandb/, with an id kept in OUT/wandb_id so that a resume continues the run."""
    wandb = import_wandb()
    id_file = out_dir / WANDB_ID_FILE
    run_id = id_file.read_text().strip() if id_file.is_file() else secrets.token_hex(4)
    id_file.write_text(run_id + "\n")
    return wandb.init(
        project=run.project, name=run.name, id=run_id, resume="allow", dir=str(out_dir), config=run.config
    )


def _truncate_after(path: Path, step: int) -> None:
    """Keep the records of steps <= `step`; rewritten beside and renamed, so a crash loses nothing."""
    if not path.exists():
        return
    lines = path.read_text().splitlines(keepends=True)
    kept = [line for line in lines if _step_of(line) is not None and _step_of(line) <= step]
    if len(kept) == len(lines):
        return
    partial = path.with_name(path.name + ".partial")
    partial.write_text("".join(kept))
    os.replace(partial, path)


def _step_of(line: str) -> int | None:
    """The record's step; None for a blank line or one torn by a killed writer."""
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return None


def read_metrics(path: str | Path, phase: Phase | None = None) -> dict[int, dict]:
    """Last record per step of a metrics.jsonl.

    `phase` keeps only that phase's records; None keeps the training ones (all but Phase.EVAL).
    """
    out: dict[int, dict] = {}
    for _, row in read_jsonl_objects(Path(path), ValueError):
        if (phase is None and row.get("phase") != Phase.EVAL) or row.get("phase") == phase:
            out[row["step"]] = row
    return out


def scalar_leaves(d: dict, prefix: str = "") -> dict[str, float]:
    """{"a/b": x} for every numeric leaf of a nested dict (booleans and text left out): the
    scalars a metrics line or TensorBoard can plot."""
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(scalar_leaves(v, f"{prefix}{k}/"))
        elif isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool):
            out[f"{prefix}{k}"] = float(v)
    return out


def save_step_records(folder: Path, step: int, records: Sequence[Any]) -> None:
    """FOLDER/step-N.jsonl: a GRPO step's rollout records (`save_records`), one JSON line each."""
    folder.mkdir(exist_ok=True)
    (folder / f"step-{step}.jsonl").write_text("".join(json.dumps(r.to_json()) + "\n" for r in records))


def stop_if_not_finite(phase: Phase, global_step: int, metrics: dict) -> None:
    """The policy for a non-finite step: the step applied nothing (b2tjax/step/optim.py) and the run
    stops in one line before saving it, rather than skipping on while the weights or data are broken."""
    bad = {k: metrics[k] for k in ("loss", "grad_norm") if k in metrics and not math.isfinite(metrics[k])}
    if bad:
        values = ", ".join(f"{k} {v}" for k, v in bad.items())
        raise UserError(
            f"{phase} step {global_step}: {values} is not finite; the update was not applied and the run "
            "stops (the last checkpoint is the step before); check optim.lr, the data and model.init"
        )
