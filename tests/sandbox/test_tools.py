"""The nine tools against the small world: results match independent SQL, invalid calls are errors."""

import json
import math
import sqlite3
from concurrent.futures import ThreadPoolExecutor

import pytest

from sandbox.benchmarks.b2t import geo, vocab
from sandbox.benchmarks.b2t.tools.format import RESPONSE_CHAR_BUDGET
from sandbox.benchmarks.b2t.tools.places import transport_hubs
from sandbox.benchmarks.b2t.world.generator import build_world
from sandbox.benchmarks.b2t.world.store import open_world

TOOL_NAMES = [
    "AccommodationSearch",
    "AttractionSearch",
    "EntertainmentSearch",
    "RestaurantSearch",
    "FlightSearch",
    "TrainSearch",
    "WeatherSearch",
    "MapGuide",
    "Python",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("world") / "world.sqlite"
    build_world(path, "small", seed=0)
    return path


@pytest.fixture(scope="module")
def world(store):
    return open_world(store)


@pytest.fixture(scope="module")
def db(store):
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    yield conn
    conn.close()


def items(text: str) -> list[dict]:
    """The JSON result lines of a tool response."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def call_ok(world, name, args) -> list[dict]:
    res = world.call_tool(name, args)
    assert not res.is_error, res.text
    return items(res.text)


def test_schemas_cover_the_nine_tools_with_required_arguments(world):
    schemas = world.tool_schemas()
    assert [s["function"]["name"] for s in schemas] == TOOL_NAMES
    by_name = {s["function"]["name"]: s["function"]["parameters"] for s in schemas}
    assert by_name["MapGuide"]["required"] == [
        "origin_cityName",
        "origin",
        "destination_cityName",
        "destination",
    ]
    assert by_name["FlightSearch"]["required"] == ["origin", "destination", "departure_date"]
    assert by_name["WeatherSearch"]["required"] == ["city"]
    assert by_name["Python"]["required"] == ["code"]
    prefs = by_name["RestaurantSearch"]["properties"]["preferences"]["properties"]
    assert prefs["cuisine"]["items"]["enum"] == list(vocab.CUISINES)
    assert set(by_name["AccommodationSearch"]["properties"]["preferences"]["properties"]) == {
        "star_rating",
        "amenities",
    }
    json.dumps(schemas)  # serialisable for the prompt


def test_accommodation_search_matches_sql(world, db):
    res = world.call_tool(
        "AccommodationSearch",
        {
            "city": "Chengdu",
            "n": 20,
            "preferences": {
                "star_rating": ["4-Star/Upscale", "5-Star/Luxury"],
                "amenities": ["Gym", "Swimming Pool"],
            },
        },
    )
    got = items(res.text)
    expected = db.execute(
        "SELECT name FROM hotels h WHERE city = 'Chengdu' AND secondary_category IN "
        "('4-Star/Upscale', '5-Star/Luxury')"
        " AND EXISTS (SELECT 1 FROM json_each(h.facilities) WHERE value = 'Gym')"
        " AND EXISTS (SELECT 1 FROM json_each(h.facilities) WHERE value = 'Swimming Pool')"
        " ORDER BY avg_rating DESC, avg_price, name"
    ).fetchall()
    assert expected and [g["name"] for g in got] == [r["name"] for r in expected][: len(got)]
    assert len(got) == min(20, len(expected)) or "omitted" in res.text
    for g in got:
        assert {"Gym", "Swimming Pool"} <= set(g["facilities"])


def test_restaurant_search_matches_sql_with_filters(world, db):
    args = {
        "city": "Shanghai",
        "n": 20,
        "open_at": "08:00",
        "min_rating": 4.0,
        "preferences": {
            "cuisine": ["Cantonese", "Sichuan Cuisine", "Hot Pot"],
            "price_level": "Budget",
            "environment": ["Quiet", "Lively"],
        },
    }
    got = call_ok(world, "RestaurantSearch", args)
    expected = [
        r["name"]
        for r in db.execute(
            "SELECT name, environment FROM restaurants WHERE city = 'Shanghai'"
            " AND secondary_category IN ('Cantonese', 'Sichuan Cuisine', 'Hot Pot')"
            " AND price_level = 'Budget (30-80 CNY/person)' AND avg_rating >= 4.0"
            " AND open_time <= '08:00' AND close_time > '08:00' ORDER BY avg_rating DESC, avg_price, name"
        )
        if {"Quiet", "Lively"} & set(json.loads(r["environment"]))
    ]
    assert [g["name"] for g in got] == expected[:20]
    header = world.call_tool("RestaurantSearch", args).text.splitlines()[0]
    assert f"of {len(expected)} matching" in header


def test_attraction_search_walk_tolerance_and_price(world, db):
    got = call_ok(
        world,
        "AttractionSearch",
        {"city": "Hangzhou", "n": 20, "max_price": 100, "preferences": {"walk_tolerance": ["Low (1-3km)"]}},
    )
    expected = [
        r["name"]
        for r in db.execute(
            "SELECT name FROM attractions WHERE city = 'Hangzhou' AND walking_km <= 3.0 AND avg_price <= 100"
            " ORDER BY avg_rating DESC, avg_price, name"
        )
    ]
    assert [g["name"] for g in got] == expected[: len(got)] and got
    everything = world.call_tool(
        "AttractionSearch", {"city": "Hangzhou", "preferences": {"walk_tolerance": ["High (5km+)"]}}
    ).text
    total = db.execute("SELECT COUNT(*) FROM attractions WHERE city = 'Hangzhou'").fetchone()[0]
    assert f"5 of {total} matching" in everything  # high tolerance excludes nothing


def test_near_filter_matches_haversine(world, db):
    anchor = db.execute(
        "SELECT name, latitude, longitude FROM hotels WHERE city = 'Xi''an' ORDER BY id LIMIT 1"
    ).fetchone()
    got = call_ok(
        world, "EntertainmentSearch", {"city": "Xi'an", "n": 20, "near": anchor["name"], "radius_km": 4}
    )
    expected = sorted(
        (
            round(
                geo.haversine_km(anchor["latitude"], anchor["longitude"], r["latitude"], r["longitude"]), 2
            ),
            -r["avg_rating"],
            r["name"],
        )
        for r in db.execute("SELECT * FROM entertainment WHERE city = 'Xi''an'")
    )
    expected = [e for e in expected if e[0] <= 4]
    assert [(g["distance_km"], g["name"]) for g in got] == [(e[0], e[2]) for e in expected[:20]]
    by_coords = call_ok(
        world,
        "EntertainmentSearch",
        {"city": "Xi'an", "n": 20, "radius_km": 4, "near": f"{anchor['latitude']},{anchor['longitude']}"},
    )
    assert [g["name"] for g in by_coords] == [g["name"] for g in got]


def test_flight_search_matches_sql(world, db):
    got = call_ok(
        world,
        "FlightSearch",
        {
            "origin": "Beijing",
            "destination": "Shanghai",
            "departure_date": "2026-06-10",
            "n": 10,
            "depart_after": "09:00",
            "preferences": {"cabin_class": ["Business Class"]},
        },
    )
    expected = db.execute(
        "SELECT flight_number, total_price FROM flights WHERE origin_city = 'Beijing' AND destination_city = "
        "'Shanghai' AND departure_date = '2026-06-10' AND cabin_class = 'Business Class' "
        "AND departure_time >= "
        "'09:00' ORDER BY departure_time, total_price, id"
    ).fetchall()
    assert expected and [(g["flight_number"], g["price"]) for g in got] == [tuple(r) for r in expected][:10]
    assert all(g["cabin"] == "Business Class" for g in got)
    none = world.call_tool(
        "FlightSearch", {"origin": "Lijiang", "destination": "Huangshan", "departure_date": "2026-06-10"}
    )
    assert not none.is_error and "no air route" in none.text


def test_train_search_matches_sql(world, db):
    got = call_ok(
        world,
        "TrainSearch",
        {
            "origin": "Shanghai",
            "destination": "Hangzhou",
            "n": 20,
            "preferences": {"train_type": ["High-speed Rail"]},
        },
    )
    expected = db.execute(
        "SELECT train_number, fares FROM trains WHERE origin_city = 'Shanghai' AND "
        "destination_city = 'Hangzhou' AND train_type = 'High-speed Rail' "
        "ORDER BY departure_time, train_number"
    ).fetchall()
    assert [g["train_number"] for g in got] == [r["train_number"] for r in expected]
    assert got[0]["fares"] == json.loads(expected[0]["fares"])


def test_weather_search_returns_consecutive_days(world, db):
    got = call_ok(world, "WeatherSearch", {"city": "Harbin", "date": "2026-08-29", "n": 5})
    expected = db.execute(
        "SELECT date, weather, max_temp, min_temp FROM weather WHERE city = 'Harbin' "
        "AND date >= '2026-08-29' ORDER BY date"
    ).fetchall()
    assert [(g["date"], g["weather"], g["max_temp"], g["min_temp"]) for g in got] == [
        tuple(r) for r in expected
    ]
    assert len(got) == 3  # the calendar ends on 2026-08-31
    assert call_ok(world, "WeatherSearch", {"city": "Harbin"})[0]["date"] == "2026-03-01"


def test_map_guide_same_city_equals_geo_model(world, db):
    a, b = db.execute(
        "SELECT name, latitude, longitude FROM attractions WHERE city = 'Chengdu' ORDER BY id LIMIT 2"
    ).fetchall()
    got = call_ok(
        world,
        "MapGuide",
        {
            "origin_cityName": "Chengdu",
            "origin": a["name"],
            "destination_cityName": "Chengdu",
            "destination": b["name"],
        },
    )
    routes = geo.local_routes(a["latitude"], a["longitude"], b["latitude"], b["longitude"])
    assert {g["mode"]: (g["distance_km"], g["duration_min"]) for g in got} == {
        m: (r.distance_km, r.duration_min) for m, r in routes.items()
    }
    assert set(routes) == set(vocab.INTRACITY_MODES)


def test_map_guide_stations_and_intercity(world, db):
    city = world.city("Chengdu")
    hub = transport_hubs(city)[0]
    got = call_ok(
        world,
        "MapGuide",
        {
            "origin_cityName": "Chengdu",
            "origin": hub.name,
            "destination_cityName": "Chengdu",
            "destination": "Chengdu",
        },
    )
    walk = geo.local_route("Walking", hub.latitude, hub.longitude, city["latitude"], city["longitude"])
    assert got[0] == {"mode": "Walking", "distance_km": walk.distance_km, "duration_min": walk.duration_min}
    inter = call_ok(
        world,
        "MapGuide",
        {
            "origin_cityName": "Beijing",
            "origin": "Beijing",
            "destination_cityName": "Shanghai",
            "destination": "Shanghai",
        },
    )
    modes = {g["mode"]: g for g in inter}
    bj, sh = world.city("Beijing"), world.city("Shanghai")
    drive = geo.intercity_drive(bj["latitude"], bj["longitude"], sh["latitude"], sh["longitude"])
    assert modes["Driving"] == {
        "mode": "Driving",
        "distance_km": drive.distance_km,
        "duration_min": drive.duration_min,
    }
    fastest = db.execute(
        "SELECT MIN(duration_min) FROM trains WHERE origin_city = 'Beijing' AND "
        "destination_city = 'Shanghai' AND train_type = 'High-speed Rail'"
    ).fetchone()[0]
    assert modes["High-speed Rail"]["fastest_min"] == fastest
    assert modes["Airplane"]["daily_flights"] > 0


def test_responses_respect_the_character_budget(world):
    for name, args in [
        ("AccommodationSearch", {"city": "Beijing", "n": 20}),
        (
            "FlightSearch",
            {"origin": "Beijing", "destination": "Chengdu", "departure_date": "2026-04-01", "n": 20},
        ),
        ("RestaurantSearch", {"city": "Beijing", "n": 20}),
    ]:
        res = world.call_tool(name, args)
        assert not res.is_error and len(res.text) <= RESPONSE_CHAR_BUDGET + 120, name
    assert "omitted" in world.call_tool("AccommodationSearch", {"city": "Beijing", "n": 20}).text


INVALID_CALLS = [
    ("NoSuchTool", {}, "unknown tool"),
    ("RestaurantSearch", "city=Beijing", "must be a JSON object"),
    ("RestaurantSearch", {}, "missing required argument 'city'"),
    ("RestaurantSearch", {"city": "Beijing", "colour": "red"}, "unknown argument(s) ['colour']"),
    ("RestaurantSearch", {"city": 42}, "'city' must be a string"),
    ("RestaurantSearch", {"city": "Beijing", "n": "5"}, "'n' must be an integer"),
    ("RestaurantSearch", {"city": "Beijing", "n": True}, "'n' must be an integer"),
    ("RestaurantSearch", {"city": "Beijing", "n": 0}, "n must be between 1 and 20"),
    ("RestaurantSearch", {"city": "Beijing", "n": 21}, "n must be between 1 and 20"),
    ("RestaurantSearch", {"city": "Gotham"}, "unknown city 'Gotham'"),
    ("RestaurantSearch", {"city": "Beijing", "preferences": {"cuisine": ["Pizza"]}}, "invalid value 'Pizza'"),
    (
        "RestaurantSearch",
        {"city": "Beijing", "preferences": {"star_rating": ["5-Star/Luxury"]}},
        "unknown key(s) ['star_rating']",
    ),
    ("RestaurantSearch", {"city": "Beijing", "preferences": {"cuisine": 3}}, "must be a list of strings"),
    ("RestaurantSearch", {"city": "Beijing", "preferences": ["Hot Pot"]}, "'preferences' must be an object"),
    ("RestaurantSearch", {"city": "Beijing", "open_at": "25:00"}, "open_at must be a time"),
    ("RestaurantSearch", {"city": "Beijing", "min_price": 200, "max_price": 100}, "above max_price"),
    ("RestaurantSearch", {"city": "Beijing", "near": "Nowhere Plaza"}, "unknown place 'Nowhere Plaza'"),
    ("RestaurantSearch", {"city": "Beijing", "near": "31.23,121.47"}, "are not in Beijing"),
    ("AccommodationSearch", {"city": "Beijing", "open_at": "10:00"}, "unknown argument(s) ['open_at']"),
    (
        "FlightSearch",
        {"origin": "Beijing", "destination": "Shanghai", "departure_date": "2026-02-30"},
        "not a real calendar date",
    ),
    (
        "FlightSearch",
        {"origin": "Beijing", "destination": "Shanghai", "departure_date": "01/05/2026"},
        "must be a date",
    ),
    (
        "FlightSearch",
        {"origin": "Beijing", "destination": "Shanghai", "departure_date": "2030-01-01"},
        "outside the available dates",
    ),
    (
        "FlightSearch",
        {"origin": "Beijing", "destination": "Beijing", "departure_date": "2026-05-01"},
        "both Beijing",
    ),
    ("TrainSearch", {"origin": "Beijing", "destination": "Atlantis"}, "unknown destination city 'Atlantis'"),
    ("TrainSearch", {"origin": "Beijing", "destination": "Shanghai", "depart_after": "7am"}, "depart_after"),
    ("WeatherSearch", {"city": "Beijing", "date": "2026-13-01"}, "not a real calendar date"),
    (
        "MapGuide",
        {
            "origin_cityName": "Beijing",
            "origin": "Forbidden Palace Hotel X",
            "destination_cityName": "Beijing",
            "destination": "Beijing",
        },
        "unknown place",
    ),
    ("MapGuide", {"origin_cityName": "Beijing", "origin": "Beijing"}, "missing required argument"),
    ("Python", {"code": 5}, "'code' must be a string"),
]


@pytest.mark.parametrize(
    "name,args,message", INVALID_CALLS, ids=[f"{c[0]}-{i}" for i, c in enumerate(INVALID_CALLS)]
)
def test_invalid_calls_return_errors_without_raising(world, name, args, message):
    res = world.call_tool(name, args)
    assert res.is_error and res.text.startswith("Error: ")
    assert message in res.text, res.text


def test_arguments_nested_past_the_recursion_limit_are_an_error(world):
    deep: list = []
    for _ in range(10_000):
        deep = [deep]
    for args in ({"city": deep}, {"city": "Chengdu", "preferences": {"cuisine": deep}}):
        res = world.call_tool("RestaurantSearch", args)
        assert res.is_error and "nested more than 32 levels deep" in res.text


def test_lenient_but_exact_vocabulary_matching(world):
    a = world.call_tool("RestaurantSearch", {"city": "beijing", "preferences": {"price_level": "luxury"}})
    b = world.call_tool(
        "RestaurantSearch", {"city": "北京", "preferences": {"price_level": ["Luxury (300-500 CNY/person)"]}}
    )
    assert not a.is_error and a.text == b.text
    ambiguous = world.call_tool("RestaurantSearch", {"city": "Beijing", "preferences": {"cuisine": "Other"}})
    assert ambiguous.is_error


def test_calls_from_a_thread_pool_match_serial_results(world):
    calls = [("RestaurantSearch", {"city": c, "n": 3}) for c in world.city_names()] + [
        ("TrainSearch", {"origin": "Beijing", "destination": c}) for c in world.city_names() if c != "Beijing"
    ]
    serial = [world.call_tool(n, a).text for n, a in calls]
    with ThreadPoolExecutor(max_workers=8) as pool:
        parallel = list(pool.map(lambda call: world.call_tool(*call).text, calls))
    assert parallel == serial


def test_python_tool_delegates_to_the_sandbox(store):
    from sandbox.python_tool import PythonSandbox

    with PythonSandbox(num_workers=1, isolation="unsafe-ok") as pool:  # unsafe-ok: also runs without root
        world = open_world(store, python_tool=pool)
        res = world.call_tool("Python", {"code": "print(sum(range(10)))"})
        assert not res.is_error and res.text.strip().endswith("45")
        assert world.call_tool("Python", {"code": "1/0"}).is_error


def test_search_prices_are_consistent_with_levels(world):
    for level in vocab.PRICE_LEVELS:
        low, high = vocab.PRICE_LEVEL_RANGE[level]
        for g in call_ok(
            world, "RestaurantSearch", {"city": "Guilin", "n": 20, "preferences": {"price_level": [level]}}
        ):
            assert low <= g["price_per_person"] <= high and g["price_level"] == level
    assert not math.isnan(call_ok(world, "AccommodationSearch", {"city": "Guilin"})[0]["rating"])
