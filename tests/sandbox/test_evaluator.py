"""The 32-constraint evaluator: a hand-built valid plan passes all; breaking one rule fails one.

The mini world (sandbox/benchmarks/b2t/evaluator/example.py) is a real SQLite store written from
hand-chosen rows,
so every expected verdict below follows from those rows and the documented rules.
"""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandbox.benchmarks.b2t.evaluator import C_NAMES, CONSTRAINT_NAMES, CONSTRAINTS, UPC_NAMES, evaluate_plan
from sandbox.benchmarks.b2t.evaluator.example import (
    GROUND_TRUTH,
    INSTANCE,
    _train,
    find,
    route_plan,
    valid_plan,
    visit,
)
from sandbox.benchmarks.b2t.evaluator.lookup import index_for
from sandbox.benchmarks.b2t.tools.registry import B2TTools
from tests.sandbox_fixtures import mini_world as world  # noqa: F401 (a fixture)
from tests.sandbox_fixtures import small_world, small_world_path  # noqa: F401  (fixtures)


def evaluate(plan, world, gt=GROUND_TRUTH):
    return evaluate_plan(json.dumps(plan), INSTANCE, gt, world)


def failed(result) -> set[str]:
    return {r.name for r in result.results if not r.passed}


def test_registry_has_the_32_constraints_of_the_paper():
    assert len(CONSTRAINTS) == 32 and len(set(CONSTRAINT_NAMES)) == 32
    counts = {}
    for c in CONSTRAINTS:
        counts[c.category] = counts.get(c.category, 0) + 1
        assert c.description and c.group == ("UPC" if c.category == "Personalization" else "C")
    assert counts == {
        "Format": 1,
        "Authenticity": 4,
        "Reasonableness": 15,
        "Information richness": 2,
        "Personalization": 10,
    }
    assert len(C_NAMES) == 22 and len(UPC_NAMES) == 10


def test_valid_plan_passes_all(world):
    result = evaluate(valid_plan(), world)
    assert result.delivered and result.all_passed, [(r.name, r.reason) for r in result.failed]
    assert result.c_pass_fraction == 1.0 and result.upc_pass_fraction == 1.0
    assert [r.name for r in result.results] == list(CONSTRAINT_NAMES)


def test_valid_plan_passes_as_answer_text_with_sloppy_json(world):
    text = (
        "<think>done</think>\n<answer>\n```json\n"
        + json.dumps(valid_plan(), indent=1).replace("}\n", "},\n", 1)
        + "\n```\n</answer>"
    )
    text = text.replace('"start_time"', '"startTime"').replace('"price"', '"cost"')
    assert evaluate_plan(text, INSTANCE, GROUND_TRUTH, world).all_passed


# ---------------------------------------------------------------- one broken rule per constraint
# Each edit returns (plan, ground truth, substring the reason must contain).


def _swap(plan, day, old, new):
    find(plan, day, old)["name"] = new


def _set(plan, day, which, **fields):
    find(plan, day, which).update(fields)


def b_poi(plan, gt):
    _swap(plan, 2, "Teahouse Garden", "Imaginary Noodle House")
    return "Imaginary Noodle House"


def b_intercity(plan, gt):
    _set(plan, 1, "G1", number="G9999")
    return "G9999"


def b_local(plan, gt):
    find(plan, 1, "Lotus Pond Kitchen")["transport"]["duration_min"] = 40
    return "plan says 40"


def b_hours(plan, gt):
    _swap(plan, 3, "Jinsha Site Museum", "Early Closing Temple")
    return "09:00-11:00"


def b_meals(plan, gt):
    plan[2]["activities"].pop(0)  # day 3 breakfast
    return "day 3: no breakfast"


def b_repeat(plan, gt):
    _swap(plan, 3, "Jade River Bistro", "Lotus Pond Kitchen")
    return "repeats day 1"


def b_meal_time(plan, gt):
    _set(plan, 2, "Morning Dew Noodles", start_time="06:50", end_time="07:30")
    return "breakfast time"


def b_accommodation(plan, gt):
    plan[0]["activities"].pop()  # day 1 hotel
    return "day 1: no hotel"


