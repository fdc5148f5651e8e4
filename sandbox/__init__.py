"""The agent sandbox: the generic core every benchmark shares (tool results, turn parser, memory,
episode environment, Python tool, reward type) plus the benchmarks themselves under
`sandbox.benchmarks` (B2T, TravelPlanner) and the HiMAP protocol under `sandbox.himap`.

Pure Python (no JAX), so it runs on rollout hosts and in notebooks. Public names are resolved
lazily so that `import sandbox` stays cheap and importing one part never drags in the others.
No benchmark's name is exported here: `sandbox.benchmarks.b2t` exports the B2T store and judge.
"""

from sandbox.lazy import lazy_exports

_EXPORTS = {
    "ToolResult": "sandbox.types",
    "World": "sandbox.types",
    "Prompt": "sandbox.types",
    "parse_turn": "sandbox.parser",
    "ParsedTurn": "sandbox.parser",
    "EpisodeEnv": "sandbox.env",
    "StepResult": "sandbox.env",
    "Reward": "sandbox.reward",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS)
