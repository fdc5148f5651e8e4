"""HiMAP on TravelPlanner: the protocol driven with hand-written turns built from the official human
plans (coordinator distributes the plan's cities, each executor submits its day) merges into a
plan the official evaluator judges exactly as the human plan, with Σ's spend equal to the
evaluator's total cost. Needs the shared TravelPlanner data (skipped without it)."""

from __future__ import annotations

import json

import pytest

from sandbox.benchmarks.travelplanner import hard
from sandbox.benchmarks.travelplanner.benchmark import TravelPlannerBenchmark
from sandbox.benchmarks.travelplanner.evaluator import evaluate
from sandbox.benchmarks.travelplanner.lookup import Lookup
from sandbox.benchmarks.travelplanner.plan_reader import PLAN_FIELDS
from sandbox.benchmarks.travelplanner.query import normalize_query
from sandbox.benchmarks.travelplanner.text import from_to
from sandbox.himap.options import HimapOptions
from sandbox.himap.protocol import COORDINATOR, HimapSession
from tests.tp_fixtures import human_plans, tp_db, train_queries  # noqa: F401  (session fixtures)
from tests.tp_harness import DATABASE_DIR


def _call(name, **arguments):
    body = json.dumps({"name": name, "arguments": arguments})
    return f"<think>plan</think>\n<tool_call>\n{body}\n</tool_call>"


@pytest.fixture(scope="module")
def bench(tmp_path_factory, tp_db):  # noqa: F811
    root = tmp_path_factory.mktemp("tp_himap")
    (root / "database").symlink_to(DATABASE_DIR)
    benchmark = TravelPlannerBenchmark(root)
    benchmark._db = tp_db  # the session's database, loaded once
    return benchmark


def test_days_submitted_by_executors_merge_into_the_human_plans_verdicts(
    bench,
    tp_db,  # noqa: F811
    train_queries,  # noqa: F811
    human_plans,  # noqa: F811
):
    lookup = Lookup(tp_db, strict=False)
    shapes = set()
    for query, plan in list(zip(train_queries, human_plans))[:12]:
        q = normalize_query(query)
        visible = {"id": "q", "query": query["query"], "days": q["days"]}
        domain = bench.himap_domain(visible)
        assert (domain.task()["origin"], domain.task()["days"]) == (q["org"], q["days"])
        days = plan[: q["days"]]
        session = HimapSession(domain)
        session.start()
        goals = []
        for slot, day in zip(domain.slots(), days):
            city = from_to(day["current_city"])[1] or day["current_city"]
            goal = {"day": slot.day, "city": city, "budget": 0, "day_type": slot.day_type}
            goals.append({**goal, "accommodation": day["accommodation"]})
        shapes.add(tuple(g["day_type"] for g in goals))
        adv = session.turn(COORDINATOR, _call("distribute_task", subgoals=goals))
        assert adv.errors == [False] and len(adv.start) == q["days"]
        executor = adv.start[0].prompt.messages[-1]["content"]
        assert query["query"] not in executor  # context isolation: the sub-goal, not the request
        for start, day in zip(adv.start, days):
            adv = session.turn(start.name, _call("submit_day", **{f: day.get(f, "-") for f in PLAN_FIELDS}))
            assert adv.errors == [False]
        assert adv.finished and session.round == 1 and len(session.accepted) == q["days"]
        merged = json.loads(adv.answer)
        assert session.sigma.spent == pytest.approx(hard.total_cost(q, merged, lookup), abs=1e-9)
        verdicts = [evaluate(query, p, tp_db, "official").to_dict() for p in (merged, plan)]
        assert verdicts[0] == verdicts[1]
    assert ("departure", "stay", "travel", "stay", "return") in shapes  # a multi-city trip was among them


def test_scripted_himap_expert_solves_the_training_queries_like_the_single_expert(bench, tp_db):  # noqa: F811
    from sandbox.benchmarks.travelplanner.expert import TravelPlannerExpert
    from sandbox.benchmarks.travelplanner.tools import TravelPlannerWorld
    from sandbox.benchmarks.travelplanner.training import load_training
    from sandbox.himap.scripted import solve
    from tests.tp_harness import DATA_DIR

    single = TravelPlannerExpert(TravelPlannerWorld(tp_db))
    passed = {"single": 0, "himap": 0}
    rounds = []
    for example in load_training(DATA_DIR):
        truth = {"query": example.query, "cities": example.reference_cities}
        visible = {"id": str(example.index), "query": example.query["query"], "days": example.query["days"]}
        run = solve(bench, visible, truth)
        alone = single.solve(visible, truth)
        passed["single"] += evaluate(example.query, alone.plan, tp_db).final_pass
        passed["himap"] += evaluate(example.query, json.loads(run.answer), tp_db).final_pass
        rounds.append(run.figures.rounds)
        for trace in run.traces:
            if trace["role"] == "executor":
                assert example.query["query"] not in trace["messages"][1]["content"]
    assert passed["himap"] >= passed["single"] == len(rounds)
    assert sum(rounds) / len(rounds) < 1.5