def b_checkin_time(plan, gt):
    acts = plan[0]["activities"]
    acts.insert(2, visit("hotel", "Jinjiang Grand Hotel", "13:40", "14:00"))
    _set(plan, 1, "Wenshu Monastery Museum", start_time="14:30")
    return "before 18:00"


def b_midnight(plan, gt):
    plan[2]["activities"][-1] = _train("D5")
    return "at night"


def b_late_arrival(plan, gt):
    plan[0]["activities"] = [
        _train("G7"),
        visit("meal", "Bamboo Hotpot", "18:50", "19:40", meal="dinner"),
        visit("entertainment", "Shu Opera House", "20:10", "21:00"),
        visit("hotel", "Jinjiang Grand Hotel", "21:30", "21:45"),
    ]
    return "after arriving at 18:10"


def b_daily_transport(plan, gt):
    for act in plan[1]["activities"][1:]:
        act["transport"]["mode"] = "Bus"
    return "min of local transport"


def b_weather(plan, gt):
    plan[1]["weather"]["condition"] = "Snowy"
    return "forecast is 'Cloudy'"


def b_min_attraction(plan, gt):
    for old, new in (("Jinsha Site Museum", "Jinsha Escape Room"), ("Tianfu Square", "Tianfu Cinema")):
        _set(plan, 3, old, type="entertainment", name=new)
    return "day 3: no attraction"


def b_max_attractions(plan, gt):
    _set(plan, 2, "Shu Opera House", type="attraction", name="Lantern Square", price=0)
    return "5 attractions"


def b_conflict(plan, gt):
    _set(plan, 2, "Teahouse Garden", start_time="12:00")
    return "starts 10 min after"


def b_time_range(plan, gt):
    _set(plan, 2, "Shu Opera House", end_time="21:30")
    _set(plan, 2, "Jinjiang Grand Hotel", start_time="22:00", end_time="22:15")
    return "outside 09:00-21:00"


def b_leg(plan, gt):
    _swap(plan, 3, "Tianfu Square", "Distant Mountain Park")
    return "Distant Mountain Park"


def b_gap(plan, gt):
    _set(plan, 3, "Jinsha Site Museum", end_time="09:40")
    return "idle from 09:40"


def b_sufficiency(plan, gt):
    del find(plan, 2, "Teahouse Garden")["transport"]["distance_km"]
    return "transport.distance_km"


def b_richness(plan, gt):
    for day in plan:
        for act in day["activities"]:
            act.pop("description", None)
            act.pop("tips", None)
    return "0 of 18"


def b_star(plan, gt):
    _swap(plan, 1, "Jinjiang Grand Hotel", "Comfort Inn Chengdu")
    return "3-Star/Comfort"


def b_amenities(plan, gt):
    _swap(plan, 2, "Jinjiang Grand Hotel", "Palace Hotel No Gym")
    return "lacks Gym"


def b_attraction_type(plan, gt):
    _swap(plan, 2, "Sichuan Museum", "Happy Theme Park")
    return "Theme Park"


def b_walking(plan, gt):
    _swap(plan, 2, "Sichuan Museum", "Long Walk Park")
    return "limit 5 km"


def b_cuisine(plan, gt):
    _swap(plan, 2, "Teahouse Garden", "Steak House")
    return "Western Food"


def b_price(plan, gt):
    _swap(plan, 2, "Teahouse Garden", "Golden Palace")
    _set(plan, 2, "Golden Palace", price=900)
    return "450 CNY/person"


def b_environment(plan, gt):
    _swap(plan, 2, "Teahouse Garden", "Noisy Hotpot")
    return "Lively"


def b_mode(plan, gt):
    plan[0]["activities"][0] = _train("K1")
    return "Regular Train"


def b_seat(plan, gt):
    plan[0]["activities"][0] = _train("G1", seat="First Class Seat")
    return "First Class Seat"


def b_budget(plan, gt):
    _set(plan, 1, "Jinjiang Grand Hotel", price=9999)
    return "exceeds the budget 12000"


