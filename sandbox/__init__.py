"""The travel sandbox: world store, tools, memory, episode environment, evaluator and reward.

Pure Python (no JAX), so it runs on rollout hosts and in notebooks. Public names are resolved
lazily so that `import sandbox` stays cheap and importing one part never drags in the others.
"""

import importlib
from typing import Any

_EXPORTS = {
    "open_world": "sandbox.world.store",
    "World": "sandbox.world.store",
    "ToolResult": "sandbox.types",
    "parse_turn": "sandbox.parser",
    "ParsedTurn": "sandbox.parser",
    "EpisodeEnv": "sandbox.env",
    "StepResult": "sandbox.env",
    "read_plan": "sandbox.plan",
    "evaluate_plan": "sandbox.evaluator",
    "compute_reward": "sandbox.reward",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'sandbox' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
