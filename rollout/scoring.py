"""Score finished episodes: the evaluator judges each record's answer, then the GRPO reward.

The rollout API leaves `EpisodeRecord.reward` to the caller; the trainer's TravelTask and the
evaluation notebook both fill it here, so training and evaluation reward the same way.
"""

from __future__ import annotations

from typing import Any, Sequence

from rollout.record import EpisodeRecord
from sandbox.evaluator import EvalResult, evaluate_plan
from sandbox.reward import Reward, compute_reward


def score_records(records: Sequence[EpisodeRecord], pairs: Sequence[tuple[dict, dict]], world: Any, *,
                  action_penalty: bool = True, format_gate: bool = True) -> tuple[list[EvalResult], list[Reward]]:
    """Judge record i against pairs[i] = (visible instance, ground truth) and set its `reward`.

    `world` is a World, a store path or a DATA directory. A record without an answer is
    undelivered and earns only the action penalty (SPEC section 7). Returns (verdicts, rewards).
    """
    if len(records) != len(pairs):
        raise ValueError(f"{len(records)} records but {len(pairs)} (instance, ground truth) pairs: "
                         "give one pair per record, in record order")
    evals, rewards = [], []
    for record, (instance, truth) in zip(records, pairs):
        result = evaluate_plan(record.answer or "", instance, truth, world)
        reward = compute_reward(result if record.answer is not None else None, record.any_error,
                                action_penalty=action_penalty, format_gate=format_gate)
        record.reward = reward.total
        evals.append(result)
        rewards.append(reward)
    return evals, rewards
