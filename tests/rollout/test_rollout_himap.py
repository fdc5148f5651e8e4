"""HiMAP through the real rollout engine (tiny random model): the scripted expert's turns, replayed as
forced tokens, give byte-identical answers to the host-only driver; four episodes share three rows
(coordinators wait for their rounds, no deadlock); static and continuous batching give the same
records, and so does the paged KV cache; records say which role, day and round they belong to."""

from __future__ import annotations

import copy
import dataclasses
import random

import pytest

from rollout import EpisodeRecord, RolloutEngine
from rollout.agents.himap import HimapTag, himap_episode, role_metrics
from sandbox.benchmarks.b2t.benchmark import B2TBenchmark
from sandbox.benchmarks.b2t.instances.instructions import make_instruction
from sandbox.himap.kinds import Role
from sandbox.himap.options import HimapOptions
from sandbox.himap.scripted import solve
from sandbox.limits import StreamLimits
from tests.rollout_fixtures import engine_config, rollout_setup  # noqa: F401  (session fixture)
from tests.sandbox.test_instances import small_benchmark  # noqa: F401  (session fixture)
from tests.sandbox_fixtures import small_world_path  # noqa: F401  (session fixture)

pytestmark = pytest.mark.slow  # rolls HiMAP teams out through the engine

OPTIONS = HimapOptions(max_response_chars=1200)
EPISODES = 4


def _two_day(visible, truth):
    """The instance as a 2-day trip (a short episode keeps the engine test fast)."""
    visible, truth = copy.deepcopy(visible), copy.deepcopy(truth)
    truth["query"]["days"] = 2
    visible["instruction"] = make_instruction(random.Random(0), truth["query"], {}, "en")
    return visible, truth


@pytest.fixture(scope="module")
def scripted(small_benchmark):  # noqa: F811
    bench = B2TBenchmark(small_benchmark)
    pairs = [_two_day(v, h) for v, h in bench.load_split("test")[:EPISODES]]
    return bench, pairs, [solve(bench, v, h, OPTIONS) for v, h in pairs]


@pytest.fixture(scope="module")
def replayed(rollout_setup, scripted):  # noqa: F811
    """Every turn forced: the engine's turn hand-over, records and stops, without sampling."""
    bench, pairs, runs = scripted
    tok = rollout_setup.tokenizer
    episodes = [himap_episode(v, bench, tok, OPTIONS, forced=r.texts) for (v, _), r in zip(pairs, runs)]
    engine = RolloutEngine(
        rollout_setup.model, tok, engine_config(max_turns=16, max_seq_len=32768, cache_len=32768)
    )
    return episodes, engine.run(episodes, rng=0)


@pytest.fixture(scope="module")
def sampled(rollout_setup, scripted):  # noqa: F811
    """Each coordinator's first turn forced to the expert's distribute_task (so it distributes at
    once), the executors sampled by the random model: 4 coordinators wait on 8 executors with 3
    rows, with host work drained between segments and overlapped with decoding (segments returning
    after half their rows). Short limits keep the records small."""
    bench, pairs, runs = scripted
    tok = rollout_setup.tokenizer
    options = dataclasses.replace(
        OPTIONS, executor_limits=StreamLimits(max_turns=2), coordinator_limits=StreamLimits(max_turns=2)
    )
    out = {}
    for name, knobs in ((True, {}), (False, dict(segment_return_share=0.5))):
        episodes = [
            himap_episode(v, bench, tok, options, forced={"coordinator": r.texts["coordinator"][-1:]})
            for (v, _), r in zip(pairs, runs)
        ]
        engine = RolloutEngine(
            rollout_setup.model,
            tok,
            engine_config(max_turns=16, max_seq_len=16384, cache_len=16384, **knobs),
        )
        out[name] = (episodes, engine.run(episodes, rng=0), engine.stats)
    return out


def test_forced_replay_through_the_engine_gives_the_host_drivers_answers(scripted, replayed):
    bench, pairs, runs = scripted
    episodes, records = replayed
    for (visible, truth), run, episode in zip(pairs, runs, episodes):
        assert run.answer is not None and bench.evaluate(run.answer, visible, truth).delivered
        assert episode.answer == run.answer  # byte-identical
        coordinator = [r for r in records if r.instance_id == visible["id"] and r.stream == "coordinator"]
        assert coordinator[0].answer == run.answer and coordinator[0].stop_reason == "answer"
    assert len(records) == sum(len(r.texts) for r in runs)
    for record in records:
        tag = HimapTag.of(EpisodeRecord.from_json(record.to_json()).tag)  # typed, also read back
        if record.stream == "coordinator":
            assert tag == HimapTag(Role.COORDINATOR)
        else:
            day, round_ = record.stream[3:].split(".r")
            assert tag == HimapTag(Role.EXECUTOR, int(day), int(round_))


def test_four_episodes_on_three_rows_complete(sampled):
    episodes, records, stats = sampled[True]
    assert not any(r.stop_reason == "error" for r in records), [r.error_message for r in records]
    assert all(e.session.finished for e in episodes)
    executors = [r for r in records if r.role == "executor"]
    assert len(executors) >= 2 * EPISODES and all(r.stop_reason in ("done", "max_turns") for r in executors)
    # Sampled executors' turns call nothing shared, so no executor waits for another (no lockstep):
    # each episode's days finish while its coordinator waits, and nobody has to give a row up.
    assert stats.parks == 0 and stats.episodes == EPISODES
    # a team's shared system + tools prefix is taken by page reference, not prefilled again
    assert stats.reused_tokens > 0 and stats.peak_shared_pages > 0
    roles = role_metrics(records)
    assert roles["coordinator"]["streams"] == EPISODES and roles["executor"]["streams"] == len(executors)
    assert roles["executor"]["sampled"] == sum(r.num_sampled for r in executors) > 0


def test_overlapped_and_drained_host_work_give_the_same_records(sampled):
    (_, cont, _), (_, static, _) = sampled[True], sampled[False]
    assert [(r.instance_id, r.stream) for r in cont] == [(r.instance_id, r.stream) for r in static]
    for a, b in zip(cont, static):
        assert (a.ids, a.loss_mask, a.turns, a.answer, a.stop_reason) == (
            b.ids,
            b.loss_mask,
            b.turns,
            b.answer,
            b.stop_reason,
        )
