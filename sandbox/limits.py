"""Per-stream limits: the one limits type for HiMAP roles, rollout streams and the training config.

A value of None means "the engine config's value" (RolloutConfig: max_turns, max_turn_tokens,
max_seq_len); a set value may only tighten it, because the decode segment and the cache row are
sized by the config. It lives in sandbox so HiMAP's options (sandbox/himap) can hold it without
importing the rollout engine; `rollout.StreamLimits` is this class.
"""

from __future__ import annotations

import dataclasses
from typing import Any

_CONFIG_NAMES = {"max_total_tokens": "max_seq_len"}  # StreamLimits field -> RolloutConfig field


@dataclasses.dataclass(frozen=True)
class StreamLimits:
    """Caps for one stream (or every stream of one HiMAP role); None = the engine config's."""

    max_turns: int | None = None
    max_turn_tokens: int | None = None  # sampled tokens in one turn
    max_total_tokens: int | None = None  # record length, prompt included (the config's max_seq_len)

    def __post_init__(self) -> None:
        for name, value in dataclasses.asdict(self).items():
            if value is not None and int(value) <= 0:
                raise ValueError(f"StreamLimits.{name} must be positive or None, got {value}")

    def errors(self, prefix: str, config: Any, config_prefix: str = "") -> list[str]:
        """One line per limit outside [1, the config's value] (None passes): keys under `prefix`,
        the config's under `config_prefix`."""
        out = []
        for name, value in dataclasses.asdict(self).items():
            config_name = _CONFIG_NAMES.get(name, name)
            ceiling = int(getattr(config, config_name))
            if value is not None and not 1 <= value <= ceiling:
                out.append(
                    f"{prefix}{name} must be in [1, {config_prefix}{config_name}={ceiling}] (null = that), "
                    f"got {value}"
                )
        return out

    def resolve(self, config: Any) -> StreamLimits:
        """These limits with every None filled from `config` (a RolloutConfig); ValueError when one
        exceeds the config's (a longer stream would not fit its cache row, a longer turn not the
        decode segment)."""
        resolved = {}
        for name, value in dataclasses.asdict(self).items():
            config_name = _CONFIG_NAMES.get(name, name)
            ceiling = int(getattr(config, config_name))
            if value is not None and value > ceiling:
                raise ValueError(
                    f"stream limit {name}={value} exceeds the engine's {config_name}={ceiling} "
                    "(a stream's limits can only tighten the config's)"
                )
            resolved[name] = ceiling if value is None else int(value)
        return StreamLimits(**resolved)
