"""Rollouts: a jitted batched sampler with a per-row KV cache and the agent loop around it."""

from rollout.engine import EngineStats, RolloutConfig, RolloutEngine
from rollout.episodes import AgentEpisode, Continue, Episode, ForcedTokens, Stop, TurnOutcome, agent_episode
from rollout.prompt import AgentPrompt, build_prompt
from rollout.record import EpisodeRecord
from rollout.sampling import token_logprobs

__all__ = [
    "AgentEpisode", "AgentPrompt", "Continue", "EngineStats", "Episode", "EpisodeRecord", "ForcedTokens",
    "RolloutConfig", "RolloutEngine", "Stop", "TurnOutcome", "agent_episode", "build_prompt",
    "token_logprobs",
]