BREAKS = {
    "poi_authenticity": b_poi,
    "intercity_transport_authenticity": b_intercity,
    "local_transport_authenticity": b_local,
    "business_hours": b_hours,
    "complete_meals": b_meals,
    "no_repeated_restaurants": b_repeat,
    "reasonable_meal_times": b_meal_time,
    "daily_accommodation": b_accommodation,
    "accommodation_time": b_checkin_time,
    "no_midnight_travel": b_midnight,
    "no_sightseeing_after_late_arrival": b_late_arrival,
    "daily_local_transport_limit": b_daily_transport,
    "weather_and_city_info": b_weather,
    "min_one_attraction": b_min_attraction,
    "max_four_attractions": b_max_attractions,
    "no_time_conflicts": b_conflict,
    "activity_time_range": b_time_range,
    "inter_attraction_transport": b_leg,
    "no_long_gaps": b_gap,
    "information_sufficiency": b_sufficiency,
    "information_richness": b_richness,
    "hotel_star_level": b_star,
    "hotel_amenities": b_amenities,
    "attraction_type": b_attraction_type,
    "walking_tolerance": b_walking,
    "cuisine_type": b_cuisine,
    "price_level": b_price,
    "dining_environment": b_environment,
    "intercity_mode": b_mode,
    "seat_class": b_seat,
    "budget": b_budget,
}


# Breaks that misstate a leg: re-routing the plan would repair them.
KEEP_STATED_LEGS = {"local_transport_authenticity", "information_sufficiency"}


def test_every_constraint_but_format_has_a_break():
    assert set(BREAKS) == set(CONSTRAINT_NAMES) - {"json_format"}


# An invented place or service also fails every check that would need its store record:
# the invented lunch's preferences, hours, price and trips; the invented train's fare.
ALSO_FAILS = {
    "poi_authenticity": {
        "business_hours",
        "local_transport_authenticity",
        "cuisine_type",
        "price_level",
        "dining_environment",
        "budget",
    },
    "intercity_transport_authenticity": {"budget"},
}


@pytest.mark.parametrize("name", list(BREAKS))
def test_breaking_one_rule_fails_exactly_that_constraint(world, name):
    plan, gt = valid_plan(), copy.deepcopy(GROUND_TRUTH)
    expected_text = BREAKS[name](plan, gt)
    if name not in KEEP_STATED_LEGS:
        route_plan(plan)
    result = evaluate(plan, world, gt)
    assert result.delivered
    assert failed(result) == {name} | ALSO_FAILS.get(name, set()), [(r.name, r.reason) for r in result.failed]
    assert expected_text in result[name].reason, result[name].reason
    assert "day" in result[name].reason or name == "budget"


def test_format_failure_fails_everything_but_keeps_ungated_results(world):
    plan = valid_plan()
    plan[1]["date"] = "2026-05-09"
    result = evaluate(plan, world)
    assert not result.delivered and "2026-05-09" in result.reason
    assert failed(result) == set(CONSTRAINT_NAMES)
    assert result["json_format"].reason == result.reason
    assert {r.name for r in result.ungated if not r.passed} == {"json_format"}


@pytest.mark.parametrize(
    "edit, text",
    [
        (lambda p: p.pop(), "plan has 2 day(s) but the trip lasts 3"),
        (lambda p: p[1].update(day=5), "numbered 5"),
    ],
)
def test_wrong_day_structure_is_a_format_failure(world, edit, text):
    plan = valid_plan()
    edit(plan)
    result = evaluate(plan, world)
    assert not result.delivered and text in result.reason


# ---------------------------------------------------------------- history and unconstrained users


@pytest.mark.parametrize(
    "kind, name, constraint",
    [
        ("restaurants", "Forgotten Dumplings", "cuisine_type"),
        ("attractions", "Visited Pagoda", "attraction_type"),
        ("accommodations", "Old Town Inn", "hotel_star_level"),
    ],
)
def test_revisiting_a_history_place_fails_its_preference_check(world, kind, name, constraint):
    plan = valid_plan()
    old = {
        "restaurants": (2, "Teahouse Garden"),
        "attractions": (2, "Sichuan Museum"),
        "accommodations": (1, "Jinjiang Grand Hotel"),
    }[kind]
    _swap(plan, *old, name)
    result = evaluate(route_plan(plan), world)
    assert failed(result) == {constraint} and "been there before" in result[constraint].reason


def test_past_transportation_is_not_constrained(world):
    assert "G1" in GROUND_TRUTH["profile"]["history"]["transportation"]
    assert evaluate(valid_plan(), world).all_passed


