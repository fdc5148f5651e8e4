"""Each TravelPlanner check broken alone by a hand-made edit of a human training plan.

Every human plan passes all 13 checks, so an edit that breaks exactly one rule must fail exactly
that check (a sandbox or completeness failure closes the gate: no hard verdicts at all). The
"exactly as the harness does" behaviours of the spec get their own cases, with the strict-mode
verdict beside the official one.
"""

import copy
from typing import Any

import pytest

from sandbox.benchmarks.travelplanner import Database, evaluate
from sandbox.benchmarks.travelplanner.database import Route
from tests.tp_fixtures import human_plans, tp_db, train_queries  # noqa: F401 - fixtures
from tests.tp_harness import HarnessRaised, tp_harness  # noqa: F401 - fixture


def failed(result: Any) -> set[str]:
    names = {k for k, v in result.commonsense.items() if v is False}
    names |= {k for k, v in (result.hard or {}).items() if v is False}
    return names | ({"GATE"} if result.hard is None else set())


@pytest.fixture()
def case(train_queries, human_plans):
    """case(i) -> (query, plan) deep copies of training example i."""
    return lambda i: (copy.deepcopy(train_queries[i]), copy.deepcopy(human_plans[i]))


def _replace_stay(plan: list, old: str, new: str) -> None:
    for day in plan:
        if day and day["accommodation"] == old:
            day["accommodation"] = new


# ---------------------------------------------------------------- commonsense, one at a time
def test_unknown_restaurant_fails_sandbox_and_closes_the_gate(case, tp_db):
    query, plan = case(0)
    plan[0]["dinner"] = "No Such Diner, Rockford"
    assert failed(evaluate(query, plan, tp_db)) == {"is_valid_information_in_sandbox", "GATE"}


def test_meal_outside_both_cities_of_a_travel_day_fails_current_city(case, tp_db):
    query, plan = case(0)
    name = tp_db.restaurants("Chicago")[0]["Name"]
    plan[0]["dinner"] = f"{name}, Chicago"
    assert failed(evaluate(query, plan, tp_db)) == {"is_valid_information_in_current_city"}


def test_city_coming_back_fails_the_route_only(case, tp_db):
    # Atlanta -> Bemidji -> Minneapolis -> Atlanta; day 4 says Bemidji again: Minneapolis becomes a
    # one-day stop and Bemidji comes back. Day 4's Minneapolis items still pass check 2 because the
    # harness tests the CHARACTERS of "Bemidji" (exactly as it does).
    query, plan = case(35)
    plan[3]["current_city"] = "Bemidji(Minnesota)"
    assert failed(evaluate(query, plan, tp_db)) == {"is_reasonable_visiting_city"}
    assert "is_valid_information_in_current_city" in failed(evaluate(query, plan, tp_db, mode="strict"))


def test_repeated_restaurant_fails_diverse_restaurants(case, tp_db):
    query, plan = case(0)
    plan[1]["lunch"] = plan[0]["dinner"]
    assert failed(evaluate(query, plan, tp_db)) == {"is_valid_restaurants"}


def test_repeated_attraction_fails_diverse_attractions(case, tp_db):
    query, plan = case(0)
    plan[2]["attraction"] += "Burpee Museum of Natural History, Rockford;"
    assert failed(evaluate(query, plan, tp_db)) == {"is_valid_attractions"}


def test_lowercase_flight_beside_self_driving_fails_transportation_only(case, tp_db):
    # "flight" without "Flight Number: " is never looked up (sandbox passes, costs nothing) but
    # counts as a flight for the conflict check - exactly as the harness does. Strict: not in sandbox.
    query, plan = case(7)
    plan[2]["transportation"] = "flight, from Abilene(Texas) to Amarillo(Texas)"
    assert failed(evaluate(query, plan, tp_db)) == {"is_valid_transportation"}
    assert failed(evaluate(query, plan, tp_db, mode="strict")) >= {"is_valid_information_in_sandbox", "GATE"}


