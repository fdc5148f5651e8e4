"""Score finished episodes: the benchmark judges each episode's answer, then its GRPO reward.

The rollout API leaves `EpisodeRecord.reward` to the caller; the trainer's tasks (single agent and
HiMAP), launch/eval.py and the evaluation notebook all fill it here, so training and evaluation
reward the same way. One path serves both shapes of episode: a single-agent episode is one record
(`score_records`), a HiMAP episode several sharing one team answer (`score_team_episodes`); both
judge through `_judge`, and `episode_metrics` summarises either.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from rollout.record import EpisodeRecord
from sandbox.benchmarks import Instance, as_benchmark
from sandbox.reward import Reward
from sandbox.types import StopReason


def score_records(
    records: Sequence[EpisodeRecord],
    pairs: Sequence[Instance],
    benchmark: Any,
    *,
    action_penalty: bool = True,
    format_gate: bool = True,
) -> tuple[list[Any], list[Reward]]:
    """Single-stream episodes, as the engine returns their records: one per episode, or an
    episode's segments in order when its context was folded (rollout/context.py;
    `segments_by_episode`). Judge episode i's answer (its last record's) against pairs[i] =
    (visible instance, ground truth) and set every one of its records' `reward`.

    `benchmark` is a sandbox Benchmark (a B2T World, store path or DATA directory also works).
    An episode without an answer is undelivered and earns only the action penalty (SPEC section 7).
    Returns (verdicts, rewards), one each per episode.
    """
    episodes = segments_by_episode(records)
    if len(episodes) != len(pairs):
        raise ValueError(
            f"{len(episodes)} episodes but {len(pairs)} (instance, ground truth) pairs: "
            "give one pair per episode, in episode order"
        )
    answers = [segments[-1].answer for segments in episodes]
    return _judge(episodes, answers, pairs, benchmark, action_penalty, format_gate)


def segments_by_episode(records: Sequence[EpisodeRecord]) -> list[list[EpisodeRecord]]:
    """A single agent's records grouped into episodes: consecutive records of one `episode` index
    (its segments, in order), as the engine returns them."""
    out: list[list[EpisodeRecord]] = []
    for record in records:
        if out and out[-1][0].episode == record.episode:
            out[-1].append(record)
        else:
            out.append([record])
    return out


def score_team_episodes(
    records: Sequence[EpisodeRecord],
    answers: Sequence[str | None],
    pairs: Sequence[Instance],
    benchmark: Any,
    *,
    action_penalty: bool = True,
    format_gate: bool = True,
) -> tuple[list[Any], list[Reward]]:
    """Multi-stream episodes (HiMAP): episode i's merged answer `answers[i]` is judged once against
    pairs[i], and that team reward is written on every record of the episode (`record.episode == i`).
    An action error in any stream counts against the team (P_action is the episode's).
    Returns one (verdict, reward) per episode."""
    if len(answers) != len(pairs):
        raise ValueError(f"{len(answers)} episode answers but {len(pairs)} (instance, ground truth) pairs")
    return _judge(_by_episode(records, len(answers)), answers, pairs, benchmark, action_penalty, format_gate)


def _by_episode(records: Sequence[EpisodeRecord], episodes: int) -> list[list[EpisodeRecord]]:
    """The records of each episode index in [0, episodes), in record order."""
    streams: list[list[EpisodeRecord]] = [[] for _ in range(episodes)]
    for record in records:
        streams[record.episode].append(record)
    return streams


def _judge(
    streams: Sequence[Sequence[EpisodeRecord]],
    answers: Sequence[str | None],
    pairs: Sequence[Instance],
    benchmark: Any,
    action_penalty: bool,
    format_gate: bool,
) -> tuple[list[Any], list[Reward]]:
    """Episode i (its records streams[i], its answer answers[i]) judged against pairs[i]; every one
    of its records gets the episode's reward."""
    bench = as_benchmark(benchmark)
    verdicts, rewards = [], []
    for answer, records, (instance, truth) in zip(answers, streams, pairs):
        verdict = bench.evaluate(answer, instance, truth)
        reward = bench.reward(
            verdict if answer is not None else None,
            any(r.any_error for r in records),
            action_penalty=action_penalty,
            format_gate=format_gate,
        )
        for record in records:
            record.reward = reward.total
        verdicts.append(verdict)
        rewards.append(reward)
    return verdicts, rewards


def episode_metrics(records: Sequence[EpisodeRecord], rewards: Sequence[Reward]) -> dict[str, float]:
    """Episode-level rates beside the benchmark's pass rates, logged each GRPO step and in the final
    evaluation: reward components and action errors (an episode any of whose streams had a failed
    tool / memory call or malformed turn) per episode, truncations (any cap, and by length alone) and
    turns per stream.

    `rewards` holds one reward per episode and each record's `episode` indexes it, as after one
    `RolloutEngine.run` (a single-agent episode is one record)."""
    if not records or not rewards:
        return {}
    errors = [any(r.any_error for r in streams) for streams in _by_episode(records, len(rewards))]
    return {
        "r_format": float(np.mean([r.r_format for r in rewards])),
        "p_action": float(np.mean([r.p_action for r in rewards])),
        "action_error_rate": float(np.mean(errors)),
        "truncated_rate": float(np.mean([rec.truncated for rec in records])),
        "length_truncated_rate": length_truncated_share(records),
        "turns": float(np.mean([len(rec.turns) for rec in records])),
        "segments": len(records) / len({(rec.episode, rec.stream) for rec in records}),
        "peak_context_tokens": float(max(len(rec.ids) for rec in records)),
    }


def length_truncated_share(records: Sequence[EpisodeRecord]) -> float:
    """The share of streams cut by length, at rollout.max_seq_len (StopReason.MAX_TOTAL_TOKENS), not
    by the turn count or a turn's cap: the share a recipe sized for whole episodes keeps near 0."""
    if not records:
        return 0.0
    return float(np.mean([rec.stop_reason == StopReason.MAX_TOTAL_TOKENS for rec in records]))
