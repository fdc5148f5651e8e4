"""Reward = P_action + R_format * (R_C + R_UPC), with its ablation switches, on real verdicts."""

from __future__ import annotations

import copy
import json

import pytest

from sandbox.benchmarks.b2t.evaluator import evaluate_plan
from sandbox.benchmarks.b2t.evaluator.example import (
    GROUND_TRUTH,
    INSTANCE,
    find,
    route_plan,
    valid_plan,
)
from sandbox.benchmarks.b2t.reward import compute_reward
from tests.sandbox_fixtures import mini_world as world  # noqa: F401 (a fixture)


def score(plan, world):
    answer = plan if isinstance(plan, str) else json.dumps(plan)
    return evaluate_plan(answer, INSTANCE, GROUND_TRUTH, world)


def test_perfect_plan(world):
    result = score(valid_plan(), world)
    assert compute_reward(result, False).to_dict() == {
        "total": 2.0,
        "p_action": 0.0,
        "r_format": 1.0,
        "r_c": 1.0,
        "r_upc": 1.0,
    }
    assert compute_reward(result, True).total == 1.0
    assert compute_reward(result, True, action_penalty=False).total == 2.0


def test_partial_plan_components(world):
    plan = valid_plan()
    # An invented restaurant fails C: POI authenticity, business hours and its two trips, and UPC:
    # cuisine, price level, dining environment and budget (none can be verified without it).
    find(plan, 2, "Teahouse Garden")["name"] = "Imaginary Noodle House"
    plan[1]["weather"]["condition"] = "Snowy"  # C: weather
    plan[0]["activities"][0]["seat_class"] = "First Class Seat"  # UPC: seat class
    plan[0]["activities"][0]["price"] = 2600
    result = score(route_plan(plan), world)
    reward = compute_reward(result, True)
    assert (reward.r_format, reward.r_c, reward.r_upc) == (1.0, 18 / 22, 5 / 10)
    assert reward.p_action == -1.0
    assert reward.total == pytest.approx(-1.0 + 18 / 22 + 5 / 10)


def test_format_gate_and_its_ablation(world):
    plan = valid_plan()
    plan[1]["date"] = "2026-06-02"  # readable, but not the trip's dates: R_format = 0
    result = score(plan, world)
    gated = compute_reward(result, False)
    assert (gated.total, gated.r_format, gated.r_c, gated.r_upc) == (0.0, 0.0, 0.0, 0.0)
    ungated = compute_reward(result, False, format_gate=False)
    assert ungated.r_format == 0.0 and ungated.r_c == 21 / 22 and ungated.r_upc == 1.0
    assert ungated.total == pytest.approx(21 / 22 + 1.0)
    both_off = compute_reward(result, True, action_penalty=False, format_gate=False)
    assert both_off.total == pytest.approx(21 / 22 + 1.0)


def test_unreadable_answer_and_no_answer(world):
    result = score("I could not finish the plan.", world)
    assert compute_reward(result, True).total == -1.0
    assert compute_reward(result, False, format_gate=False).total == 0.0
    assert compute_reward(None, True).to_dict() == {
        "total": -1.0,
        "p_action": -1.0,
        "r_format": 0.0,
        "r_c": 0.0,
        "r_upc": 0.0,
    }
    assert compute_reward(None, True, action_penalty=False).total == 0.0


def test_reward_is_exported_by_the_b2t_package(world):
    from sandbox.benchmarks import b2t

    assert b2t.compute_reward is compute_reward
    assert b2t.evaluate_plan(
        json.dumps(valid_plan()), INSTANCE, copy.deepcopy(GROUND_TRUTH), world
    ).all_passed
