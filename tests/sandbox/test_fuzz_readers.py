"""Seeded, time-bounded fuzzing of everything that reads model or user text.

Over the turn parser, strict JSON, both plan readers, the episode environment and Σ: no exception
escapes; an input grown 4x takes at most ~4x (a generous 10x bound: quadratic would be 16x, and a
busy 2-core machine must not make it flake); and no plan with an invented place earns the credit
of an honest plan that misses one preference.
"""

from __future__ import annotations

import copy
import json
import random
import time

import pytest

from sandbox.benchmarks.b2t.evaluator import evaluate_plan
from sandbox.benchmarks.b2t.evaluator.example import GROUND_TRUTH, INSTANCE, valid_plan
from sandbox.benchmarks.b2t.himap.pricing import b2t_state
from sandbox.benchmarks.b2t.plan import read_plan
from sandbox.benchmarks.b2t.reward import compute_reward
from sandbox.benchmarks.travelplanner.plan_reader import read_plan as tp_read_plan
from sandbox.himap.state import SigmaCode
from sandbox.parser import parse_turn
from sandbox.strict_json import StrictJSONError, loads_strict
from tests.cpu_clock import cpu_seconds
from tests.sandbox_fixtures import mini_world as world  # noqa: F401 (a fixture)

SEED = 27
BUDGET_S = 10.0  # wall-clock budget of each fuzz loop; each loop's floor of cases keeps a slow run meaningful

# Fragments that once broke a reader, and ordinary ones, to be glued together at random.
FRAGMENTS = [
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<memory>",
    "</memory>",
    "<answer>",
    "</answer>",
    "<x",
    "</",
    ">",
    "```",
    "```json\n",
    "Day 1:\n",
    "Day 99999999999:",
    "**Breakfast**: ",
    "Current City: from A to B\n",
    "{",
    "}",
    "[",
    "]",
    '"',
    ":",
    ",",
    " " * 50,
    "\n",
    "\t",
    "*",
    "#",
    "-",
    "9" * 80,
    "1e999",
    "NaN",
    "-Infinity",
    "\\ud800",
    "\ud800",
    "\u0430",
    "null",
    "true",
    '{"name": "WeatherSearch", "arguments": {"city": "Chengdu"}}',
    '{"action": "write", "key": "k", "value": [1, 2]}',
    '[{"day": 1, "activities": []}]',
]


def _fragment_text(rng: random.Random, pieces: int) -> str:
    return "".join(rng.choice(FRAGMENTS) for _ in range(pieces))


def _all_readers(text: str) -> None:
    parse_turn(text)
    read_plan(text)
    tp_read_plan(text)
    try:
        loads_strict(text)
    except StrictJSONError:
        pass


@pytest.mark.slow
def test_no_exception_escapes_any_reader():
    rng = random.Random(SEED)
    deadline, cases = time.monotonic() + BUDGET_S, 0
    while time.monotonic() < deadline and cases < 20000:
        _all_readers(_fragment_text(rng, rng.randint(1, 60)))
        cases += 1
    assert cases >= 200, cases  # even a slow machine gets through a meaningful number


@pytest.mark.slow
def test_every_reader_is_linear_in_its_input():
    rng = random.Random(SEED + 1)
    deadline = time.monotonic() + BUDGET_S
    worst: tuple[float, str] = (0.0, "")
    for _ in range(40):
        if time.monotonic() > deadline:
            break
        unit = _fragment_text(rng, rng.randint(1, 8))
        for fn in (parse_turn, read_plan, tp_read_plan):
            small = unit * max(1, 4000 // len(unit))
            large = small * 4
            t_small = min(cpu_seconds(fn, small) for _ in range(2))
            t_large = min(cpu_seconds(fn, large) for _ in range(2))
            ratio = t_large / max(t_small, 2e-3)  # below 2 ms the timer and the noise dominate
            worst = max(worst, (ratio, f"{fn.__module__}.{fn.__name__} on {unit[:40]!r}"))
            assert t_large < 1.0, (fn.__name__, unit[:60], t_large)
    assert worst[0] < 10, worst


def _random_name(rng: random.Random) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJ\u0430\u0435-'"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 24))).strip() or "x"


def test_no_invented_place_earns_credit(world):
    rng = random.Random(SEED + 2)
    deadline, cases = time.monotonic() + BUDGET_S / 2, 0
    honest_missing_one = (
        1.9  # an honest plan that misses exactly one preference (tests/sandbox/test_invented_places.py)
    )
    while time.monotonic() < deadline and cases < 300:
        plan = valid_plan()
        places = [a for day in plan for a in day["activities"] if a["type"] != "intercity_transport"]
        for act in rng.sample(places, rng.randint(1, len(places))):
            act["name"] = _random_name(rng)
            if rng.random() < 0.5:
                act["price"] = rng.choice([0, 1, 1e-9])
        result = evaluate_plan(json.dumps(plan), INSTANCE, GROUND_TRUTH, world)
        assert not result["poi_authenticity"].passed
        assert compute_reward(result, False).total < honest_missing_one, [r.name for r in result.failed]
        cases += 1
    assert cases >= 20


def test_sigma_refuses_what_it_cannot_verify_and_never_breaks_its_budget(world):
    rng = random.Random(SEED + 3)
    state = b2t_state(world, INSTANCE, GROUND_TRUTH)
    days = valid_plan()
    pool = [dict(a) for day in days for a in day["activities"]]
    deadline, cases = time.monotonic() + BUDGET_S / 2, 0
    while time.monotonic() < deadline and cases < 2000:
        day = rng.choice([1, 2, 3, 0, -1, 10**30])
        items = []
        for _ in range(rng.randint(0, 4)):
            item = copy.deepcopy(rng.choice(pool))
            mutation = rng.random()
            if mutation < 0.2:
                item["price"] = rng.choice([float("nan"), float("inf"), -1, 10**40, "12e999"])
            elif mutation < 0.35:
                item["day"] = rng.choice([1, 2, 3, "1", None, float("nan")])
            elif mutation < 0.5:
                item["name"] = _random_name(rng)
            items.append(item)
        if rng.random() < 0.1:
            items = items * 9  # the same item nine times
        op = state.commit if rng.random() < 0.7 else state.check
        verdict = op(day, items)
        if verdict.ok:
            assert all(i.get("day", day) == day for i in items)  # only for the executor's own day
        if rng.random() < 0.05:
            state.release(rng.choice([1, 2, 3]))
        assert state.spent <= state.budget + 1e-6 and state.spent == state.spent  # finite, in budget
        for d in state.days():
            keys = [
                json.dumps({k: v for k, v in e.items() if k != "day"}, sort_keys=True)
                for e in state.committed(d)
            ]
            assert len(keys) == len(set(keys)), f"day {d} holds an item twice"
        cases += 1
    assert cases >= 100
    assert {e.code for e in state.events} >= {SigmaCode.OK, SigmaCode.BAD_ITEM}
