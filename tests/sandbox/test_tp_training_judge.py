"""Training judges TravelPlanner strictly: no invalid plan keeps the expert's reward.

The official harness's lenient verdicts pay the expert's full reward for plans that replace their
flights with "Teleport from A to B", invent their last attraction, name a meal or hotel by a few
letters of a real name, leave a stay day's meals null, or eat twice at one restaurant spelt with an
extra space. Each mutation of the expert's training plans must earn less than the plan itself under
the judge the training config selects by default; the official mode (for published numbers) is
shown to pay for them, so the mutations are real tests of the difference.
"""

from __future__ import annotations

import copy
import re

import pytest

from b2tjax.config import TrainConfig
from sandbox.benchmarks import benchmark_class
from sandbox.benchmarks.travelplanner import evaluate
from sandbox.benchmarks.travelplanner.reward import compute_reward, shaped_like_trip
from tests.tp_fixtures import human_plans, tp_db, train_queries  # noqa: F401 - fixtures

MEALS = ("breakfast", "lunch", "dinner")


def _items(plan, keys):
    return [
        (day, key) for day in plan if day for key in keys if isinstance(day.get(key), str) and "," in day[key]
    ]


def teleport(plan):
    for day in plan:
        text = day.get("transportation") if day else None
        if isinstance(text, str) and "flight" in text.lower():
            route = re.search(r"from (.+?) to ([^,]+)", text)
            day["transportation"] = f"Teleport from {route.group(1)} to {route.group(2)}"
    return plan


def invent_last_attraction(plan):
    for day, key in _items(plan, ("attraction",)):
        city = day[key].split(";")[0].rsplit(",", 1)[1].strip()
        day[key] = day[key].rstrip().rstrip(";") + f";Skyline Wonder Park, {city}"  # no trailing ";"
    return plan


def fragment(plan):
    for day, key in _items(plan, (*MEALS, "accommodation")):
        name, city = day[key].rsplit(",", 1)
        day[key] = f"{name.strip()[:4]},{city}"
    return plan


def null_meals(plan):
    for day in plan:
        if day and " from " not in f" {day.get('current_city', '')}":
            day.update(dict.fromkeys(MEALS))
    return plan


def duplicate_with_a_space(plan):
    (first_day, first), *rest = _items(plan, MEALS)
    for day, key in rest:
        if day[key] != first_day[first]:
            name, city = first_day[first].rsplit(",", 1)
            day[key] = f"{name} ,{city}"
            break
    return plan


MUTATIONS = [teleport, invent_last_attraction, fragment, null_meals, duplicate_with_a_space]


def _paid(query, plan, db, mode) -> float:
    return compute_reward(
        evaluate(query, plan, db, mode=mode), shaped_like_trip(plan, query["days"]), False
    ).total


@pytest.mark.parametrize("mutate", MUTATIONS, ids=lambda f: f.__name__)
def test_no_invalid_mutation_keeps_the_experts_reward_in_training(train_queries, human_plans, tp_db, mutate):
    training = benchmark_class("travelplanner").judge_options(TrainConfig().judge)["mode"]
    assert training == "strict"
    kept, official_kept, mutated = [], 0, 0
    for index, (query, plan) in enumerate(zip(train_queries[:30], human_plans[:30])):
        bad = mutate(copy.deepcopy(plan))
        if bad == plan:
            continue  # e.g. no flight to teleport
        mutated += 1
        if _paid(query, bad, tp_db, training) >= _paid(query, plan, tp_db, training):
            kept.append(index)
        official_kept += _paid(query, bad, tp_db, "official") >= _paid(query, plan, tp_db, "official")
    assert mutated >= 10 and not kept, (mutated, kept)
    assert official_kept > 0  # the lenient mode pays for it: what training must not use