def test_absent_or_null_profile_attributes_are_unconstrained(world):
    plan = valid_plan()
    for name in ("attraction_type", "cuisine_type", "seat_class", "hotel_star_level"):
        BREAKS[name](plan, None)
    gt = copy.deepcopy(GROUND_TRUTH)
    gt["profile"] = {
        "hotel": None,
        "attraction": {"preferred_attraction_types": []},
        "dining": {"cuisine_preferences": None},
    }
    del gt["query"]["budget"]
    result = evaluate(route_plan(plan), world, gt)
    assert result.all_passed, [(r.name, r.reason) for r in result.failed]
    assert failed(evaluate(route_plan(plan), world)) == {
        "attraction_type",
        "cuisine_type",
        "seat_class",
        "hotel_star_level",
    }


# ---------------------------------------------------------------- rules in detail


def test_flights_are_checked_by_date_route_times_and_cabin(world):
    flight = {
        "type": "intercity_transport",
        "mode": "flight",
        "number": "3U8888",
        "from_city": "Shanghai",
        "to_city": "Chengdu",
        "start_time": "08:00",
        "end_time": "11:00",
        "seat_class": "Economy Class",
        "price": 2400,
    }
    gt = copy.deepcopy(GROUND_TRUTH)
    gt["profile"]["transportation"] = None
    plan = valid_plan()
    plan[0]["activities"][0] = dict(flight)
    assert evaluate(plan, world, gt).all_passed
    for change, text in (
        ({"seat_class": "Business Class"}, "no 'Business Class'"),
        ({"end_time": "11:30"}, "08:00-11:00"),
    ):
        plan[0]["activities"][0] = dict(flight, **change)
        result = evaluate(plan, world, gt)
        assert failed(result) == {"intercity_transport_authenticity", "budget"}  # no fare for it either
        assert text in result["intercity_transport_authenticity"].reason
    plan[0]["activities"][0] = dict(flight)
    plan[0]["date"], gt["query"]["start_date"] = "2026-04-30", "2026-04-30"
    for day, date in zip(plan[1:], ("2026-05-01", "2026-05-02")):
        day["date"] = date
    assert (
        "no flight 3U8888 on 2026-04-30"
        in evaluate(plan, world, gt)["intercity_transport_authenticity"].reason
    )


def test_missing_return_transport_is_an_intercity_failure(world):
    plan = valid_plan()
    plan[2]["activities"].pop()
    result = evaluate(plan, world)
    assert (
        "day 3 does not end with transport Chengdu -> Shanghai"
        in result["intercity_transport_authenticity"].reason
    )


def test_budget_counts_store_prices_when_the_plan_under_reports(world):
    plan = valid_plan()
    for day in plan:
        for act in day["activities"]:
            act["price"] = 0
    assert evaluate(plan, world).all_passed  # the honest total is within budget
    gt = copy.deepcopy(GROUND_TRUTH)
    gt["query"]["budget"] = 5000  # below the store-priced total (trains 3200 + hotels 1800 + ...)
    assert failed(evaluate(plan, world, gt)) == {"budget"}


def test_a_short_day_needs_no_attraction_and_owes_no_lunch(world):
    plan = valid_plan()
    b_late_arrival(plan, None)
    plan[0]["activities"][2] = visit("hotel", "Jinjiang Grand Hotel", "20:10", "20:30")
    plan[0]["activities"].pop()
    result = evaluate(route_plan(plan), world)
    assert result.all_passed, [(r.name, r.reason) for r in result.failed]


def test_world_index_caches_city_tables(world):
    index = index_for(world)
    first = index.pois("restaurant", "Chengdu")
    assert index.pois("restaurant", "Chengdu") is first and len(first) == 11
    assert index.poi("restaurant", "Chengdu", "  lotus POND kitchen ").name == "Lotus Pond Kitchen"
    assert index.poi("restaurant", "Shanghai", "Lotus Pond Kitchen") is None


# ---------------------------------------------------------------- malformed answers never raise


