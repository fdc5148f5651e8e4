"""The scripted HiMAP team is never worse than the single-agent expert, on small worlds of other seeds.

On the seed-1 world's test-hard-00002 (5 days) the parallel days took the venues near the
hotel first-come, the last day could not be timed from what was left within the 2 h local-transport
limit, it was rejected every round and delivered empty (four constraints lost). The coordinator's
fallback (sandbox/himap/fallback.py) now writes the plan itself after the last round, and the
days no longer race for venues (each plans from its own share of the coordinator's candidates). Per seed one
instance per difficulty (seed 1: three, so that instance is in), built like `launch/make_data.py`.
"""

from __future__ import annotations

import pytest

from sandbox.benchmarks.b2t.benchmark import B2TBenchmark
from sandbox.benchmarks.b2t.expert import Expert
from sandbox.benchmarks.b2t.himap.expert import ExpertKnobs
from sandbox.himap.options import HimapOptions
from sandbox.himap.scripted import solve

pytestmark = pytest.mark.slow  # builds worlds of other seeds and runs the team on each

SEEDS = {1: 3, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 1, 8: 1}  # seed -> instances per difficulty


def _build(root, seed: int, per_difficulty: int) -> B2TBenchmark:
    from sandbox.benchmarks.b2t.instances.build import build_benchmark
    from sandbox.benchmarks.b2t.prompt import build_prompt
    from sandbox.benchmarks.b2t.world.generator import build_world

    out = root / f"seed{seed}"
    out.mkdir()
    build_world(out / "world.sqlite", scale="small", seed=seed)
    build_benchmark(
        out / "world.sqlite",
        out,
        seed=seed,
        sizes={"test": per_difficulty},
        log=lambda _: None,
        prompt_builder=build_prompt,
    )
    return B2TBenchmark(out)


@pytest.fixture(scope="module")
def worlds(tmp_path_factory):
    root = tmp_path_factory.mktemp("seeds")
    return {seed: _build(root, seed, k) for seed, k in SEEDS.items()}


def _passed(bench: B2TBenchmark, answer: str | None, visible, truth) -> set[str]:
    if answer is None:
        return set()
    return {r.name for r in bench.evaluate(answer, visible, truth).results if r.passed}


def test_the_team_passes_every_constraint_the_single_expert_passes_trip_by_trip(worlds):
    fallbacks = []
    for seed, bench in worlds.items():
        expert = Expert(bench.world)
        for visible, truth in bench.load_split("test"):
            single = _passed(bench, expert.solve(visible, truth).answer, visible, truth)
            run = solve(bench, visible, truth)
            assert bench.evaluate(run.answer, visible, truth).delivered, (seed, visible["id"])
            lost = single - _passed(bench, run.answer, visible, truth)
            assert not lost, (seed, visible["id"], sorted(lost), run.figures.rejections)
            if run.figures.fallback_days:
                fallbacks.append((seed, visible["id"]))
    # The trip (its day 4 once could not be timed around the venues the other days took
    # first-come) is now planned by its executors: each day plans from its own share of the
    # coordinator's candidates, so no day is left without venues and no trip needs the fallback.
    assert fallbacks == []


def test_without_the_fallback_a_day_rejected_every_round_is_delivered_empty(worlds):
    bench = worlds[1]
    visible, truth = next(p for p in bench.load_split("test") if p[0]["id"] == "test-hard-00002")
    knobs = ExpertKnobs(hint_override={4: 0.0}, fix_rejections=False)  # day 4 rejects every round
    run = solve(bench, visible, truth, HimapOptions(fallback=False), knobs)
    assert run.figures.fallback_days == 0 and run.figures.accepted_days == 4
    failed = {r.name for r in bench.evaluate(run.answer, visible, truth).results if not r.passed}
    assert {"daily_accommodation", "min_one_attraction"} <= failed


def test_every_round_rejected_ends_in_a_complete_plan_through_the_fallback(worlds):
    bench = worlds[2]
    visible, truth = bench.load_split("test")[0]
    days = int(truth["query"]["days"])
    knobs = ExpertKnobs(hint_override=dict.fromkeys(range(1, days + 1), 0.0), fix_rejections=False)
    run = solve(bench, visible, truth, knobs=knobs)
    m = run.figures
    assert m.rounds == 3 and m.rejections == {"budget": 3 * days}
    assert m.fallback_days == days and m.accepted_days == days
    assert all(o.stream == "coordinator" for o in run.session.accepted.values())
    verdict = bench.evaluate(run.answer, visible, truth)
    single = Expert(bench.world).solve(visible, truth).answer
    assert verdict.delivered and verdict.all_passed == bench.evaluate(single, visible, truth).all_passed
