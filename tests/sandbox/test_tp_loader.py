"""TravelPlanner database, dataset loaders and plan reader against the offline official files."""

import csv
import json

import pytest

from sandbox.benchmarks.travelplanner import Database, DatabaseError, normalize_query
from sandbox.benchmarks.travelplanner.loader import (
    LoaderError,
    check_split,
    read_queries,
    read_reference_info,
    read_structured,
    read_training_chats,
)
from sandbox.benchmarks.travelplanner.plan_reader import read_plan
from tests.tp_fixtures import human_plans, tp_db, train_queries  # noqa: F401 - fixtures
from tests.tp_harness import DATA_DIR


def test_database_sizes_follow_the_official_loader(tp_db):
    # Figures of sandbox/benchmarks/travelplanner/data/ATTRIBUTION.md: 5,047 listings of which 4,285
    # have no empty field; 5,302 attractions; 9,551 restaurants; 312 cities; 313 flights.
    sizes = {kind: sum(len(rows) for rows in by_city.values()) for kind, by_city in tp_db.places.items()}
    assert sizes == {"accommodations": 4285, "attractions": 5302, "restaurants": 9551}
    assert len(tp_db.cities) == 312 and len(tp_db.flight_rows) == 313
    assert tp_db.state_of("Rockford") == "Illinois" and "Rockford" in tp_db.cities_in_state("Illinois")


def test_reference_information_equals_the_database_rows_of_its_cities(tp_db):
    infos = read_reference_info(DATA_DIR / "train_ref_info.jsonl")
    assert len(infos) == 45
    ref = Database.from_reference_info(DATA_DIR / "train_ref_info.jsonl")
    for kind, by_city in ref.places.items():
        for city, rows in by_city.items():
            assert rows == tp_db.rows(kind, city), (kind, city)
    assert {json.dumps(r, sort_keys=True) for r in ref.flight_rows} == {
        json.dumps(r, sort_keys=True) for r in tp_db.flight_rows
    }
    for pair, route in ref.routes.items():
        assert route == tp_db.route(*pair)
    # Adding the same information again changes nothing.
    before = sum(len(r) for r in ref.places["restaurants"].values())
    ref.add_reference_info(DATA_DIR / "train_ref_info.jsonl")
    assert sum(len(r) for r in ref.places["restaurants"].values()) == before


def test_flights_by_date_and_kind_accessors(tp_db):
    flights = tp_db.flights("St. Petersburg", "Rockford", "2022-03-16")
    assert [f["Flight Number"] for f in flights] == ["F3573659"] and flights[0]["Price"] == 474
    assert tp_db.flights("St. Petersburg", "Rockford", "2022-01-01") == []
    assert tp_db.restaurants("Nowhere") == []
    with pytest.raises(KeyError, match="unknown place kind"):
        tp_db.rows("hotels", "Rockford")


def test_bad_database_files_give_one_line_errors(tmp_path):
    with pytest.raises(DatabaseError, match="not a directory"):
        Database.from_dir(tmp_path / "missing")
    (tmp_path / "attractions.csv").write_text("Name,City\nX,Y\n")
    with pytest.raises(DatabaseError, match="missing columns"):
        Database.from_dir(tmp_path)
    bad = tmp_path / "ref.jsonl"
    bad.write_text('{"Attractions in X": [{"Name": 1}]}\n')
    with pytest.raises(DatabaseError, match=r"ref.jsonl:1"):
        Database.from_reference_info(bad)


def test_official_dataset_rows_are_normalised(tmp_path, train_queries):
    # An export of the official dataset: Python-literal date/local_constraint, "None" strings.
    path = tmp_path / "validation.csv"
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(
            [
                "org",
                "dest",
                "days",
                "visiting_city_number",
                "date",
                "people_number",
                "local_constraint",
                "budget",
                "query",
                "level",
            ]
        )
        writer.writerow(
            [
                "Houston",
                "Fayetteville",
                "3",
                "1",
                "['2022-03-20', '2022-03-21', '2022-03-22']",
                "2",
                "{'house rule': 'children under 10', 'cuisine': ['American', 'Chinese'], "
                "'room type': None, 'transportation': 'None'}",
                "1500",
                "text",
                "middle",
            ]
        )
    [query] = read_queries(path)
    assert query["date"][1] == "2022-03-21" and query["days"] == 3 and query["budget"] == 1500
    assert query["local_constraint"] == {
        "house rule": "children under 10",
        "cuisine": ["American", "Chinese"],
        "room type": None,
        "transportation": None,
    }
    assert query["level"] == "medium"
    with pytest.raises(LoaderError, match="test split has 1000"):
        check_split([query], "test")


def test_structured_files_and_spellings_agree_with_the_training_queries(train_queries):
    for file in (DATA_DIR / "structured").glob("plan_*.json"):
        query, plan = read_structured(file)
        index = int(file.stem.split("_")[1]) - 1
        assert query == train_queries[index]
        assert plan[0]["days"] == 1
    spaced = normalize_query(
        {
            "org": "A",
            "dest": "B",
            "days": 3,
            "visiting city number": 1,
            "people number": 2,
            "budget": 100,
            "house rule": "None",
            "cuisine": None,
        }
    )
    assert spaced["visiting_city_number"] == 1 and spaced["local_constraint"]["house rule"] is None


def test_training_chats_hold_the_human_plans(human_plans):
    chats = read_training_chats(DATA_DIR / "std_travelplanner.jsonl")
    assert len(chats) == 45 and all(len(c.plan) == 7 for c in chats)
    assert chats[0].query_text.startswith("Please help me plan a trip from St. Petersburg to Rockford")
    assert chats[0].plan[3] == {}


def _as_text(plan: list) -> str:
    """The official prompt's text format, written by hand from a plan."""
    lines = []
    for day in plan:
        lines += [
            f"Day {day['days']}:",
            f"Current City: {day['current_city']}",
            f"Transportation: {day['transportation']}",
            f"Breakfast: {day['breakfast']}",
            f"Attraction: {day['attraction']}",
            f"Lunch: {day['lunch']}",
            f"Dinner: {day['dinner']}",
            f"Accommodation: {day['accommodation']}",
            "",
        ]
    return "\n".join(lines)


def test_plan_reader_reads_json_python_literals_and_text(human_plans):
    plan = [d for d in human_plans[35] if d]
    assert read_plan(json.dumps(plan)) == plan
    assert read_plan("Here it is:\n```json\n" + json.dumps({"plan": plan}) + "\n```") == plan
    assert read_plan(repr(human_plans[35])) == human_plans[35]
    assert read_plan("Sure!\n" + _as_text(plan) + "\nEnjoy.") == plan
    bold = _as_text(plan).replace("Day 1:", "**Day 1:**").replace("Breakfast:", "- **Breakfast**:")
    assert read_plan(bold) == plan
    assert read_plan("I could not find a plan.") is None and read_plan("") is None