@pytest.mark.parametrize(
    "answer",
    [
        "",
        "   ",
        "no plan here",
        "<answer></answer>",
        "[]",
        "{}",
        "null",
        "42",
        '"text"',
        "[1, 2, 3]",
        '[{"day": 1}]',
        '[{"activities": "lots"}]',
        '[{"activities": [{"type": "shopping", "start_time": "10:00", "end_time": "11:00"}]}]',
        '[{"activities": [{"type": "meal", "start_time": "25:00", "end_time": "26:00"}]}]',
        '[{"activities": [{"type": "meal", "start_time": 1000, "end_time": "11:00"}]}]',
        "[" * 50000,
        '[{"activities": [' + ",".join(['{"type": "meal"}'] * 10) + "]}]",
        json.dumps([{"day": i, "activities": []} for i in range(1, 400)]),
        "x" * 2_000_000,
    ],
)
def test_malformed_answers_are_undelivered_with_a_reason(world, answer):
    result = evaluate_plan(answer, INSTANCE, GROUND_TRUTH, world)
    assert not result.delivered and result.reason
    assert not any(r.passed for r in result.results)


def test_plan_missing_a_day_in_the_middle_is_undelivered(world):
    plan = valid_plan()
    del plan[1]
    for n, day in enumerate(plan, 1):
        day["day"] = n
    result = evaluate(plan, world)
    assert not result.delivered and "trip lasts 3" in result.reason


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(["meal", "hotel", "attraction", "12:00", "Chengdu", "Subway", "G1", "lunch"]),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(
            st.sampled_from(
                [
                    "day",
                    "type",
                    "name",
                    "start_time",
                    "end_time",
                    "activities",
                    "price",
                    "transport",
                    "mode",
                    "meal",
                    "weather",
                    "city",
                    "date",
                    "number",
                ]
            ),
            inner,
            max_size=6,
        )
    ),
    max_leaves=30,
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=_JSON)
def test_random_json_never_crashes_the_evaluator(world, data):
    for answer in (data, json.dumps(data)):
        result = evaluate_plan(answer, INSTANCE, GROUND_TRUTH, world)
        assert len(result.results) == 32
        assert result.delivered == result["json_format"].passed


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    day=st.integers(0, 2),
    index=st.integers(0, 8),
    key=st.sampled_from(
        ["start_time", "end_time", "price", "transport", "name", "type", "meal", "seat_class"]
    ),
    value=st.none()
    | st.integers(-5, 3000)
    | st.text(max_size=6)
    | st.sampled_from(["23:59", "00:00", "meal", "hotel", "attraction", "intercity_transport"]),
)
def test_random_field_edits_of_a_valid_plan_never_crash(world, day, index, key, value):
    plan = valid_plan()
    acts = plan[day]["activities"]
    acts[index % len(acts)][key] = value
    result = evaluate(plan, world)
    assert len(result.results) == 32


# ---------------------------------------------------------------- the generated world


def _mapguide_minutes(world, origin: str, destination: str, mode: str) -> tuple[int, float]:
    result = B2TTools(world).call_tool(
        "MapGuide",
        {
            "origin_cityName": "Chengdu",
            "origin": origin,
            "destination_cityName": "Chengdu",
            "destination": destination,
        },
    )
    assert not result.is_error, result.text
    route = next(
        json.loads(line) for line in result.text.splitlines()[1:] if json.loads(line)["mode"] == mode
    )
    return route["duration_min"], route["distance_km"]