def test_when_every_round_is_rejected_the_coordinators_submit_plan_delivers_the_plan(
    bench,
    tp_db,  # noqa: F811
    train_queries,  # noqa: F811
    human_plans,  # noqa: F811
):
    for query, plan in list(zip(train_queries, human_plans))[:3]:
        q = normalize_query(query)
        days = plan[: q["days"]]
        session = HimapSession(bench.himap_domain({"id": "q", "query": query["query"], "days": q["days"]}))
        session.start()
        goals = [{"day": s.day, "budget": 0} for s in session.domain.slots()]
        for _ in range(3):
            adv = session.turn(COORDINATOR, _call("distribute_task", subgoals=goals))
            for start in adv.start:
                adv = session.turn(start.name, _call("reject_subgoal", reason="no", code="other"))
        report = json.loads(adv.reply[0][1].responses[-1].text)
        assert report["fallback"] and report["open_days"] == list(range(1, q["days"] + 1))
        fields = [{"day": d, **{f: day.get(f, "-") for f in PLAN_FIELDS}} for d, day in enumerate(days, 1)]
        adv = session.turn(COORDINATOR, _call("submit_plan", days=fields[:-1]))  # a day missing
        assert adv.errors == [True] and not adv.finished
        adv = session.turn(COORDINATOR, _call("submit_plan", days=fields))
        assert adv.errors == [False] and adv.finished and session.figures().fallback_days == q["days"]
        verdicts = [evaluate(query, p, tp_db, "official").to_dict() for p in (json.loads(adv.answer), plan)]
        assert verdicts[0] == verdicts[1]


def test_a_compact_distribution_is_completed_from_the_other_days(bench, train_queries):  # noqa: F811
    query = next(q for q in train_queries if normalize_query(q)["days"] == 7)
    org = normalize_query(query)["org"]
    domain = bench.himap_domain({"id": "q", "query": query["query"], "days": 7})
    session = HimapSession(domain, HimapOptions.ablation("no_sigma"))  # no Σ: an empty day is accepted
    session.start()
    goals = [{"day": d, "budget": 0} for d in range(1, 8)]
    for d, city in ((2, "A"), (4, "B"), (6, "C")):
        goals[d - 1].update(city=city, accommodation=f"Stay {city}, {city}")
    adv = session.turn(COORDINATOR, _call("distribute_task", subgoals=goals))
    assert adv.errors == [False]
    expected = {  # day -> (city, route, accommodation), written out by hand
        1: ("A", f"from {org} to A", "Stay A, A"),
        2: ("A", None, "Stay A, A"),
        3: ("B", "from A to B", "Stay B, B"),
        4: ("B", None, "Stay B, B"),
        5: ("C", "from B to C", "Stay C, C"),
        6: ("C", None, "Stay C, C"),
        7: (org, f"from C to {org}", None),
    }
    got = {d: (g.city, g.extra.get("route"), g.extra.get("accommodation")) for d, g in session.goals.items()}
    assert got == expected
    for start in adv.start:  # day 3 refuses; the others hand in an empty day
        call = (
            ("reject_subgoal", {"reason": "no"}) if start.day == 3 else ("submit_day", {"current_city": "x"})
        )
        adv = session.turn(start.name, _call(call[0], **call[1]))
        assert adv.errors == [False]
    adv = session.turn(COORDINATOR, _call("distribute_task", subgoals=[{"day": 3, "budget": 0}]))
    assert adv.errors == [False] and session.round == 2
    assert (session.goals[3].city, session.goals[3].extra["route"]) == ("B", "from A to B")  # from round 1


def test_a_subgoal_for_a_day_outside_the_trip_is_an_error_naming_the_days(bench, train_queries):  # noqa: F811
    query = next(q for q in train_queries if normalize_query(q)["days"] == 3)
    session = HimapSession(bench.himap_domain({"id": "q", "query": query["query"], "days": 3}))
    session.start()
    for bad in (99, 0, -1):
        goals = [{"day": d, "budget": 0} for d in (1, 2)] + [{"day": bad, "budget": 0}]
        adv = session.turn(COORDINATOR, _call("distribute_task", subgoals=goals))
        assert adv.errors == [True] and session.round == 0
        assert f"day {bad} is not a day of the trip; the days are [1, 2, 3]" in adv.reply[0][1].rendered
