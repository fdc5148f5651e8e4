"""Config sections that refuse assignment once frozen, so a run's resolved config cannot drift.

The training config's mutable sections live in two packages (the rollout section in rollout/, the
rest in b2tjax/config); this pure-Python base, beside the typed-field helpers (models/fields.py), is
the one they share. A section builds and changes normally (the loader writes fields, tests set a
knob before use, `dataclasses.replace` returns a new, unfrozen value); `freeze(cfg)`, called by
launch/ once the config is resolved, marks the whole tree, and from then on an assignment raises
`FrozenConfigError` naming the dotted key. A nested dataclass that is not a `Freezable` must be a
`frozen=True` value (`models.settings.LoraConfig`, sandbox's `HimapOptions` and `StreamLimits`, which
nothing changes after the loader built them), so no section stays writable unnoticed.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

_MARK = "_frozen_at"  # an instance attribute, not a field: the dotted prefix of a frozen section
T = TypeVar("T")


class FrozenConfigError(dataclasses.FrozenInstanceError):
    """An assignment to a config that launch/ has frozen."""


class Freezable:
    """Base of a mutable config dataclass whose instances refuse assignment once `freeze` marked them
    (the mark is kept by copies and pickles, dropped by `dataclasses.replace`)."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        self._refuse(name)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        self._refuse(name)
        object.__delattr__(self, name)

    def _refuse(self, name: str) -> None:
        prefix = self.__dict__.get(_MARK)
        if prefix is not None:
            raise FrozenConfigError(
                f"the run's config is frozen: cannot assign {prefix}{name}; build a changed copy with "
                f"dataclasses.replace, or give {prefix}{name}=VALUE as a key=value override"
            )


def freeze(config: T, prefix: str = "") -> T:
    """`config` (a dataclass tree) with every section marked frozen; returned for chaining."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            freeze(value, f"{prefix}{f.name}.")
    if isinstance(config, Freezable):
        object.__setattr__(config, _MARK, prefix)
    elif not config.__dataclass_params__.frozen:  # type: ignore[attr-defined]
        raise TypeError(f"{type(config).__name__} is neither Freezable nor a frozen dataclass")
    return config


def is_frozen(config: Any) -> bool:
    """Whether `freeze` has marked this section."""
    return config.__dict__.get(_MARK) is not None