def test_short_stay_fails_minimum_nights(case, tp_db):
    query, plan = case(0)
    stay = next(
        r
        for r in tp_db.accommodations("Rockford")
        if r["minimum nights"] > 2
        and len(tp_db.find_places("accommodations", r["NAME"].strip(), "Rockford")) == 1
        and r["price"] <= 300
    )
    _replace_stay(plan, plan[0]["accommodation"], f"{stay['NAME'].strip()}, Rockford")
    assert failed(evaluate(query, plan, tp_db)) == {"is_valid_accommodation"}


def test_missing_breakfast_on_a_stay_day_fails_completeness_and_closes_the_gate(case, tp_db):
    query, plan = case(0)
    plan[1]["breakfast"] = "-"
    assert failed(evaluate(query, plan, tp_db)) == {"is_not_absent", "GATE"}


# ---------------------------------------------------------------- hard checks, one at a time
def test_dearer_stay_fails_budget(case, tp_db):
    query, plan = case(16)
    _replace_stay(plan, plan[0]["accommodation"], "Sunny, Friendly, Brooklyn Apartment, Atlanta")
    assert failed(evaluate(query, plan, tp_db)) == {"valid_cost"}


def test_no_parties_stay_fails_room_rule(case, tp_db):
    query, plan = case(21)  # smoking must be allowed
    _replace_stay(plan, plan[0]["accommodation"], "Luxury apartment in Williamsburg, New Orleans")
    assert failed(evaluate(query, plan, tp_db)) == {"valid_room_rule"}


def test_entire_home_fails_private_room_type(case, tp_db):
    query, plan = case(24)
    _replace_stay(
        plan, plan[0]["accommodation"], "Light-filled Apartment in great area, close 2 all!, Minneapolis"
    )
    assert failed(evaluate(query, plan, tp_db)) == {"valid_room_type"}


def test_org_breakfast_hides_the_days_other_meals_from_the_cuisine_check(case, tp_db):
    # Day 2's lunch and dinner are the only Chinese and French meals. A breakfast in `org` makes the
    # harness stop looking at day 2, so cuisine fails (exactly as it does); strict still counts them.
    query, plan = case(30)
    cheap = min(tp_db.restaurants("Houston"), key=lambda r: r["Average Cost"])
    plan[1]["breakfast"] = f"{cheap['Name']}, Houston"
    assert failed(evaluate(query, plan, tp_db)) == {"valid_cuisine"}
    assert evaluate(query, plan, tp_db, mode="strict").hard["valid_cuisine"] is True


def test_self_driving_fails_no_self_driving(case, tp_db):
    query, plan = case(35)
    for day in plan:
        if day and day["transportation"].startswith("Taxi"):
            day["transportation"] = day["transportation"].replace("Taxi", "Self-driving")
    assert failed(evaluate(query, plan, tp_db)) == {"valid_transportation"}


# ---------------------------------------------------------------- exactly as the harness does
def test_stay_day_items_pass_on_any_character_of_the_city(case, tp_db):
    query, plan = case(0)
    name = tp_db.restaurants("Chicago")[0]["Name"]
    plan[1]["lunch"] = f"{name}, Chicago"  # shares a letter with "Rockford"
    assert failed(evaluate(query, plan, tp_db)) == set()
    assert "is_valid_information_in_current_city" in failed(evaluate(query, plan, tp_db, mode="strict"))


def test_attraction_without_trailing_semicolon_is_never_checked(case, tp_db):
    query, plan = case(0)
    plan[1]["attraction"] += "Imaginary Tower, Rockford"
    assert failed(evaluate(query, plan, tp_db)) == set()
    assert "is_valid_information_in_sandbox" in failed(evaluate(query, plan, tp_db, mode="strict"))


def test_first_distance_row_decides(tp_db):
    rows = {}
    for route in _all_routes():
        rows.setdefault((route.origin, route.destination), []).append(route)
    pair, routes = next((k, v) for k, v in rows.items() if len({r.distance for r in v}) > 1 and v[0].drivable)
    assert tp_db.route(*pair) == routes[0]
    km = float(routes[0].distance.replace("km", "").replace(",", ""))
    assert tp_db.drive_cost(*pair, "self-driving") == int(km * 0.05)
    assert tp_db.drive_cost(*pair, "taxi") == int(km)


