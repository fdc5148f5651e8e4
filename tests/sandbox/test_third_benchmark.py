"""A third benchmark takes one folder and one registry line: Tiny Trip (tests/tiny_trip/), registered
below, runs through the generic paths with nothing in sandbox/, rollout/ or b2tjax/ edited for it:
make_data and splits through the registry, an agent episode in the real RolloutEngine (tiny random
model, the expert's turns forced) scored by b2tjax.tasks.scoring, SFT windows from its traces, and a
HiMAP episode (scripted team on the host, then replayed through the engine)."""

from __future__ import annotations

import argparse

import pytest

from sandbox.benchmarks import BENCHMARKS, benchmark_class, get_benchmark
from tests.rollout_fixtures import engine_config, rollout_setup  # noqa: F401  (session fixture)

REGISTRY_LINE = ("tiny_trip", "tests.tiny_trip.benchmark:TinyTripBenchmark")


@pytest.fixture
def bench(tmp_path, monkeypatch):
    monkeypatch.setitem(BENCHMARKS, *REGISTRY_LINE)  # the one registry line
    cls = benchmark_class("tiny_trip")
    cls.make_data(tmp_path, argparse.Namespace(), lambda message: None)
    assert cls.data_ready(tmp_path) and cls.offers_himap()
    return get_benchmark("tiny_trip", tmp_path)


def test_config_and_registry_see_the_new_benchmark(bench):
    from b2tjax.config.checks import _himap_benchmarks

    assert "tiny_trip" in _himap_benchmarks()  # HiMAP is offered without editing b2tjax/config.py
    assert [visible["days"] for visible, _ in bench.load_split("test")] == [2, 3, 2, 3]


def test_an_agent_episode_runs_in_the_engine_and_is_scored(bench, rollout_setup):  # noqa: F811
    from b2tjax.tasks.scoring import score_records
    from rollout import RolloutEngine
    from rollout.agents.single import ForcedTokens
    from rollout.prompt import prompt_ids
    from sandbox.env import EpisodeEnv

    pairs = bench.load_split("test")[:2]
    tok = rollout_setup.tokenizer
    episodes = []
    for visible, truth in pairs:
        trace = bench.expert_trace(visible, truth)
        turns = [m["content"] + "<|im_end|>" for m in trace["messages"] if m["role"] == "assistant"]
        prompt = bench.prompt(visible)
        env = EpisodeEnv(bench.world_for(visible), memory_enabled=prompt.memory, max_turns=4)
        forced = dict(enumerate(turns))
        episodes.append(ForcedTokens(visible["id"], prompt_ids(prompt, tok), env, tok, forced_turns=forced))
    records = RolloutEngine(rollout_setup.model, tok, engine_config(max_seq_len=1024)).run(episodes)
    assert [r.stop_reason for r in records] == ["answer", "answer"]
    verdicts, rewards = score_records(records, pairs, bench)
    assert all(v.all_passed for v in verdicts)
    assert [r.total for r in rewards] == [2.0, 2.0]  # R_format * (R_C + R_UPC), no action error


def test_sft_traces_become_training_windows(bench, rollout_setup):  # noqa: F811
    from b2tjax.sft.traces import sft_examples

    traces = bench.sft_traces()
    assert len(traces) == 4 and bench.sft_traces(limit=1) == traces[:1]
    examples = sft_examples(traces, rollout_setup.tokenizer, max_len=1024)
    assert len(examples) == 4
    assert all(0 < sum(e["mask"]) < len(e["mask"]) for e in examples)  # assistant tokens only


def test_a_himap_episode_runs_on_the_host_and_in_the_engine(bench, rollout_setup):  # noqa: F811
    from b2tjax.tasks.scoring import score_team_episodes
    from rollout import RolloutEngine
    from rollout.agents.himap import himap_episode
    from sandbox.himap.scripted import expert_traces, solve

    visible, truth = bench.load_split("test")[1]  # 3 days: three executors share one Σ
    run = solve(bench, visible, truth)
    assert run.failures == {} and bench.evaluate(run.answer, visible, truth).all_passed
    assert {t["role"] for t in expert_traces(bench, [(visible, truth)])} == {"coordinator", "executor"}
    episode = himap_episode(visible, bench, rollout_setup.tokenizer, forced=run.texts)
    config = engine_config(max_turns=16, max_seq_len=4096, cache_len=4096)  # HiMAP prompts are long
    engine = RolloutEngine(rollout_setup.model, rollout_setup.tokenizer, config)
    records = engine.run([episode])
    assert episode.answer == run.answer  # the engine replays the host driver byte for byte
    verdicts, rewards = score_team_episodes(records, [episode.answer], [(visible, truth)], bench)
    assert verdicts[0].all_passed and rewards[0].total == 2.0
