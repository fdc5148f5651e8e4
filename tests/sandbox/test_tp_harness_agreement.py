"""evaluate(mode="official") gives exactly the official harness's verdicts.

Three sets: the 45 human training plans (also checked against a golden table), systematic single
edits of them, and seeded random queries + plans from the database. Where the harness raises,
`official_raises` must be set. Counts are sized for ~40 s on 2 cores (the harness uses pandas).
"""

import copy
import random
from collections.abc import Callable
from typing import Any

import pytest

from sandbox.benchmarks.travelplanner import evaluate
from tests.tp_fixtures import human_plans, tp_db, train_queries  # noqa: F401 - fixtures
from tests.tp_harness import HarnessRaised, tp_harness  # noqa: F401 - fixture
from tests.tp_random_plans import random_plan, random_query

RANDOM_CASES = 400  # the seeded generator reaches 56 raising cases and 76 hard-check ones (bars: 20, 40)

# Hard verdicts of the 45 human plans, in order valid_cost, valid_room_rule, valid_cuisine,
# valid_room_type, valid_transportation ("T" pass, "-" not applicable); every commonsense check passes.
GOLDEN_HARD = (
    ["T----"] * 15
    + [
        "T-T--",
        "TT---",
        "TT---",
        "T--T-",
        "T-T--",
        "T--T-",
        "TT---",
        "T-T--",
        "T-T--",
        "T--T-",
        "TT---",
        "T--T-",
        "T-T--",
        "T--T-",
        "T-T--",
    ]
    + [
        "TTT-T",
        "TT-TT",
        "TT-TT",
        "TTTT-",
        "T-TTT",
        "TT-TT",
        "TTTT-",
        "T-TTT",
        "TT-TT",
        "TTT-T",
        "TTTT-",
        "TT-TT",
        "T-TTT",
        "T-TTT",
        "TTT-T",
    ]
)
HARD_ORDER = ("valid_cost", "valid_room_rule", "valid_cuisine", "valid_room_type", "valid_transportation")


def assert_agrees(harness: Any, query: dict, plan: list, db: Any, label: str) -> None:
    ours = evaluate(query, plan, db, mode="official")
    try:
        official = harness.verdicts(copy.deepcopy(query), copy.deepcopy(plan))
    except HarnessRaised as err:
        assert ours.official_raises, f"{label}: the harness raises ({err}) but official_raises is False"
        return
    assert not ours.official_raises, (
        f"{label}: flagged official_raises ({ours.raised_in}), harness did not raise"
    )
    assert ours.commonsense == official.commonsense, f"{label}: commonsense {plan}"
    assert ours.hard == official.hard, f"{label}: hard {plan}"


def test_human_plans_match_golden_table_and_harness(tp_harness, tp_db, train_queries, human_plans):
    for index, (query, plan) in enumerate(zip(train_queries, human_plans)):
        result = evaluate(query, plan, tp_db)
        assert all(result.commonsense.values()), index
        assert result.hard is not None
        pattern = "".join(
            "-" if result.hard[n] is None else "T" if result.hard[n] else "F" for n in HARD_ORDER
        )
        assert pattern == GOLDEN_HARD[index], index
        assert result.final_pass and not result.official_raises
        assert_agrees(tp_harness, query, plan, tp_db, f"human plan {index}")


# ---------------------------------------------------------------- systematic single edits
Edit = Callable[[dict, list, int, str, Any], None]
ITEM_FIELDS = (
    "transportation",
    "breakfast",
    "attraction",
    "lunch",
    "dinner",
    "accommodation",
    "current_city",
)


def _with_state(value: Any) -> Any:
    if not isinstance(value, str) or "," not in value:
        return value
    return value.replace(";", " (Texas);") if value.endswith(";") else value + " (Texas)"


def _prefix(value: Any) -> Any:
    if not isinstance(value, str) or ", " not in value:
        return value
    name, city = value.split(";")[0].rsplit(", ", 1)
    return f"{name[: max(1, len(name) // 4)]}, {city}"