def _all_routes() -> list[Route]:
    import csv

    from tests.tp_harness import DATABASE_DIR

    with (DATABASE_DIR / "distance.csv").open(encoding="utf-8", newline="") as handle:
        return [
            Route(r["origin"], r["destination"], r["duration"], r["distance"]) for r in csv.DictReader(handle)
        ]


def test_completeness_counts_every_key_but_not_none(tp_db):
    # 3 days: at least 9 of 18 values. Counted per day: every key whose value is given, `days`,
    # `current_city` and extra keys included; a None meal passes the per-day test but is not counted.
    query = {
        "org": "St. Petersburg",
        "dest": "Rockford",
        "days": 3,
        "visiting_city_number": 1,
        "people_number": 1,
        "budget": 5000,
        "local_constraint": {},
    }
    stay = "Pure luxury one bdrm + sofa bed on Central Park, Rockford"
    travel = {"transportation": "flight", "breakfast": "-", "lunch": "-", "dinner": "-", "attraction": "-"}
    plan = [
        {"days": 1, "current_city": "from St. Petersburg to Rockford", **travel, "accommodation": stay},
        {
            "days": 2,
            "current_city": "Rockford",
            "transportation": "-",
            "breakfast": "Subway, Rockford",
            "lunch": None,
            "dinner": None,
            "attraction": None,
            "accommodation": stay,
        },
        {"days": 3, "current_city": "from Rockford to St. Petersburg", **travel, "accommodation": "-"},
    ]
    assert evaluate(query, plan, tp_db).commonsense["is_not_absent"] is True  # 4 + 4 + 3 = 11
    for day in plan:
        day.pop("days")
    assert evaluate(query, plan, tp_db).commonsense["is_not_absent"] is False  # 8
    plan[1]["note"] = "quiet room"
    assert evaluate(query, plan, tp_db).commonsense["is_not_absent"] is True  # 9 with the extra key
    assert evaluate(query, plan, tp_db, mode="strict").commonsense["is_not_absent"] is False


def test_three_day_trip_never_checks_the_destination(case, tp_db):
    query, plan = case(0)
    query["dest"] = "Chicago"
    assert failed(evaluate(query, plan, tp_db)) == set()
    assert "is_reasonable_visiting_city" in failed(evaluate(query, plan, tp_db, mode="strict"))


def test_last_day_accommodation_is_charged(case, tp_db):
    query, plan = case(0)
    home = min(tp_db.accommodations("St. Petersburg"), key=lambda r: r["price"])
    plan[2]["accommodation"] = f"{home['NAME'].strip()}, St. Petersburg"
    query["budget"] = 1608 + home["price"] - 1  # the human plan costs 1,608
    assert failed(evaluate(query, plan, tp_db)) == {"valid_cost"}
    assert failed(evaluate(query, plan, tp_db, mode="strict")) == set()


def test_bare_taxi_takes_its_route_from_current_city(case, tp_db):
    query, plan = case(35)
    plan[2]["transportation"] = "Taxi"  # Bemidji -> Minneapolis, from current_city
    result = evaluate(query, plan, tp_db)
    assert result.commonsense["is_valid_information_in_sandbox"] is True
    assert "is_valid_information_in_current_city" in failed(result)  # the city names are not in "Taxi"


@pytest.mark.parametrize(
    "edit",
    [
        lambda p: p[0].__setitem__(
            "transportation", p[0]["transportation"].replace("Flight Number: ", "flight number: ")
        ),
        lambda p: p[1].__setitem__("current_city", "from Rockford"),
        lambda p: p[0].pop("transportation"),
        lambda p: p.__setitem__(1, None),
        lambda p: [day.__setitem__("accommodation", None) for day in p[:2]],
    ],
)
def test_where_the_harness_raises_the_check_fails_and_is_flagged(case, tp_db, tp_harness, edit):
    query, plan = case(0)
    edit(plan)
    with pytest.raises(HarnessRaised):
        tp_harness.verdicts(copy.deepcopy(query), copy.deepcopy(plan))
    result = evaluate(query, plan, tp_db)
    assert result.official_raises and not result.final_pass
    strict = evaluate(query, plan, tp_db, mode="strict")
    assert not strict.official_raises and not strict.final_pass


