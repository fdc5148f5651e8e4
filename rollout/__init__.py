"""Rollouts: a jitted batched sampler with a per-row KV cache and the agent loop around it.

Generic over benchmarks: prompts, worlds and judging come from a sandbox.benchmarks.Benchmark.
"""

from rollout.agents.single import AgentEpisode, ForcedTokens, agent_episode
from rollout.config import RolloutConfig
from rollout.engine import RolloutEngine
from rollout.episodes import Continue, Episode, Stop, StreamLimits, TurnOutcome
from rollout.prompt import prompt_ids, prompt_text
from rollout.record import EpisodeRecord, StreamTag
from rollout.sampling import token_logprobs
from rollout.stats import EngineStats

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
    "StreamTag",
    "TurnOutcome",
    "agent_episode",
    "prompt_ids",
    "prompt_text",
    "token_logprobs",
]