def _flight_spelling(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if "Flight Number: " in value:
        return value.replace("Flight Number: ", "flight number: ")
    return "Flight, " + value if value not in ("-", "") else "flight"


EDITS: dict[str, Edit] = {
    "dash": lambda q, p, d, f, db: p[d].__setitem__(f, "-"),
    "empty": lambda q, p, d, f, db: p[d].__setitem__(f, ""),
    "none": lambda q, p, d, f, db: p[d].__setitem__(f, None),
    "delete": lambda q, p, d, f, db: p[d].pop(f, None),
    "state_suffix": lambda q, p, d, f, db: p[d].__setitem__(f, _with_state(p[d].get(f))),
    "no_trailing_semicolon": lambda q, p, d, f, db: p[d].__setitem__(
        "attraction", str(p[d].get("attraction")).rstrip(";")
    ),
    "copy_previous_day": lambda q, p, d, f, db: p[d].__setitem__(f, p[d - 1].get(f)),
    "name_prefix": lambda q, p, d, f, db: p[d].__setitem__(f, _prefix(p[d].get(f))),
    "flight_spelling": lambda q, p, d, f, db: p[d].__setitem__(
        "transportation", _flight_spelling(p[d].get("transportation"))
    ),
    "bare_taxi": lambda q, p, d, f, db: p[d].__setitem__("transportation", "Taxi"),
    "org_meal": lambda q, p, d, f, db: p[d].__setitem__(
        "lunch", f"{db.restaurants(q['org'])[0]['Name']}, {q['org']}" if db.restaurants(q["org"]) else "-"
    ),
    "org_stay_last_day": lambda q, p, d, f, db: p[q["days"] - 1].__setitem__(
        "accommodation",
        f"{db.accommodations(q['org'])[0]['NAME']}, {q['org']}" if db.accommodations(q["org"]) else "-",
    ),
    "blank_day": lambda q, p, d, f, db: p.__setitem__(d, {} if d % 2 else None),
    "extra_key": lambda q, p, d, f, db: p[d].__setitem__("note", "book early"),
    "more_people": lambda q, p, d, f, db: q.__setitem__("people_number", q["people_number"] + 3),
    "wrong_org": lambda q, p, d, f, db: q.__setitem__(
        "org", "Atlanta" if q["org"] != "Atlanta" else "Denver"
    ),
}


@pytest.mark.slow  # every single edit of the human plans through both evaluators
def test_single_edits_of_human_plans_agree(tp_harness, tp_db, train_queries, human_plans):
    cases = 0
    for index, (query, plan) in enumerate(zip(train_queries, human_plans)):
        for number, (name, edit) in enumerate(EDITS.items()):
            day = (index + number) % query["days"]
            field = ITEM_FIELDS[(index + 3 * number) % len(ITEM_FIELDS)]
            edited_query, edited_plan = copy.deepcopy(query), copy.deepcopy(plan)
            edit(edited_query, edited_plan, day, field, tp_db)
            assert_agrees(
                tp_harness, edited_query, edited_plan, tp_db, f"plan {index} {name} day {day} {field}"
            )
            cases += 1
    assert cases == 45 * len(EDITS)


@pytest.mark.slow
def test_random_plans_agree(tp_harness, tp_db):
    rng = random.Random(20240213)
    raised = gate_passed = 0
    for case in range(RANDOM_CASES):
        query = random_query(rng, tp_db)
        plan = random_plan(rng, tp_db, query)
        assert_agrees(tp_harness, query, plan, tp_db, f"random case {case}")
        result = evaluate(query, plan, tp_db)
        raised += result.official_raises
        gate_passed += result.hard is not None
    # The generator must reach both the raising corners and the hard checks.
    assert raised > RANDOM_CASES // 20 and gate_passed > RANDOM_CASES // 10