def test_undelivered_and_unreadable_inputs_never_raise(case, tp_db):
    query, plan = case(0)
    for bad_plan in (None, [], "a plan", {"days": 1}):
        result = evaluate(query, bad_plan, tp_db)
        assert not result.final_pass and result.hard is None
    assert evaluate({"org": "X"}, plan, tp_db).error.startswith("query:")
    assert evaluate(query, plan, Database()).final_pass is False  # empty database: nothing exists


def test_structured_examples_pass_all_13_checks(tp_db):
    from sandbox.benchmarks.travelplanner.loader import read_structured
    from tests.tp_harness import DATA_DIR

    files = sorted((DATA_DIR / "structured").glob("plan_*.json"))
    assert len(files) == 9
    for file in files:
        query, plan = read_structured(file)
        result = evaluate(query, plan, tp_db)
        assert result.final_pass, file.name
        assert (
            sum(v is not None for v in result.hard.values())
            == 1 + {"easy": 0, "medium": 1, "hard": 3}[query["level"]]
        )


# ---------------------------------------------------------------- strict-only fixes
def test_strict_needs_exact_names(case, tp_db):
    query, plan = case(0)
    plan[0]["dinner"] = "Coco, Rockford"  # contained in "Coco Bambu"
    assert evaluate(query, plan, tp_db).commonsense["is_valid_information_in_sandbox"] is True
    assert evaluate(query, plan, tp_db, mode="strict").commonsense["is_valid_information_in_sandbox"] is False


def test_minimum_nights_with_several_matching_rows_only_in_strict(case, tp_db):
    query, plan = case(0)
    matches = tp_db.find_places("accommodations", "Park", "Rockford")
    assert len(matches) >= 2 and matches[0]["minimum nights"] > 2  # two nights in the plan
    _replace_stay(plan, plan[0]["accommodation"], "Park, Rockford")
    assert evaluate(query, plan, tp_db).commonsense["is_valid_accommodation"] is True
    strict = evaluate(query, plan, tp_db, mode="strict")
    # strict: "Park" is no exact name, so it is not in the sandbox, and its minimum nights cannot be
    # verified: not met (no check passes on a place it cannot find)
    assert strict.commonsense["is_valid_accommodation"] is False
    assert strict.commonsense["is_valid_information_in_sandbox"] is False
    exact = matches[0]["NAME"].strip()
    _replace_stay(plan, "Park, Rockford", f"{exact}, Rockford")
    assert "is_valid_accommodation" in failed(evaluate(query, plan, tp_db, mode="strict"))


def test_state_suffix_breaks_the_official_route_but_not_the_strict_one(case, tp_db):
    query, plan = case(0)
    plan[1]["current_city"] = "Rockford (Illinois)"  # officially "Rockford " (space kept)
    assert failed(evaluate(query, plan, tp_db)) == {"is_reasonable_visiting_city", "is_not_absent", "GATE"}
    assert failed(evaluate(query, plan, tp_db, mode="strict")) == set()


def test_strict_mode_catches_a_wrong_city_in_a_human_plan(train_queries, human_plans, tp_db):
    # Human plan 41 lists San Angelo and Houston attractions on San Antonio stay days; officially they
    # pass (the letters of "San Antonio" occur in them). Every other human plan passes strict mode.
    failing = [
        i
        for i, (q, p) in enumerate(zip(train_queries, human_plans))
        if not evaluate(q, p, tp_db, mode="strict").final_pass
    ]
    assert failing == [41]
    assert failed(evaluate(train_queries[41], human_plans[41], tp_db, mode="strict")) == {
        "is_valid_information_in_current_city"
    }
