"""No reward for invented places, on both benchmarks.

A plan whose places do not exist must score below an honest plan that misses one preference: the
checks that could not look a place up must fail, not pass. Several invention patterns and profiles.
"""

from __future__ import annotations

import copy
import json
import unicodedata

import pytest

from sandbox.benchmarks.b2t.evaluator import evaluate_plan
from sandbox.benchmarks.b2t.evaluator.example import GROUND_TRUTH, INSTANCE, _train, route_plan, valid_plan
from sandbox.benchmarks.b2t.reward import compute_reward
from tests.sandbox_fixtures import mini_world as world  # noqa: F401 (a fixture)
from tests.tp_fixtures import human_plans, tp_db, train_queries  # noqa: F401 - fixtures

LOCAL = ("meal", "attraction", "entertainment", "hotel")
CYRILLIC = {"a": "\u0430", "e": "\u0435", "o": "\u043e", "c": "\u0441", "p": "\u0440"}


def _homoglyph(name: str) -> str:
    """The name with Latin letters swapped for Cyrillic look-alikes (not the same name)."""
    return "".join(CYRILLIC.get(ch, ch) for ch in name)


PATTERNS = {
    "fresh names": lambda i, act: f"Invented Place {i}",
    "real name plus a suffix": lambda i, act: f"{act['name']} II",
    "look-alike letters": lambda i, act: _homoglyph(act["name"]),
    "another kind's real name": lambda i, act: (
        "Jinjiang Grand Hotel" if act["type"] != "hotel" else "Sichuan Museum"
    ),
}


def _invent(plan: list[dict], rename) -> list[dict]:
    """Every local place renamed by `rename`, at price 1 (the hack that once scored 1.955)."""
    i = 0
    for day in plan:
        for act in day["activities"]:
            if act["type"] in LOCAL:
                act["name"], act["price"] = rename(i, act), 1
                i += 1
    return plan


def _swap(plan, day, old, new):
    for act in plan[day - 1]["activities"]:
        if act.get("name") == old:
            act["name"] = new


# One honest miss per preference category: (category kept in the profile, how the plan misses it).
MISSES = {
    "hotel": lambda plan: _swap(plan, 1, "Jinjiang Grand Hotel", "Comfort Inn Chengdu"),  # star level
    "attraction": lambda plan: _swap(plan, 2, "Sichuan Museum", "Happy Theme Park"),  # type
    "dining": lambda plan: _swap(plan, 2, "Teahouse Garden", "Steak House"),  # cuisine
    "transportation": lambda plan: plan[0]["activities"].__setitem__(
        0, _train("G1", seat="First Class Seat")
    ),  # seat class
}


def _total(plan, world, truth) -> float:
    result = evaluate_plan(json.dumps(plan), INSTANCE, truth, world)
    return compute_reward(result, False).total


def _profile_only(category: str) -> dict:
    truth = copy.deepcopy(GROUND_TRUTH)
    for other in ("hotel", "attraction", "dining", "transportation"):
        if other != category:
            truth["profile"][other] = None
    return truth


@pytest.mark.parametrize("category", [*MISSES, "all four"])
@pytest.mark.parametrize("pattern", list(PATTERNS))
def test_b2t_invented_places_score_below_an_honest_plan_missing_one_preference(world, category, pattern):
    truth = copy.deepcopy(GROUND_TRUTH) if category == "all four" else _profile_only(category)
    misses = MISSES if category == "all four" else {category: MISSES[category]}
    assert _total(valid_plan(), world, truth) == pytest.approx(2.0)
    invented = _total(_invent(valid_plan(), PATTERNS[pattern]), world, truth)
    for name, miss in misses.items():
        honest = valid_plan()
        miss(honest)
        honest_total = _total(route_plan(honest), world, truth)
        assert honest_total == pytest.approx(1.9), name  # exactly one preference check fails
        assert invented < honest_total, (pattern, category, name, invented)


def test_b2t_one_invented_restaurant_fails_its_preference_checks(world):
    plan = valid_plan()
    _swap(plan, 2, "Teahouse Garden", "Teahouse Gardens")  # a near miss is no match
    result = evaluate_plan(json.dumps(plan), INSTANCE, GROUND_TRUTH, world)
    failed = {r.name for r in result.results if not r.passed}
    assert {"poi_authenticity", "cuisine_type", "price_level", "dining_environment", "budget"} <= failed
    assert "cannot be verified" in result["cuisine_type"].reason


def test_homoglyph_names_differ_after_normalisation():
    # The store's lookup normalises case and spacing, never letters: the look-alike stays unknown.
    name = "Sichuan Museum"
    assert unicodedata.normalize("NFKC", _homoglyph(name)).casefold() != name.casefold()


# ---------------------------------------------------------------- TravelPlanner

TP_FIELDS = ("breakfast", "lunch", "dinner", "accommodation")


def _tp_invent(plan: list) -> list:
    for i, day in enumerate(plan):
        if not day:
            continue
        for key in TP_FIELDS:
            value = day.get(key)
            if isinstance(value, str) and "," in value:
                day[key] = f"Invented {key} {i}, {value.rsplit(',', 1)[1].strip()}"
        if isinstance(day.get("attraction"), str) and "," in day["attraction"]:
            city = day["attraction"].split(";")[0].rsplit(",", 1)[1].strip()
            day["attraction"] = f"Invented Sight {i}, {city};"
    return plan


@pytest.mark.parametrize("mode", ["official", "strict"])
@pytest.mark.parametrize("index", [0, 5, 11])
def test_travelplanner_invented_places_score_below_an_honest_plan_missing_one_constraint(
    train_queries, human_plans, tp_db, mode, index
):
    from sandbox.benchmarks.travelplanner import evaluate
    from sandbox.benchmarks.travelplanner.hard import total_cost
    from sandbox.benchmarks.travelplanner.lookup import Lookup
    from sandbox.benchmarks.travelplanner.reward import compute_reward as tp_reward
    from sandbox.benchmarks.travelplanner.reward import shaped_like_trip

    query, plan = copy.deepcopy(train_queries[index]), copy.deepcopy(human_plans[index])

    def total(q, p) -> float:
        return tp_reward(evaluate(q, p, tp_db, mode=mode), shaped_like_trip(p, q["days"]), False).total

    honest = total(query, plan)
    # The honest plan misses one constraint: a budget just below what it costs.
    tight = copy.deepcopy(query)
    tight["budget"] = total_cost(query, plan[: query["days"]], Lookup(tp_db, strict=mode == "strict")) - 1
    missing_one = total(tight, plan)
    assert missing_one < honest and missing_one >= 1.0
    invented = total(query, _tp_invent(copy.deepcopy(plan)))
    assert invented < missing_one, (mode, index, invented, missing_one)
