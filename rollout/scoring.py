"""Score finished episodes: the benchmark judges each record's answer, then its GRPO reward.

The rollout API leaves `EpisodeRecord.reward` to the caller; the trainer's BenchmarkTask and the
evaluation notebook both fill it here, so training and evaluation reward the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rollout.record import EpisodeRecord
from sandbox.benchmarks import as_benchmark
from sandbox.reward import Reward


def score_records(
    records: Sequence[EpisodeRecord],
    pairs: Sequence[tuple[dict, dict]],
    benchmark: Any,
    *,
    action_penalty: bool = True,
    format_gate: bool = True,
) -> tuple[list[Any], list[Reward]]:
    """Judge record i against pairs[i] = (visible instance, ground truth) and set its `reward`.

    `benchmark` is a sandbox Benchmark (a B2T World, store path or DATA directory also works).
    A record without an answer is undelivered and earns only the action penalty (SPEC section 7).
    Returns (verdicts, rewards).
    """
    if len(records) != len(pairs):
        raise ValueError(
            f"{len(records)} records but {len(pairs)} (instance, ground truth) pairs: "
            "give one pair per record, in record order"
        )
    bench = as_benchmark(benchmark)
    verdicts, rewards = [], []
    for record, (instance, truth) in zip(records, pairs):
        verdict = bench.evaluate(record.answer, instance, truth)
        reward = bench.reward(
            verdict if record.answer is not None else None,
            record.any_error,
            action_penalty=action_penalty,
            format_gate=format_gate,
        )
        record.reward = reward.total
        verdicts.append(verdict)
        rewards.append(reward)
    return verdicts, rewards


def score_team_episodes(
    records: Sequence[EpisodeRecord],
    answers: Sequence[str | None],
    pairs: Sequence[tuple[dict, dict]],
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
    by_episode: list[list[EpisodeRecord]] = [[] for _ in answers]
    for record in records:
        by_episode[record.episode].append(record)
    bench = as_benchmark(benchmark)
    verdicts, rewards = [], []
    for answer, streams, (instance, truth) in zip(answers, by_episode, pairs):
        verdict = bench.evaluate(answer, instance, truth)
        reward = bench.reward(
            verdict if answer is not None else None,
            any(r.any_error for r in streams),
            action_penalty=action_penalty,
            format_gate=format_gate,
        )
        for record in streams:
            record.reward = reward.total
        verdicts.append(verdict)
        rewards.append(reward)
    return verdicts, rewards
