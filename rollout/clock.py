"""Whether a run's sampled tokens carry policy versions, chosen once when the run is made.

A plain `RolloutEngine.run` is `Unversioned`: it rolls every episode to its end under one set of
weights. A streaming session (rollout/session.py) keeps one run across training steps with a
`PolicyClock`: it counts weight updates, stamps every sampled token with the version that computed
its logits, and ends a loop early once the episodes the trainer waits for are done.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Set
from typing import Protocol

from rollout.stream import Stream


class Clock(Protocol):
    def stamps(self, stream: Stream, k: int) -> list[int] | None:
        """Policy versions of the `k` tokens `stream` just sampled; None: records carry none."""

    def step_over(self, done: Set[int]) -> bool:
        """The loop may stop before every episode is done (`done`: the finished episodes)."""


class Unversioned:
    """A plain run; see the module docstring."""

    def stamps(self, stream: Stream, k: int) -> list[int] | None:
        return None

    def step_over(self, done: Set[int]) -> bool:
        return False


@dataclasses.dataclass
class PolicyClock:
    """A streaming session's clock. `first_version` holds the version of rows whose next logits
    predate the last update (kept KV, mid-turn: their next token's)."""

    version: int = 0
    wanted: frozenset[int] | None = None  # the episodes the current `advance` waits for
    first_version: dict[Stream, int] = dataclasses.field(default_factory=dict)

    def stamps(self, stream: Stream, k: int) -> list[int] | None:
        if not k:
            return None
        return [self.first_version.pop(stream, self.version)] + [self.version] * (k - 1)

    def step_over(self, done: Set[int]) -> bool:
        return self.wanted is not None and self.wanted <= done
