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
    for name, knobs in (
        (True, {}),
        (False, dict(segment_return_share=0.5)),
        ("paged", dict(kv_cache="paged", page_size=64)),
    ):
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


def test_a_paged_cache_gives_the_contiguous_records(sampled):
    """HiMAP teams with `rollout.kv_cache: paged`: a team's shared system + tools prefix is shared by
    page reference instead of copied; the records are the contiguous cache's."""
    (_, cont, _), (_, paged, stats) = sampled[True], sampled["paged"]
    assert [(r.instance_id, r.stream) for r in cont] == [(r.instance_id, r.stream) for r in paged]
    for a, b in zip(cont, paged):
        assert (a.ids, a.loss_mask, a.turns, a.answer, a.stop_reason) == (
            b.ids,
            b.loss_mask,
            b.turns,
            b.answer,
            b.stop_reason,
        )
        # 1e-6, or 1e-6 of the value: a log-prob near -4.5 was 1.9e-6 (4 float32 ulps) apart once,
        # where XLA summed the same key blocks of the two layouts in another order
        assert b.logprobs == pytest.approx(a.logprobs, abs=1e-6, rel=1e-6)
    assert stats.reused_tokens > 0 and stats.peak_shared_pages > 0


def test_flat_replay_puts_the_answer_on_the_executor_that_ended_last(rollout_setup, scripted):  # noqa: F811
    bench, pairs, _ = scripted
    visible, truth = pairs[0]
    flat = dataclasses.replace(OPTIONS, coordinator=False)
    run = solve(bench, visible, truth, flat)
    tok = rollout_setup.tokenizer
    episode = himap_episode(visible, bench, tok, flat, forced=run.texts)
    engine = RolloutEngine(
        rollout_setup.model, tok, engine_config(max_turns=16, max_seq_len=32768, cache_len=32768)
    )
    records = engine.run([episode], rng=0)
    assert episode.answer == run.answer and bench.evaluate(run.answer, visible, truth).delivered
    assert {r.role for r in records} == {"executor"}
    answered = [r for r in records if r.stop_reason == "answer"]
    assert len(answered) == 1 and answered[0].answer == run.answer


def test_a_coordinator_out_of_turns_still_stops_with_the_merged_answer(rollout_setup, scripted):  # noqa: F811
    bench, pairs, runs = scripted
    visible, _ = pairs[0]
    options = dataclasses.replace(OPTIONS, coordinator_limits=StreamLimits(max_turns=1))
    episode = himap_episode(visible, bench, rollout_setup.tokenizer, options)
    assert [a.stream for a in episode.start()] == ["coordinator"]
    outcome = episode.on_turn_end("coordinator", runs[0].texts["coordinator"][-1], eos=False)
    executors = [a.stream for a in outcome.actions]
    assert executors == ["day1.r1", "day2.r1"] and outcome.errors == [False]
    call = '{"name": "reject_subgoal", "arguments": {"reason": "x"}}'
    reject = f"<think>no</think>\n<tool_call>\n{call}\n</tool_call>"
    actions = episode.on_turn_end("day1.r1", reject, eos=False).actions  # day 1 is due at once
    actions += episode.on_turn_end("day2.r1", reject, eos=False).actions
    stops = {a.stream: (a.reason, a.answer) for a in actions}
    assert stops["coordinator"] == ("answer", episode.answer) and episode.answer is not None
    assert stops["day1.r1"][0] == stops["day2.r1"][0] == "done"
