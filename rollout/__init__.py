"""Rollouts: a jitted batched sampler with a per-row KV cache and the agent loop around it.

Generic over benchmarks: prompts, worlds and judging come from a sandbox.benchmarks.Benchmark.
"""

from rollout.config import RolloutConfig
from rollout.engine import EngineStats, RolloutEngine
from rollout.episodes import (
    AgentEpisode,
    Continue,
    Episode,
    ForcedTokens,
    Stop,
    StreamLimits,
    TurnOutcome,
    agent_episode,
)
from rollout.prompt import prompt_ids, prompt_text
from rollout.record import EpisodeRecord
from rollout.sampling import token_logprobs

__all__ = [
    "AgentEpisode",
    "Continue",
    "EngineStats",
    "Episode",
    "EpisodeRecord",
    "ForcedTokens",
    "RolloutConfig",
    "RolloutEngine",
    "Stop",
    "StreamLimits",
    "TurnOutcome",
    "agent_episode",
    "prompt_ids",
    "prompt_text",
    "token_logprobs",
]
