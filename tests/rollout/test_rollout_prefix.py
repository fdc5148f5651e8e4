"""Prefix reuse in the rollout engine: records that do not change when a shared prefix is taken
from another row's pages instead of prefilled (a GRPO group of 8 on fewer rows and on
8 rows, team episodes whose waiting streams are parked), with the token counts that prove the
copies happened. The HiMAP episode with parking on a fake-device mesh is
tests/rollout/test_rollout_himap_mesh.py."""

from __future__ import annotations

import numpy as np
import pytest

from tests.rollout.test_rollout_streams import _team_episodes
from tests.rollout_fixtures import ANSWER, SEARCH, engine_config, forced_episode, rollout_setup  # noqa: F401

GROUP = 8


def _run(setup, episodes, **overrides):
    from rollout import RolloutEngine

    engine = RolloutEngine(setup.model, setup.tokenizer, engine_config(**overrides))
    return engine.run(episodes, rng=5), engine.stats


def _assert_same_records(reference, records):
    assert [(r.episode, r.stream) for r in records] == [(r.episode, r.stream) for r in reference]
    for a, b in zip(reference, records):
        assert (a.ids, a.loss_mask, a.turns, a.forced) == (b.ids, b.loss_mask, b.turns, b.forced)
        assert (a.stop_reason, a.answer, a.errors, a.calls) == (b.stop_reason, b.answer, b.errors, b.calls)
        # 1e-6, relative above magnitude 1: a log-prob near -7 has an fp32 spacing of 4.8e-7, and a
        # prefix KV copied from the row that computed it was computed in other chunk shapes than
        # the engine without reuse recomputes it in (a parked stream's whole record at once)
        a_lp, b_lp = np.asarray(a.logprobs), np.asarray(b.logprobs)
        assert np.all(np.abs(a_lp - b_lp) <= 1e-6 * np.maximum(1.0, np.abs(a_lp)))


def _group(setup):
    """One prompt's GRPO group: 8 episodes on the same prompt; each searches, then samples freely
    (T=1, its own seed) until a forced answer at turn 2, so the records differ after the prompt."""
    prompt = "Plan a 3-day trip from Shanghai to Chengdu for two people, budget 6000 CNY. " * 3
    return [forced_episode(setup, f"g{i}", prompt, {0: SEARCH, 2: ANSWER}) for i in range(GROUP)]


@pytest.mark.slow
@pytest.mark.parametrize("rows", [3, GROUP])
def test_a_group_of_8_prefills_its_prompt_once_with_the_same_records(rollout_setup, rows):
    """3 rows: later episodes copy the prompt from rows that hold it (resident, or freed by an
    ended episode). 8 rows: the whole group is seated at once; one row prefills the prompt and
    the other 7 wait for it, then copy."""
    knobs = dict(temperature=1.0, batch_rows=rows)
    reference, off = _run(rollout_setup, _group(rollout_setup), prefix_reuse=False, **knobs)
    records, on = _run(rollout_setup, _group(rollout_setup), prefix_min_tokens=1, **knobs)
    _assert_same_records(reference, records)
    prompt = reference[0].prompt_len
    assert len({tuple(r.ids[:prompt]) for r in reference}) == 1 and len({tuple(r.ids) for r in reference}) > 1
    # every episode but one copies at least its prompt less the last token, and what is copied is
    # exactly what is no longer computed (the schedule is the same: synchronous host work)
    assert on.reused_tokens >= (GROUP - 1) * (prompt - 1)
    assert on.prefill_tokens + on.reused_tokens == off.prefill_tokens
    assert off.reused_tokens == 0


def test_parked_streams_copy_what_is_still_resident_with_the_same_records(rollout_setup):
    """Team episodes on 3 rows park waiting coordinators; with reuse, a coordinator seated again
    copies what some row still holds of its record (its old row, when not yet reused), so fewer
    tokens are re-prefilled, and the records are those of the engine without reuse."""
    knobs = dict(temperature=1.0)
    reference, off = _run(rollout_setup, _team_episodes(rollout_setup.tokenizer), prefix_reuse=False, **knobs)
    records, on = _run(rollout_setup, _team_episodes(rollout_setup.tokenizer), prefix_min_tokens=1, **knobs)
    _assert_same_records(reference, records)
    assert off.parks > 0 and on.parks == off.parks
    assert on.reused_tokens > 0 and on.prefill_tokens + on.reused_tokens == off.prefill_tokens
    assert on.reprefill_tokens < off.reprefill_tokens
