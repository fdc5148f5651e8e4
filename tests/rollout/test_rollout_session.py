"""Streaming sessions (rollout/session.py): one run across weight updates. Without an update a
session's records are a plain run's; after one, every sampled token is tagged with the weights that
computed its logits, and a resumed episode's KV is either kept (old weights) or recomputed."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from tests.rollout_fixtures import ANSWER, MEMORY, SEARCH, engine_config, forced_episode, rollout_setup  # noqa: F401

TEMPERATURE = 0.8


def _episodes(setup, n: int):
    """Multi-turn episodes: two forced turns, then sampled ones until an answer at turn 2 or 3."""
    scripts = [{0: SEARCH, 1: MEMORY, 2 + i % 2: ANSWER} for i in range(n)]
    return [
        forced_episode(setup, f"ep{i}", f"Plan trip {i} to Chengdu." + " Quickly." * i, scripts[i])
        for i in range(n)
    ]


def _engine(setup, **overrides):
    from rollout import RolloutEngine

    config = engine_config(temperature=TEMPERATURE, **overrides)
    engine = RolloutEngine(setup.model, setup.tokenizer, config)
    events: list = []
    engine.trace = lambda key, kind, ids, pos: events.append((key, kind, list(ids), pos))
    return engine, events


def _perturbed(model):
    from flax import nnx

    other = nnx.clone(model)
    params = nnx.state(other, nnx.Param)
    keys = iter(jax.random.split(jax.random.key(3), len(jax.tree.leaves(params))))
    noisy = jax.tree.map(lambda x: x + 0.05 * jax.random.normal(next(keys), x.shape, x.dtype), params)
    nnx.update(other, noisy)
    return other


def _fields(record):
    return record.ids, record.loss_mask, record.logprobs, record.turns, record.stop_reason


def test_session_without_updates_equals_a_plain_run(rollout_setup):
    """Episodes submitted in two batches and taken in two advances: the records of one run."""
    plain, _ = _engine(rollout_setup)
    expected = plain.run(_episodes(rollout_setup, 5), rng=7)
    engine, _ = _engine(rollout_setup)
    episodes = _episodes(rollout_setup, 5)
    with engine.session(rng=7) as session:
        first = session.submit(episodes[:2])
        rest = session.submit(episodes[2:])
        got = session.advance(first) + session.advance(rest)
    assert [_fields(r) for r in got] == [_fields(r) for r in expected]
    for record in got:
        assert len(record.versions) == len(record.ids)
        assert all(v == (0 if m else -1) for v, m in zip(record.versions, record.loss_mask))
        assert record.version_range == (0, 0)
    assert session.stats.episodes == 3 and 0 < session.stats.row_occupancy <= 1


def _across_update(setup, resume_kv: str):
    """Episode 0 is taken, the weights change, the rest finish: (records, trace events, model)."""
    engine, events = _engine(setup, resume_kv=resume_kv)
    new = _perturbed(setup.model)
    with engine.session(rng=7) as session:
        indices = session.submit(_episodes(setup, 5))
        first = session.advance(indices[:1])
        mark = len(events)
        session.update_weights(new)
        rest = session.advance(indices[1:])
    assert first[0].version_range == (0, 0)
    return rest, events[mark:], new


def _mixed(records):
    return [r for r in records if r.version_range == (0, 1)]


@pytest.mark.slow
def test_recompute_refeeds_running_episodes_under_the_new_weights(rollout_setup):
    from rollout.sampling import teacher_forced_logprobs

    rest, events, new = _across_update(rollout_setup, "recompute")
    mixed = _mixed(rest)
    assert mixed, "some episode must run across the update"
    for record in mixed:
        key = (record.episode, record.stream)
        refed = [e for e in events if e[0] == key and e[1] in ("prefill", "copy")]
        assert refed[0][3] == 0  # its row restarted at position 0 ...
        # ... and every token sampled after the update has the new weights' teacher-forced log-prob
        tagged = np.asarray(record.versions[1:]) == 1
        reference = teacher_forced_logprobs(new, record.ids, TEMPERATURE)
        assert np.max(np.abs(np.asarray(record.logprobs[1:])[tagged] - reference[tagged])) <= 1e-3
    for record in rest:  # and the tokens sampled before it, the old weights'
        tagged = np.asarray(record.versions[1:]) == 0
        if tagged.any():
            reference = teacher_forced_logprobs(rollout_setup.model, record.ids, TEMPERATURE)
            assert np.max(np.abs(np.asarray(record.logprobs[1:])[tagged] - reference[tagged])) <= 1e-3


@pytest.mark.slow
def test_keep_resumes_on_the_resident_kv(rollout_setup):
    from rollout.sampling import teacher_forced_logprobs

    rest, events, new = _across_update(rollout_setup, "keep")
    mixed = _mixed(rest)
    assert mixed
    gaps = []
    for record in mixed:
        key = (record.episode, record.stream)
        fed = [e for e in events if e[0] == key and e[1] in ("prefill", "copy")]
        assert all(pos > 0 for _, _, _, pos in fed)  # never restarted: the old KV stays
        tagged = np.asarray(record.versions[1:]) == 1
        reference = teacher_forced_logprobs(new, record.ids, TEMPERATURE)
        gaps.append(np.max(np.abs(np.asarray(record.logprobs[1:])[tagged] - reference[tagged])))
    # the kept KV came from the old weights: the new weights' full forward pass disagrees
    assert max(gaps) > 1e-2


def test_the_sampler_keeps_one_engine_until_its_config_changes(rollout_setup):  # noqa: F811
    """A task's Sampler (rollout/sampler.py) compiles and allocates once: the same config gives the
    same engine with the new weights (its samples follow them); another config, a new engine."""
    from flax import nnx

    from models.causal_lm import CausalLM
    from rollout.sampler import Sampler

    setup = rollout_setup
    assert isinstance(setup.model, CausalLM)  # the shipped model has the surface the sampler uses
    sampler = Sampler(setup.tokenizer)
    first = sampler.engine_for(setup.model, engine_config())
    before = first.run([forced_episode(setup, "free", "a", {})], rng=1)[0].ids
    shifted = nnx.clone(setup.model)
    shifted.embed.embedding[...] = -shifted.embed.embedding[...]
    assert sampler.engine_for(shifted, engine_config()) is first
    assert first.run([forced_episode(setup, "free", "a", {})], rng=1)[0].ids != before
    assert sampler.engine_for(setup.model, engine_config(temperature=1.0)) is not first
