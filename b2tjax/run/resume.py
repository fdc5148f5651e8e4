"""`--resume` continues exactly the recorded run: where it continues (a `ResumePoint`, saved with
every checkpoint) and what it may change (only the keys in `SAFE_TO_CHANGE`).

A resumed run starts from the run's own record, OUT/config.yaml, which it never rewrites (when only
checkpoints/ was kept, the newest step's `config` item: every checkpoint records the run's config);
key=value arguments (or another --config) that change anything else are refused with the list of
differences; `steps` may only grow (`--resume --out RUN steps=N` extends a run, finished or not:
`extension_note` says what its learning rate does), and only in a mode that trains GRPO steps.
Accepted changes are appended to OUT/history.jsonl, one line per resume. A resumed run's final
evaluation never replaces an eval.json or report.html already there: it writes eval.2.json /
report.2.html (the next free number) beside them.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from b2tjax.config.schema import GRPO_MODES, Phase
from b2tjax.errors import UserError

# Keys a resume may change: where and how often results are written, logging, and the hardware
# description. Everything else (model, data, optimizer, rollout, GRPO, steps, seed) is the run.
SAFE_TO_CHANGE = (
    "out",  # the run directory moved or is named another way
    "log_every",
    "save_records",
    "eval_at_end",
    "distributed",
    "checkpoint.every_steps",
    "checkpoint.keep",
    "checkpoint.async_save",
    "hardware.",  # what the machine is (launch/plan.py), not what the run computes
    "metrics.",  # experiment trackers (Weights & Biases)
)
# Keys a resume may raise, never lower: more GRPO steps extend the run, with the optimizer state and
# the step counter restored as they were saved.
GROWABLE = ("steps",)
HISTORY_FILE = "history.jsonl"


@dataclasses.dataclass(frozen=True)
class ResumePoint:
    """The host-side state a resume needs, saved as each checkpoint's `train_state` item: the last
    completed step of a phase, the data iterator after it and the run's counters. Randomness is a
    pure function of (seed, step), so the seed is all the RNG state there is. `base`: a LoRA run's
    base identity (b2tjax.run.adapters.base_identity), which a resume must load again."""

    phase: Phase
    phase_step: int = 0
    data: dict | None = None
    counters: dict[str, int] = dataclasses.field(default_factory=dict)
    seed: int | None = None
    base: dict | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"phase": self.phase, "phase_step": self.phase_step, "seed": self.seed, "data": self.data}
        out["counters"] = dict(self.counters)
        return {**out, "base": self.base} if self.base else out

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> ResumePoint:
        return cls(
            phase=Phase(item["phase"]),
            phase_step=int(item.get("phase_step", 0)),
            data=item.get("data"),
            counters=dict(item.get("counters") or {}),
            seed=item.get("seed"),
            base=item.get("base"),
        )


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    """{dotted key: leaf}; an empty mapping has no leaves (`overrides: {}` then `{a: 1}` is one change)."""
    if not isinstance(tree, dict):
        return {prefix.rstrip("."): tree}
    out: dict[str, Any] = {}
    for key, value in tree.items():
        out.update(_flat(value, f"{prefix}{key}."))
    return out


def is_safe(key: str) -> bool:
    return any(key == s or (s.endswith(".") and key.startswith(s)) for s in SAFE_TO_CHANGE)


def config_changes(recorded: dict, now: dict) -> dict[str, tuple[Any, Any]]:
    """{dotted key: (recorded value, value now)} of every leaf that differs."""
    old, new = _flat(recorded), _flat(now)
    return {k: (old.get(k), new.get(k)) for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)}


def grows(key: str, recorded: Any, now: Any) -> bool:
    """Whether `key` is GROWABLE and the resume raises it."""
    return key in GROWABLE and isinstance(recorded, int) and isinstance(now, int) and now > recorded


def check_changes(changes: dict[str, tuple[Any, Any]]) -> None:
    """Refuse a resume that changes any key outside SAFE_TO_CHANGE (or lowers a GROWABLE one),
    listing every such difference."""
    kept = {k: (a, b) for k, (a, b) in changes.items() if not (is_safe(k) or grows(k, a, b))}
    refused = [f"{k}: {a!r} (recorded) -> {b!r}" for k, (a, b) in kept.items()]
    if refused:
        safe = ", ".join(s + "*" if s.endswith(".") else s for s in SAFE_TO_CHANGE)
        raise ValueError(
            f"--resume continues the recorded run, which differs in {'; '.join(refused)} "
            f"(a resume may change only {safe}, and raise steps; train a change as a new run with "
            "another --out)"
        )


def check_extension(changes: dict[str, tuple[Any, Any]], mode: str) -> None:
    """`steps` counts GRPO steps: raised on a run whose mode trains none (sft_only, eval) it would be
    accepted and change nothing, so it is refused (SFT's length, sft.steps, is the run's)."""
    if "steps" in changes and mode not in GRPO_MODES:
        old, new = changes["steps"]
        raise ValueError(
            f"steps: {old!r} (recorded) -> {new!r}: steps counts GRPO steps and a mode={mode} run trains "
            "none, so a resume cannot extend it; train a longer SFT (sft.steps) as a new run (another --out)"
        )


def extension_note(changes: dict[str, tuple[Any, Any]]) -> str | None:
    """The one line a resume that raises `steps` prints: what is kept, and the learning-rate rule.
    The schedule is rebuilt over the new total (the optimizer's step counter is kept), so the added
    steps continue that schedule instead of staying at the old end's rate."""
    if "steps" not in changes:
        return None
    old, new = changes["steps"]
    return (
        f"--resume extends the run from {old} to {new} GRPO steps, keeping the optimizer state and the "
        f"step counter; the learning-rate schedule is rebuilt over {new} steps (warmup, then cosine decay "
        f"to optim.final_lr_ratio * optim.lr at step {new}), so step {old + 1} takes that schedule's rate"
    )


def checkpoint_record(checkpoints: Path) -> Path | None:
    """The run's config as the newest step recorded it (its `config` item, JSON, which reads as a
    recipe), None when no step holds one. Read before JAX starts, so straight from Orbax's layout."""
    if not checkpoints.is_dir():
        return None
    steps = sorted((int(p.name) for p in checkpoints.iterdir() if p.name.isdigit()), reverse=True)
    found = (checkpoints / str(step) / "config" / "metadata" for step in steps)
    return next((path for path in found if path.is_file()), None)


def record_resume(out: Path, changes: dict[str, tuple[Any, Any]], argv: list[str]) -> None:
    """Append this resume and the changes it made to OUT/history.jsonl."""
    line = {
        "event": "resume",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "argv": argv,
        "changes": {k: {"recorded": a, "now": b} for k, (a, b) in changes.items()},
    }
    with open(out / HISTORY_FILE, "a") as f:
        f.write(json.dumps(line, default=str) + "\n")


# config.json keys that set an array's shape: checkpoints that differ in one never restore.
SHAPE_KEYS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "tie_word_embeddings",
    "attention_bias",
)


def check_model_config(directory: Path, now: dict[str, Any]) -> None:
    """Refuse in one line to resume checkpoints of another model shape (their config.json in
    `directory`), naming each differing shape key with both values, instead of trying to restore."""
    path = directory / "config.json"
    if not path.is_file():
        return
    saved = json.loads(path.read_text())
    differ = [f"{k} {saved.get(k)!r} vs {now.get(k)!r}" for k in SHAPE_KEYS if saved.get(k) != now.get(k)]
    if differ:
        raise UserError(
            f"--resume refused: the model differs from the one {directory} holds: {', '.join(differ)} "
            "(the checkpoint's value first)"
        )


def fresh_path(path: Path) -> Path:
    """`path` when absent, else NAME.N.SUFFIX with the first free N >= 2 (a result never overwritten)."""
    n = 2
    candidate = path
    while candidate.exists():
        candidate = path.with_name(f"{path.stem}.{n}{path.suffix}")
        n += 1
    return candidate
