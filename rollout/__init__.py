"""Rollouts: a jitted batched sampler with a per-row KV cache and the agent loop around it.

Generic over benchmarks: prompts, worlds and judging come from a sandbox.benchmarks.Benchmark.
"""

import importlib

# Where each public name lives. Resolved on first use, so that `rollout.config` (read when a recipe
# is loaded) is importable without starting JAX.
_HOMES = {
    "AgentEpisode": "rollout.agents.single",
    "ForcedTokens": "rollout.agents.single",
    "agent_episode": "rollout.agents.single",
    "RolloutConfig": "rollout.config",
    "RolloutEngine": "rollout.engine",
    "Continue": "rollout.episodes",
    "Episode": "rollout.episodes",
    "Stop": "rollout.episodes",
    "StreamLimits": "rollout.episodes",
    "TurnOutcome": "rollout.episodes",
    "prompt_ids": "rollout.prompt",
    "prompt_text": "rollout.prompt",
    "EpisodeRecord": "rollout.record",
    "StreamTag": "rollout.record",
    "token_logprobs": "models.logits",
    "EngineStats": "rollout.stats",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'rollout' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
