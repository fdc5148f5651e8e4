"""score_records: each record's answer judged on the mini world, the SPEC section 7 reward written back."""

from __future__ import annotations

import json

import pytest

from b2tjax.tasks.scoring import score_records
from rollout.record import EpisodeRecord
from sandbox.benchmarks.b2t.evaluator.example import GROUND_TRUTH, INSTANCE, valid_plan
from tests.sandbox_fixtures import mini_world as world  # noqa: F401 (a fixture)

_EPISODES = iter(range(1_000_000))  # each record its own episode, as the engine numbers them


def _record(answer: str | None, action_error: bool) -> EpisodeRecord:
    return EpisodeRecord(INSTANCE["id"], answer=answer, errors=[action_error], episode=next(_EPISODES))


def test_rewards_follow_the_formula_and_are_written_to_the_records(world):
    perfect = json.dumps(valid_plan())
    records = [
        _record(perfect, False),
        _record(perfect, True),
        _record("not a plan", False),
        _record(None, True),
    ]
    verdicts, rewards = score_records(records, [(INSTANCE, GROUND_TRUTH)] * len(records), world)
    # A perfect plan earns R_C + R_UPC = 2; an action error costs 1; unreadable or missing: only the penalty.
    assert [r.total for r in rewards] == [2.0, 1.0, 0.0, -1.0]
    assert [record.reward for record in records] == [2.0, 1.0, 0.0, -1.0]
    assert [v.delivered for v in verdicts] == [True, True, False, False]
    assert all(v.instance_id == INSTANCE["id"] for v in verdicts)


def test_ablation_switches_reach_the_reward(world):
    records = [_record(None, True), _record(json.dumps(valid_plan()), True)]
    _, rewards = score_records(records, [(INSTANCE, GROUND_TRUTH)] * 2, world, action_penalty=False)
    assert [r.total for r in rewards] == [0.0, 2.0]


def test_a_pair_per_record_is_required(world):
    with pytest.raises(ValueError, match="2 episodes but 1"):
        score_records([_record(None, False), _record(None, False)], [(INSTANCE, GROUND_TRUTH)], world)


def test_segments_of_one_episode_are_judged_once_by_the_last_answer(world):
    """A folded episode's records (rollout/context.py): its last segment's answer is judged, an
    action error in an earlier segment still costs the episode, every segment gets the reward."""
    from sandbox.types import StopReason

    episode = next(_EPISODES)
    first = EpisodeRecord(INSTANCE["id"], errors=[True], episode=episode, stop_reason=StopReason.FOLDED)
    last = EpisodeRecord(INSTANCE["id"], answer=json.dumps(valid_plan()), episode=episode, segment=1)
    alone = _record(None, False)
    verdicts, rewards = score_records([first, last, alone], [(INSTANCE, GROUND_TRUTH)] * 2, world)
    assert [r.total for r in rewards] == [1.0, 0.0] and verdicts[0].delivered
    assert first.reward == last.reward == 1.0 and alone.reward == 0.0
