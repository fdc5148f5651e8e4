"""Reading a training config: defaults <- YAML recipe <- `a.b=value` overrides, then checked.

Each value is converted by its field's annotation (sandbox.fields.coerce), so a `list[str]`, a
`dict[str, Any]` or a `Literal` field rejects a wrong value as it loads, with the key in the message.
Unknown keys are rejected the same way, listing the valid keys at that level.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from b2tjax.config.schema import TrainConfig
from rollout.config import RolloutConfig
from sandbox.fields import coerce, field_type

_ROLES = ("coordinator", "executor")
# Old spellings of renamed keys, so saved run configs and older recipes still load.
_RENAMED = {
    "rollout.max_new_tokens": "rollout.max_turn_tokens",
    **{f"himap.{r}_limits.max_seq_len": f"himap.{r}_limits.max_total_tokens" for r in _ROLES},
}
# HiMAP role limits were written with 0 = the rollout section's value; a StreamLimits says None.
_ZERO_IS_NONE = {f"himap.{r}_limits.{k}" for r in _ROLES for k in ("max_turn_tokens", "max_total_tokens")}


def _merge(obj: Any, updates: dict, prefix: str = "") -> None:
    """Write `updates` (nested dict) into the dataclass `obj`, checking names and types."""
    if not isinstance(updates, dict):
        raise ValueError(f"{prefix or 'config'}: expected a mapping, got {updates!r}")
    names = {f.name for f in dataclasses.fields(obj)}
    for key, value in updates.items():
        path = _RENAMED.get(f"{prefix}{key}", f"{prefix}{key}")
        key = path[len(prefix) :]
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"did you mean '{prefix}{close[0]}'? " if close else ""
            raise ValueError(f"unknown config key {path!r}; {hint}valid keys here: {sorted(names)}")
        current = getattr(obj, key)
        if path in _ZERO_IS_NONE and value == 0:
            value = None
        if dataclasses.is_dataclass(current):
            _merge(current, value, path + ".")
        else:
            setattr(obj, key, coerce(value, field_type(type(obj), key), path))


def apply_overrides(cfg: TrainConfig, overrides: Iterable[str]) -> TrainConfig:
    """Apply `section.key=value` strings; values are parsed as YAML (numbers, bools, lists)."""
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not of the form key=value")
        key, raw = item.split("=", 1)
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError:
            raise ValueError(f"override {item!r}: the value is not valid YAML") from None
        nested: Any = value
        for part in reversed(key.strip().split(".")):
            nested = {part: nested}
        _merge(cfg, nested)
    return cfg


def load_config(path: str | Path | None = None, overrides: Iterable[str] = ()) -> TrainConfig:
    """Defaults <- YAML file (if any) <- overrides, then validated."""
    cfg = TrainConfig()
    if path is not None:
        _merge_file(cfg, Path(path))
    return apply_overrides(cfg, overrides).validate()


def _merge_file(cfg: TrainConfig, path: Path) -> None:
    """Merge a YAML recipe; every problem with the file is a ValueError naming it."""
    if not path.is_file():
        raise ValueError(f"config file {path} " + ("is a directory" if path.is_dir() else "does not exist"))
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ValueError(f"{path}:{where}: YAML syntax error ({problem})") from None
    try:
        _merge(cfg, data)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def config_from_dict(data: dict) -> TrainConfig:
    """Inverse of `TrainConfig.to_dict` (used when restoring a run's saved config)."""
    cfg = TrainConfig()
    _merge(cfg, data)
    return cfg.validate()


def dump_config(cfg: TrainConfig, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))


def config_json(cfg: TrainConfig) -> str:
    return json.dumps(cfg.to_dict(), sort_keys=True)


def load_rollout_config(
    path: str | Path | None, overrides: Iterable[str] = (), base: RolloutConfig | None = None
) -> RolloutConfig:
    """The rollout section alone, for scripts that only roll out (launch/rollouts.py, the notebook):
    `base` <- the recipe's `rollout:` section (its other sections are checked, then ignored) <-
    `rollout.key=value` overrides, validated like a training config's."""
    cfg = TrainConfig(rollout=dataclasses.replace(base) if base is not None else RolloutConfig())
    if path is not None:
        _merge_file(cfg, Path(path))
    for item in overrides:
        if not item.strip().startswith("rollout."):
            raise ValueError(f"override {item!r}: only rollout.key=value settings apply here")
    apply_overrides(cfg, overrides)
    errors = cfg.rollout.errors("rollout.")
    if errors:
        raise ValueError("invalid rollout config:\n  " + "\n  ".join(errors))
    return cfg.rollout