def test_plan_from_generated_store_rows_is_authentic(small_world):
    """Rows of the generated small world + MapGuide legs satisfy the store-backed checks."""
    import sqlite3

    db = sqlite3.connect(small_world.store.path)
    db.row_factory = sqlite3.Row
    go = db.execute(
        "SELECT * FROM trains WHERE origin_city='Chongqing' AND destination_city="
        "'Chengdu' AND arrival_day_offset=0 AND arrival_time<='13:00' "
        "ORDER BY departure_time LIMIT 1"
    ).fetchone()
    back = db.execute(
        "SELECT * FROM trains WHERE origin_city='Chengdu' AND destination_city="
        "'Chongqing' AND departure_time>='16:00' AND arrival_day_offset=0 "
        "ORDER BY departure_time LIMIT 1"
    ).fetchone()
    lunch, breakfast = db.execute(
        "SELECT name FROM restaurants WHERE city='Chengdu' AND "
        "open_time<='07:00' AND close_time>='15:00' LIMIT 2"
    ).fetchall()
    sight = db.execute(
        "SELECT name FROM attractions WHERE city='Chengdu' AND open_time<='09:00' "
        "AND close_time>='18:00' LIMIT 1"
    ).fetchone()
    hotel = db.execute("SELECT name FROM hotels WHERE city='Chengdu' LIMIT 1").fetchone()
    weather = {
        r["date"]: r
        for r in db.execute(
            "SELECT * FROM weather WHERE city='Chengdu' AND date IN ('2026-05-01','2026-05-02')"
        )
    }
    assert go and back and sight and hotel and len(weather) == 2

    def train(row):
        seat = next(iter(json.loads(row["fares"])))
        return {
            "type": "intercity_transport",
            "mode": "train",
            "number": row["train_number"],
            "from_city": row["origin_city"],
            "to_city": row["destination_city"],
            "start_time": row["departure_time"],
            "end_time": row["arrival_time"],
            "seat_class": seat,
            "price": 2 * json.loads(row["fares"])[seat],
        }

    def stop(kind, name, start, end, origin, **extra):
        minutes, km = _mapguide_minutes(small_world.store, origin, name, "Taxi")
        return {
            "type": kind,
            "name": name,
            "start_time": start,
            "end_time": end,
            "price": 100,
            "transport": {"mode": "Taxi", "duration_min": minutes, "distance_km": km},
            **extra,
        }

    def day(n, date, acts):
        w = weather[date]
        return {
            "day": n,
            "date": date,
            "city": "Chengdu",
            "city_info": "Capital of Sichuan.",
            "weather": {"condition": w["weather"], "max_temp": w["max_temp"], "min_temp": w["min_temp"]},
            "activities": acts,
        }

    plan = [
        day(
            1,
            "2026-05-01",
            [
                train(go),
                stop("meal", lunch["name"], "14:00", "14:30", go["destination_station"], meal="lunch"),
                stop("attraction", sight["name"], "15:30", "17:00", lunch["name"]),
                stop("hotel", hotel["name"], "19:00", "19:30", sight["name"]),
            ],
        ),
        day(
            2,
            "2026-05-02",
            [stop("meal", breakfast["name"], "08:00", "08:30", hotel["name"], meal="breakfast"), train(back)],
        ),
    ]
    gt = {
        "query": {
            "origin": "Chongqing",
            "destination": "Chengdu",
            "start_date": "2026-05-01",
            "days": 2,
            "people": 2,
            "budget": 50000,
        },
        "profile": {},
    }
    store_backed = (
        "poi_authenticity",
        "intercity_transport_authenticity",
        "local_transport_authenticity",
        "business_hours",
        "weather_and_city_info",
    )
    result = evaluate_plan(json.dumps(plan), None, gt, small_world.store)
    assert result.delivered
    for name in store_backed:
        assert result[name].passed, (name, result[name].reason)
    plan[0]["activities"][3]["transport"]["duration_min"] += 30  # hotel leg
    plan[1]["activities"][1]["start_time"] = "03:00"  # return train
    plan[0]["activities"][1]["name"] += " Annex"  # lunch
    result = evaluate_plan(json.dumps(plan), None, gt, small_world.store)
    for name, text in zip(store_backed[:3], (" Annex", "03:00", "plan says")):
        assert not result[name].passed and text in result[name].reason, result[name].reason


# ---------------------------------------------------------------- the documentation stays true


def _readme_section(title: str) -> str:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "sandbox" / "benchmarks" / "b2t" / "README.md").read_text()
    start = text.index(f"## {title}\n")
    return text[start : text.index("\n## ", start + 1)]


def test_readme_plan_example_passes_all_32(world):
    section = _readme_section("Plan format")
    example = section[section.index("```json\n") + 8 : section.index("\n```", section.index("```json"))]
    gt = copy.deepcopy(GROUND_TRUTH)
    gt["query"]["days"] = 2
    result = evaluate_plan(example, INSTANCE, gt, world)
    assert result.all_passed, [(r.name, r.reason) for r in result.failed]


def test_readme_lists_every_constraint():
    section = _readme_section("Constraints, metrics and reward")
    for c in CONSTRAINTS:
        assert f"| `{c.name}` | {c.category} | {c.group} | {c.description} |" in section
