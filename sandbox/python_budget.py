"""How much Python an episode may run: calls per turn, seconds per turn and per episode.

The Python pool is shared by every episode of a rollout, so one episode's loops would otherwise
take time from all the others. A call the budget does not cover gets an error result and never
reaches the pool. Limits are granted in the order the calls appear in the turn, before any runs,
so that identical turns get identical verdicts whatever the thread timing.
"""

import threading
from dataclasses import dataclass, field

_MIN_GRANT_S = 0.1  # below this a call could not even start; it is refused instead


@dataclass
class PythonBudget:
    calls_per_turn: int = 4
    turn_s: float = 8.0
    episode_s: float = 60.0
    used_s: float = 0.0  # seconds charged over the episode so far
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if self.calls_per_turn < 1 or not self.turn_s > 0 or not self.episode_s > 0:
            raise ValueError("Python budget: calls_per_turn >= 1 and positive turn_s, episode_s are required")

    def grant(self, n_calls: int, per_call_s: float) -> list[float | str]:
        """Each of a turn's `n_calls` Python calls: its time limit, or why it may not run."""
        turn_left = self.turn_s
        episode_left = self.episode_s - self.used_s
        grants: list[float | str] = []
        for i in range(n_calls):
            if i >= self.calls_per_turn:
                grants.append(
                    f"Python call {i + 1} of this turn was not run: at most {self.calls_per_turn} "
                    "Python calls per turn"
                )
                continue
            left = min(turn_left, episode_left)
            if left < _MIN_GRANT_S:
                scope = "this turn" if turn_left <= episode_left else "this episode"
                total = self.turn_s if turn_left <= episode_left else self.episode_s
                grants.append(
                    f"the Python time budget of {scope} ({total:g} s) is used up; the call was not run"
                )
                continue
            limit = min(per_call_s, left)
            turn_left -= limit
            episode_left -= limit
            grants.append(limit)
        return grants

    def charge(self, seconds: float) -> None:
        """Count `seconds` of Python run time against the episode (thread-safe)."""
        with self._lock:
            self.used_s += max(0.0, seconds)
