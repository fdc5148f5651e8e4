"""Reading a training config: defaults <- YAML recipe (after its `base:` chain) <- `a.b=value`
overrides, then checked.

A recipe may name the recipe it starts from, `base: FILE` (relative to its own folder), and then
holds only what differs: the chain is merged root first, each file's keys over its base's, a
mapping section key by key while a list or a mapping-valued knob (`model.overrides`) is replaced
whole. Each value is converted by its field's annotation (models.fields.coerce), so a `list[str]`,
a `dict[str, Any]` or a `Literal` field rejects a wrong value as it loads, with the key in the
message. Unknown keys are rejected the same way, listing the valid keys at that level. A recipe is
a small regular file of plain YAML (recipe_yaml): a duplicate key, an alias, a device or a FIFO, or
a file over MAX_CONFIG_BYTES is refused in one line.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from b2tjax.config.checks import validate
from b2tjax.config.recipe_yaml import parse_yaml, read_recipe
from b2tjax.config.schema import TrainConfig
from models.fields import coerce, field_type
from models.frozen import is_frozen
from rollout.config import RolloutConfig
from sandbox.himap.kinds import ROLES

# Old spellings of renamed keys, so saved run configs and older recipes still load.
_RENAMED = {
    "rollout.max_new_tokens": "rollout.max_turn_tokens",
    **{f"himap.{r}_limits.max_seq_len": f"himap.{r}_limits.max_total_tokens" for r in ROLES},
}
# Keys that no longer exist, with what replaced them: naming one is a one-line error saying so.
REMOVED_KEYS = {
    "rollout.refill": "continuous batching is the only schedule (benchmarks/bench_rollout.py builds "
    "static waves)",
    "rollout.reprefill": "the re-prefill baseline was removed; a turn feeds only its new tokens",
    "rollout.kv_cache": "the sampler's KV cache is always the page pool; rollout.kv_pages sizes it "
    "(0 = batch_rows x cache_len slots, the memory of whole-row caches)",
    "rollout.async_host": "the host schedule follows rollout.segment_return_share (1.0: host work "
    "between segments, reproducible; < 1: hidden behind decoding)",
    **{
        f"{section}.packing": f"every {section.upper()} step packs its records into rows; "
        f"{section}.row_tokens sets the row budget (1 = one record per row)"
        for section in ("grpo", "sft")
    },
}
MAX_CHAIN = 8  # recipes in one `base:` chain (the longest in configs/ has 4, base.yaml's defaults aside)
# HiMAP role limits were written with 0 = the rollout section's value; a StreamLimits says None.
_ZERO_IS_NONE = {f"himap.{r}_limits.{k}" for r in ROLES for k in ("max_turn_tokens", "max_total_tokens")}


def _merge(obj: Any, updates: dict, prefix: str = "") -> Any:
    """Write `updates` (nested dict) into the dataclass `obj`, checking names and types; a config
    launch/ has frozen is never merged into (it is refused, not changed behind the run's back)."""
    if is_frozen(obj):
        where = prefix.rstrip(".") or "the config"
        raise ValueError(f"{where} is frozen: key=value overrides apply before launch/ freezes it")
    if not isinstance(updates, dict):
        raise ValueError(f"{prefix or 'config'}: expected a mapping, got {updates!r}")
    names = {f.name for f in dataclasses.fields(obj)}
    for key, value in updates.items():
        path = _RENAMED.get(f"{prefix}{key}", f"{prefix}{key}")
        key = path[len(prefix) :]
        if path in REMOVED_KEYS:
            raise ValueError(f"config key {path!r} was removed: {REMOVED_KEYS[path]}")
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"did you mean '{prefix}{close[0]}'? " if close else ""
            raise ValueError(f"unknown config key {path!r}; {hint}valid keys here: {sorted(names)}")
        current = getattr(obj, key)
        if path in _ZERO_IS_NONE and value == 0:
            value = None
        if dataclasses.is_dataclass(current):  # merged into a copy: a frozen value may be shared
            value = _merge(copy.copy(current), value, path + ".")
        else:
            value = coerce(value, field_type(type(obj), key), path)
        object.__setattr__(obj, key, value)  # building it, as a frozen dataclass's own __init__ does
    return obj


def apply_overrides(cfg: TrainConfig, overrides: Iterable[str]) -> TrainConfig:
    """Apply `section.key=value` strings; values are parsed as YAML (numbers, bools, lists)."""
    for item in overrides:
        if "=" not in item:
            raise ValueError(f"override {item!r} is not of the form key=value")
        key, raw = item.split("=", 1)
        try:
            value = parse_yaml(raw) if raw != "" else ""
        except ValueError as err:
            raise ValueError(f"override {item!r}: the value is not valid YAML ({err})") from None
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
    return validate(apply_overrides(cfg, overrides))


def _merge_file(cfg: TrainConfig, path: Path, children: tuple[Path, ...] = ()) -> None:
    """Merge a YAML recipe after its `base:` chain; every problem is a ValueError naming its file."""
    data = read_recipe(path)
    base = data.pop("base", None)
    if base is not None:
        if not isinstance(base, str) or not base:
            raise ValueError(f"{path}: base must be the file name of a recipe, got {base!r}")
        chain = (*children, path.resolve())
        parent = path.parent / base
        if parent.resolve() in chain:
            raise ValueError(f"{path}: base {base!r} makes a loop ({' -> '.join(p.name for p in chain)})")
        if len(chain) >= MAX_CHAIN:
            raise ValueError(f"{path}: base {base!r} makes a chain of over {MAX_CHAIN} recipes")
        _merge_file(cfg, parent, chain)
    try:
        _merge(cfg, data)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def config_from_dict(data: dict) -> TrainConfig:
    """Inverse of `TrainConfig.to_dict` (used when restoring a run's saved config)."""
    cfg = TrainConfig()
    _merge(cfg, data)
    return validate(cfg)


def dump_config(cfg: TrainConfig, path: str | Path) -> None:
    Path(path).write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))


def config_json(cfg: TrainConfig) -> str:
    return json.dumps(cfg.to_dict(), sort_keys=True)


def load_rollout_config(
    path: str | Path | None, overrides: Iterable[str] = (), base: RolloutConfig | None = None
) -> RolloutConfig:
    """The rollout section alone, for scripts that only roll out (launch/rollouts.py, the notebook):
    `base` <- the `rollout:` sections of the recipe's chain (its other sections are checked, then
    ignored) <- `rollout.key=value` overrides, validated like a training config's."""
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
