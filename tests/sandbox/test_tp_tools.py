"""TravelPlanner tools, query-text parsing of the 36 unstructured training queries, and the reward.

Expectations are independent of the code under test: rows copied by hand from the official CSVs
and reference information, the 9 structured training files and engineer B's structured table of
the 45 queries (tests/data/tp_train_queries.jsonl), the human plans, and hand-computed rewards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox.benchmarks.travelplanner import Database
from sandbox.benchmarks.travelplanner.evaluator import Evaluation
from sandbox.benchmarks.travelplanner.query_text import QueryTextError, parse_query_text
from sandbox.benchmarks.travelplanner.reward import compute_reward, shaped_like_trip
from sandbox.benchmarks.travelplanner.tools import NoToolWorld, TravelPlannerWorld
from sandbox.env import EpisodeEnv
from tests.tp_harness import DATA_DIR, DATABASE_DIR

B_TABLE = Path(__file__).parents[1] / "data" / "tp_train_queries.jsonl"


@pytest.fixture(scope="module")
def db() -> Database:
    return Database.from_dir(DATABASE_DIR)


@pytest.fixture(scope="module")
def world(db) -> TravelPlannerWorld:
    return TravelPlannerWorld(db)


def _rows(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.split("\n")[2:]]


# ------------------------------------------------------------------------------------------ tools


def test_restaurant_search_lists_the_city_rows_in_file_order(world):
    res = world.call_tool("RestaurantSearch", {"city": "Rockford"})
    assert not res.is_error
    rows = _rows(res.text)
    # clean_restaurant_2022.csv: the first Rockford rows, by hand
    assert rows[0] == ["Coco Bambu", "72", "Tea, French, Bakery, BBQ, Cafe", "4.9"]
    assert rows[1] == ["Flying Mango", "20", "American, BBQ, Seafood", "4.5"]
    assert res.text.startswith("Restaurants in Rockford (27 restaurants):")
    assert len(rows) == 27


def test_accommodation_search_keeps_names_verbatim_and_drops_rows_with_empty_fields(world):
    rows = _rows(world.call_tool("AccommodationSearch", {"city": "Waco"}).text)
    # CSV row 20: "Sonder | 21 Chelsea | Central 1BR + Rooftop",Entire home/apt,1105.0,29.0,3.0,...,9,Waco
    assert rows[0] == [
        "Sonder | 21 Chelsea | Central 1BR + Rooftop",
        "1105",
        "Entire home/apt",
        "No visitors & No smoking & No children under 10",
        "29",
        "9",
        "3",
    ]
    denver = _rows(world.call_tool("AccommodationSearch", {"city": "denver"}).text)  # case forgiven
    assert "Peaceful, beautiful home away " in [r[0] for r in denver]  # trailing space kept
    # CSV row 821 has newlines inside its quoted name: shown escaped, never silently changed
    phoenix = world.call_tool("AccommodationSearch", {"city": "Phoenix"}).text
    assert "\nBEDSTUY BK - PAD\\nSHORT/ LONG TERM STAYS\\nNO EVENTS\t1188\t" in phoenix
    # Row 11 (Springfield, empty house_rules) is filtered like the official loader does.
    springfield = [r[0] for r in _rows(world.call_tool("AccommodationSearch", {"city": "Springfield"}).text)]
    assert "Luxury large Penthouse /Fireplace / City views.." not in springfield


def test_flight_and_distance_answers_equal_the_reference_information(world):
    flights = _rows(
        world.call_tool(
            "FlightSearch", {"origin": "St. Petersburg", "destination": "Rockford", "date": "2022-03-16"}
        ).text
    )
    assert flights == [["F3573659", "474", "15:40", "17:04", "2 hours 24 minutes", "2022-03-16", "1049"]]
    none = world.call_tool(
        "FlightSearch", {"origin": "Kansas City", "destination": "Pensacola", "date": "2022-03-27"}
    )
    assert not none.is_error
    assert none.text == "There is no flight from Kansas City to Pensacola on 2022-03-27."
    taxi = world.call_tool(
        "DistanceMatrix", {"origin": "Kansas City", "destination": "Pensacola", "mode": "taxi"}
    )
    # train_ref_info.jsonl line 2: "taxi, from Kansas City to Pensacola, duration: 14 hours 4 mins,
    # distance: 1,433 km, cost: 1433"
    assert taxi.text.startswith(
        "taxi, from Kansas City to Pensacola, duration: 14 hours 4 mins, distance: 1,433 km, cost: 1433"
    )
    drive = world.call_tool(
        "DistanceMatrix", {"origin": "Pensacola", "destination": "Kansas City", "mode": "self-driving"}
    )
    assert "distance: 1,447 km, cost: 72" in drive.text
    cities = world.call_tool("CitySearch", {"state": "Utah"}).text
    assert set(cities.split(": ", 1)[1].split(", ")) >= {"Salt Lake City", "Moab", "Vernal", "Provo"}


@pytest.mark.parametrize(
    "name, args, fragment",
    [
        ("HotelSearch", {"city": "Rockford"}, "unknown tool"),
        ("RestaurantSearch", {"city": "Atlantis"}, "not a city"),
        ("RestaurantSearch", {}, "missing required argument 'city'"),
        ("RestaurantSearch", {"city": "Rockford", "n": 3}, "unknown argument"),
        ("RestaurantSearch", ["Rockford"], "must be a JSON object"),
        ("FlightSearch", {"origin": "Rockford", "destination": "Denver", "date": "16/03/2022"}, "YYYY-MM-DD"),
        (
            "DistanceMatrix",
            {"origin": "Rockford", "destination": "Denver", "mode": "walking"},
            "mode must be",
        ),
        ("CitySearch", {"state": 7}, "must be a string"),
    ],
)
def test_invalid_calls_are_error_results(world, name, args, fragment):
    res = world.call_tool(name, args)
    assert res.is_error and fragment in res.text


def test_a_deeply_nested_argument_is_an_error_result_not_a_recursion_error(world):
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    res = world.call_tool("RestaurantSearch", {"city": deep})
    assert res.is_error and "nested more than" in res.text


def test_tools_run_through_the_episode_env_and_sole_planning_has_none(world):
    env = EpisodeEnv(world)
    step = env.step(
        '<think>x</think><tool_call>{"name": "CitySearch", "arguments": {"state": "Utah"}}'
        '</tool_call><tool_call>{"name": "CitySearch", "arguments": {"state": "Mars"}}'
        "</tool_call>"
    )
    assert [r.is_error for r in step.responses] == [False, True] and step.any_error
    assert [s["function"]["name"] for s in world.tool_schemas()] == [
        "FlightSearch",
        "DistanceMatrix",
        "AccommodationSearch",
        "RestaurantSearch",
        "AttractionSearch",
        "CitySearch",
    ]
    assert NoToolWorld().tool_schemas() == [] and NoToolWorld().call_tool("CitySearch", {}).is_error


# --------------------------------------------------------------------------------- query parsing


@pytest.fixture(scope="module")
def training():
    from sandbox.benchmarks.travelplanner.training import load_training

    return load_training(DATA_DIR)


def test_all_45_queries_equal_the_structured_files_and_b_table(training):
    from sandbox.benchmarks.travelplanner import normalize_query

    table = [json.loads(line) for line in B_TABLE.read_text().splitlines()]
    assert len(training) == 45 and sum(e.structured for e in training) == 9
    for example, expected in zip(training, table):
        assert normalize_query(example.query) == normalize_query(expected), example.index


def test_parsed_queries_agree_with_human_plans_and_reference_info(training, db):
    for e in (e for e in training if not e.structured):
        q, plan = e.query, e.human_plan
        assert len(plan) == q["days"], e.index
        assert plan[0]["current_city"].startswith(f"from {q['org']} to"), e.index
        visited = {
            city.split("(")[0].strip()
            for d in plan
            for city in d["current_city"].removeprefix("from ").split(" to ")
        } - {q["org"]}
        assert len(visited) == q["visiting_city_number"] == len(e.reference_cities), e.index
        if q["days"] == 3:
            assert visited == {q["dest"]}, e.index
        else:
            assert all(db.state_of(city) == q["dest"] for city in visited), e.index
        legs = [k.split(" on ")[1] for k in e.reference_info if k.startswith("Flight from ")]
        assert (q["date"][0], q["date"][-1]) == (legs[0], legs[-1]), e.index


def test_parser_reads_phrasings_and_reports_missing_fields(db):
    q = parse_query_text(
        "Could you create a travel plan starting from Provo to Phoenix for 2 people, from "
        "March 24th to March 26th, 2022? Our budget is set at $1,400.",
        db.city_states,
    )
    assert (q["org"], q["dest"], q["days"], q["people_number"], q["budget"]) == (
        "Provo",
        "Phoenix",
        3,
        2,
        1400,
    )
    q = parse_query_text(
        "A week-long trip for a party of 5 from Kansas City to 3 cities in Texas, from the "
        "2nd of March, 2022, budget $9,000. We want to hold a party.",
        db.city_states,
    )
    assert (q["dest"], q["days"], q["people_number"], q["local_constraint"]["house rule"]) == (
        "Texas",
        7,
        5,
        "parties",
    )
    with pytest.raises(QueryTextError, match="budget"):
        parse_query_text("A 3-day trip from Provo to Phoenix, March 24th, 2022.", db.city_states)


# ----------------------------------------------------------------------------------------- reward


def _evaluation(cs_failed: int, hard: dict | None, delivered: bool = True) -> Evaluation:
    names = [f"c{i}" for i in range(8)]
    return Evaluation({n: i >= cs_failed for i, n in enumerate(names)}, hard, delivered=delivered)


def test_reward_hand_computations_and_switches():
    hard = {
        "valid_cost": True,
        "valid_room_rule": False,
        "valid_cuisine": None,
        "valid_room_type": True,
        "valid_transportation": None,
    }
    r = compute_reward(_evaluation(2, hard), True, False)  # 6/8 + 2/3, no action error
    assert (r.r_c, r.r_upc, r.r_format, r.p_action) == (0.75, pytest.approx(2 / 3), 1.0, 0.0)
    assert r.total == pytest.approx(0.75 + 2 / 3)
    r = compute_reward(_evaluation(2, hard), True, True)  # action penalty
    assert r.total == pytest.approx(-1 + 0.75 + 2 / 3)
    assert compute_reward(_evaluation(2, hard), True, True, action_penalty=False).p_action == 0.0
    gated = compute_reward(_evaluation(1, None), True, False)  # gate failed: hard fraction 0
    assert (gated.r_c, gated.r_upc, gated.total) == (7 / 8, 0.0, 7 / 8)
    misshaped = compute_reward(_evaluation(0, hard), False, False)  # wrong number of days
    assert misshaped.total == 0.0 and misshaped.r_format == 0.0
    ungated = compute_reward(_evaluation(0, hard), False, False, format_gate=False)
    assert ungated.total == pytest.approx(1 + 2 / 3)
    assert compute_reward(None, False, True).total == -1.0  # no answer: only the penalty
    assert compute_reward(_evaluation(8, None, delivered=False), False, False).total == 0.0


def test_shaped_like_trip():
    day = {"days": 1, "current_city": "x"}
    assert shaped_like_trip([day, day, day, {}, {}], 3)
    assert not shaped_like_trip([day, day], 3) and not shaped_like_trip([day, {}, day, day], 3)
    assert not shaped_like_trip("plan", 3)
