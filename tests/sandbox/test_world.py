"""World generator, store and loader: determinism, vocabulary coverage, record invariants, round trip."""

import csv
import hashlib
import json
import pickle
import sqlite3

import pytest

from b2tjax.cli.make_data import main as make_data_main
from sandbox.benchmarks.b2t import geo, vocab
from sandbox.benchmarks.b2t.schema import TABLES
from sandbox.benchmarks.b2t.tools.registry import B2TTools
from sandbox.benchmarks.b2t.world.cities import CITIES
from sandbox.benchmarks.b2t.world.generator import build_world
from sandbox.benchmarks.b2t.world.loader import DataFileError, build_store_from_files, export_store_to_jsonl
from sandbox.benchmarks.b2t.world.scales import SCALES
from sandbox.benchmarks.b2t.world.store import open_world
from sandbox.benchmarks.b2t.world.transport import RAIL_DETOUR, TRAIN_CLASSES
from tests.sandbox_fixtures import small_world_file


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The small world built through the CLI, as instance and evaluator code will build it."""
    out = tmp_path_factory.mktemp("data")
    assert make_data_main(["--out", str(out), "--scale", "small", "--seed", "0", "--world-only"]) == 0
    return out / "world.sqlite"


@pytest.fixture(scope="module")
def db(store):
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    yield conn
    conn.close()


@pytest.mark.slow
def test_same_seed_builds_byte_identical_store_and_other_seed_differs(store, tmp_path, tmp_path_factory):
    again = small_world_file(tmp_path_factory)  # build_world by one worker; `store`: 2 (the CLI's)
    build_world(tmp_path / "other.sqlite", "small", seed=1)
    assert _sha256(again) == _sha256(store)
    assert _sha256(tmp_path / "other.sqlite") != _sha256(store)


def test_every_table_is_populated_with_the_scale_counts(db):
    scale = SCALES["small"]
    counts = {t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
    assert counts["cities"] == 24
    assert counts["restaurants"] == 24 * scale.restaurants
    assert counts["hotels"] == 24 * scale.hotels
    assert counts["attractions"] == 24 * scale.attractions
    assert counts["entertainment"] == 24 * scale.entertainment
    assert counts["weather"] == 24 * 184  # 2026-03-01 .. 2026-08-31
    assert counts["trains"] > 0 and counts["flights"] > 0
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    assert meta["scale"] == "small" and meta["seed"] == "0"
    assert (meta["date_start"], meta["date_end"]) == ("2026-03-01", "2026-08-31")


def _values_per_city(db, sql: str) -> dict[str, set]:
    out: dict[str, set] = {}
    for city, value in db.execute(sql):
        out.setdefault(city, set()).add(value)
    return out


def test_every_vocabulary_value_has_pois_in_every_city(db):
    cities = {c.name for c in CITIES}
    checks = [
        ("SELECT city, secondary_category FROM hotels", set(vocab.STAR_LEVELS)),
        ("SELECT city, j.value FROM hotels, json_each(hotels.facilities) j", set(vocab.HOTEL_FACILITIES)),
        (
            "SELECT city, secondary_category || '|' || j.value FROM hotels, json_each(hotels.facilities) j",
            {f"{s}|{f}" for s in vocab.STAR_LEVELS for f in vocab.HOTEL_FACILITIES},
        ),
        ("SELECT city, attraction_type FROM attractions", set(vocab.ATTRACTION_TYPES)),
        (
            "SELECT city, secondary_category || '|' || price_level FROM restaurants",
            {f"{c}|{p}" for c in vocab.CUISINES for p in vocab.PRICE_LEVELS},
        ),
        (
            "SELECT city, j.value FROM restaurants, json_each(restaurants.environment) j",
            set(vocab.DINING_ENVIRONMENTS),
        ),
        ("SELECT city, categories FROM entertainment", set(vocab.ENTERTAINMENT_TYPES)),
    ]
    for sql, expected in checks:
        per_city = _values_per_city(db, sql)
        assert set(per_city) == cities, sql
        for city, values in per_city.items():
            assert expected <= values, (sql, city, sorted(expected - values))
    # Each walking tolerance level is satisfiable in every city.
    low = _values_per_city(db, "SELECT city, 1 FROM attractions WHERE walking_km <= 3.0")
    assert set(low) == cities
    assert {r[0] for r in db.execute("SELECT DISTINCT cabin_class FROM flights")} == set(vocab.FLIGHT_CABINS)
    for (fares,) in db.execute("SELECT fares FROM trains"):
        assert set(json.loads(fares)) == set(vocab.TRAIN_SEATS)


def test_poi_records_are_consistent(db):
    centre = {c.name: (c.latitude, c.longitude) for c in CITIES}
    for table in ("restaurants", "hotels", "attractions", "entertainment"):
        rows = db.execute(f"SELECT * FROM {table}").fetchall()
        names = [(r["city"], r["name"]) for r in rows]
        assert len(names) == len(set(names)), f"{table}: duplicate names within a city"
        for r in rows:
            assert geo.haversine_km(r["latitude"], r["longitude"], *centre[r["city"]]) <= 15.0
            assert 1.0 <= r["avg_rating"] <= 5.0
            if table != "hotels":
                assert r["open_time"] < r["close_time"] <= "24:00"
        if table != "attractions":
            for city in centre:
                ranks = sorted(r["rating_rank"] for r in rows if r["city"] == city)
                assert ranks == list(range(1, len(ranks) + 1))
    for r in db.execute("SELECT * FROM restaurants"):
        low, high = vocab.PRICE_LEVEL_RANGE[r["price_level"]]
        assert low <= r["avg_price"] <= high
        assert 2 <= len(json.loads(r["reviews"])) <= 3
    for r in db.execute("SELECT * FROM hotels"):
        facilities = json.loads(r["facilities"])
        assert r["wifi"] == ("Free WiFi" in facilities)
        assert (r["parking"] != "No parking") == ("Parking" in facilities)
        rooms = json.loads(r["room_info"])
        assert min(room["price"] for room in rooms) == r["avg_price"]
    for r in db.execute("SELECT * FROM attractions"):
        assert 60 <= r["recommended_duration_min"] <= 240
        tickets = json.loads(r["ticket_info"])
        assert tickets[0]["price"] == r["avg_price"]


def test_trains_follow_distance_and_every_city_reaches_every_other(db):
    coords = {c.name: (c.latitude, c.longitude) for c in CITIES}
    day_trip_pairs = set()
    for r in db.execute("SELECT * FROM trains"):
        rail_km = geo.haversine_km(*coords[r["origin_city"]], *coords[r["destination_city"]]) * RAIL_DETOUR
        speed = TRAIN_CLASSES[r["train_number"][0]][1]
        expected = 60 * rail_km / speed + 10
        assert 0.9 * expected <= r["duration_min"] <= 1.1 * expected
        dep_h, dep_m = map(int, r["departure_time"].split(":"))
        arrival = dep_h * 60 + dep_m + r["duration_min"]
        assert r["arrival_day_offset"] == arrival // 1440
        assert r["arrival_time"] == f"{arrival % 1440 // 60:02d}:{arrival % 60:02d}"
        if r["train_type"] == "High-speed Rail" and r["departure_time"] >= "06:00" and arrival <= 23 * 60:
            day_trip_pairs.add((r["origin_city"], r["destination_city"]))
    pairs = {(a.name, b.name) for a in CITIES for b in CITIES if a != b}
    served = {
        tuple(r)
        for r in db.execute(
            "SELECT DISTINCT origin_city, destination_city FROM trains WHERE train_type = 'High-speed Rail'"
        )
    }
    assert served == pairs
    # Every pair whose high-speed trip is under 15 hours has a daytime train avoiding 23:00-06:00.
    short = {
        (a, b)
        for a, b in pairs
        if db.execute(
            "SELECT MIN(duration_min) FROM trains WHERE origin_city=? AND destination_city=? "
            "AND train_type='High-speed Rail'",
            (a, b),
        ).fetchone()[0]
        < 15 * 60
    }
    assert short and short <= day_trip_pairs


def test_flights_are_consistent_and_avoid_night(db):
    rows = db.execute("SELECT * FROM flights WHERE departure_date = '2026-05-01'").fetchall()
    assert rows
    for r in rows:
        assert r["total_price"] == r["adult_fare"] + r["fuel_surcharge"] + r["airport_fee"]
        assert "06:00" <= r["departure_time"] and r["arrival_time"] <= "23:00"
        assert r["arrival_date"] == r["departure_date"]
        assert r["origin_city"] != r["destination_city"]
    # Every city has flights to and from the hubs at small scale.
    flown = {r["origin_city"] for r in rows} | {r["destination_city"] for r in rows}
    assert len(flown) >= 20


def test_weather_covers_every_city_and_day(db):
    rows = db.execute(
        "SELECT city, COUNT(*), MIN(date), MAX(date), SUM(min_temp > max_temp) FROM weather GROUP BY city"
    ).fetchall()
    assert len(rows) == 24
    for _, count, first, last, inverted in rows:
        assert (count, first, last, inverted) == (184, "2026-03-01", "2026-08-31", 0)
    harbin = db.execute(
        "SELECT AVG(max_temp) FROM weather WHERE city='Harbin' AND date LIKE '2026-03%'"
    ).fetchone()[0]
    sanya = db.execute(
        "SELECT AVG(max_temp) FROM weather WHERE city='Sanya' AND date LIKE '2026-03%'"
    ).fetchone()[0]
    assert sanya > harbin + 15


def test_store_lookups(store, db):
    world = open_world(store.parent)
    assert len(world.cities()) == 24 and world.city("成都")["name"] == "Chengdu"
    clone = pickle.loads(pickle.dumps(world))  # worker processes receive the world by path
    assert clone.path == world.path and clone.city("Chengdu") == world.city("Chengdu")
    row = db.execute("SELECT name, id FROM hotels WHERE city = 'Chengdu' LIMIT 1").fetchone()
    poi = world.find_poi("hotel", "chengdu", row["name"].upper())
    assert poi["id"] == row["id"] and isinstance(poi["facilities"], list)
    assert world.find_poi("hotel", "Chengdu", "No Such Hotel") is None
    assert world.find_poi("restaurant", "Chengdu", row["name"]) is None
    train = db.execute(
        "SELECT * FROM trains WHERE origin_city='Beijing' AND destination_city='Shanghai'"
    ).fetchone()
    found = world.trains("Beijing", "Shanghai", train["train_number"])
    assert len(found) == 1 and found[0]["fares"] == json.loads(train["fares"])
    assert world.weather("Chengdu", "2026-05-01")["city"] == "Chengdu"
    assert world.weather("Chengdu", "2030-01-01") is None
    with pytest.raises(sqlite3.OperationalError):  # the store is read-only
        world.query("DELETE FROM cities")


FLIGHTS_KEPT = 3000  # the round trip keeps the test fast by loading only the first flights


def _export(store, directory):
    export_store_to_jsonl(store, directory)
    flights = directory / "flights.jsonl"
    flights.write_text("".join(flights.read_text().splitlines(keepends=True)[:FLIGHTS_KEPT]))


@pytest.mark.slow
def test_loader_round_trip_reproduces_every_row(store, tmp_path):
    _export(store, tmp_path / "tables")
    assert make_data_main(["--out", str(tmp_path / "data"), "--from-jsonl", str(tmp_path / "tables")]) == 0
    rebuilt = tmp_path / "data" / "world.sqlite"
    a, b = sqlite3.connect(store), sqlite3.connect(rebuilt)
    for table in TABLES:
        limit = f" LIMIT {FLIGHTS_KEPT}" if table == "flights" else ""
        # Each store carries the content hash of its own file (checked when it is opened below).
        where = " WHERE key != 'content_sha256'" if table == "meta" else ""
        assert (
            a.execute(f"SELECT * FROM {table}{where} ORDER BY rowid{limit}").fetchall()
            == b.execute(f"SELECT * FROM {table}{where} ORDER BY rowid").fetchall()
        ), table
    assert (
        B2TTools(open_world(rebuilt))
        .call_tool("WeatherSearch", {"city": "Chengdu", "date": "2026-05-01"})
        .text
        == B2TTools(open_world(store))
        .call_tool("WeatherSearch", {"city": "Chengdu", "date": "2026-05-01"})
        .text
    )


@pytest.mark.slow
def test_loader_reads_csv_and_reports_bad_files(store, tmp_path):
    _export(store, tmp_path)
    # Rewrite cities as CSV: numbers arrive as strings and must be converted back.
    lines = [json.loads(x) for x in (tmp_path / "cities.jsonl").read_text().splitlines()]
    (tmp_path / "cities.jsonl").unlink()
    with (tmp_path / "cities.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(lines[0]))
        writer.writeheader()
        writer.writerows(lines)
    build_store_from_files(tmp_path, tmp_path / "ok.sqlite")
    conn = sqlite3.connect(tmp_path / "ok.sqlite")
    assert conn.execute("SELECT typeof(latitude), latitude FROM cities WHERE name='Beijing'").fetchone() == (
        "real",
        39.9042,
    )
    # A bad value is named in the error, with the file and line.
    broken = [dict(x) for x in lines]
    broken[3]["latitude"] = ""
    with (tmp_path / "cities.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(lines[0]))
        writer.writeheader()
        writer.writerows(broken)
    with pytest.raises(DataFileError, match=r"cities.csv:5: column 'latitude': expected real, got ''"):
        build_store_from_files(tmp_path, tmp_path / "bad.sqlite")
    # A row with more fields than the header is named, not a crash.
    with (tmp_path / "cities.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(lines[0]))
        writer.writeheader()
        writer.writerows(lines)
        csv.writer(f).writerow([*lines[0].values(), "extra"])
    with pytest.raises(DataFileError, match=r"cities.csv:26: 1 more field\(s\) than the header row"):
        build_store_from_files(tmp_path, tmp_path / "bad.sqlite")
    (tmp_path / "cities.csv").unlink()
    with pytest.raises(DataFileError, match="missing data file for table 'cities'"):
        build_store_from_files(tmp_path, tmp_path / "bad.sqlite")
    (tmp_path / "cities.jsonl").write_text(json.dumps({"name": "X"}) + "\n")
    with pytest.raises(DataFileError, match=r"cities.jsonl:1: missing columns \['name_zh'"):
        build_store_from_files(tmp_path, tmp_path / "bad.sqlite")
    # A line that is not a JSON object is named by file and line (blank lines still count).
    (tmp_path / "cities.jsonl").write_text("\n{oops\n")
    with pytest.raises(DataFileError, match=r"cities.jsonl:2: not valid JSON"):
        build_store_from_files(tmp_path, tmp_path / "bad.sqlite")
    (tmp_path / "cities.jsonl").write_text("[1, 2]\n")
    with pytest.raises(DataFileError, match=r"cities.jsonl:1: expected a JSON object, got list"):
        build_store_from_files(tmp_path, tmp_path / "bad.sqlite")


def _corrupt_copy(store, path, first_page: int = 40):
    """A copy of the store with 1 MB of (seeded) random bytes written over its restaurant pages."""
    import random
    import shutil

    shutil.copy(store, path)
    with open(path, "r+b") as f:
        f.seek(first_page * 4096)
        f.write(random.Random(0).randbytes(1 << 20))
    return path


def test_a_damaged_store_is_refused_when_opened(store, tmp_path):
    import shutil

    from sandbox.benchmarks.b2t.world.integrity import StoreCorruptError

    assert len(open_world(store).meta["content_sha256"]) == 64  # intact: opens
    with pytest.raises(StoreCorruptError, match="content hash differs"):
        open_world(_corrupt_copy(store, tmp_path / "random.sqlite"))
    # One changed letter inside a value leaves SQLite's structure intact; the hash still sees it.
    edited = tmp_path / "edited.sqlite"
    shutil.copy(store, edited)
    name = sqlite3.connect(store).execute("SELECT name FROM restaurants LIMIT 1").fetchone()[0].encode()
    data = edited.read_bytes()
    assert data.count(name) >= 1
    edited.write_bytes(data.replace(name, name[:-1] + (b"X" if name[-1:] != b"X" else b"Y"), 1))
    with pytest.raises(StoreCorruptError, match=f"{edited}.*content hash differs"):
        open_world(edited)
    # A store without the hash (built before it existed) gets SQLite's quick check instead.
    old = tmp_path / "old.sqlite"
    shutil.copy(store, old)
    with sqlite3.connect(old) as conn:
        conn.execute("DELETE FROM meta WHERE key = 'content_sha256'")
    open_world(old)
    damaged = _corrupt_copy(old, tmp_path / "old-random.sqlite")
    with pytest.raises(StoreCorruptError, match=f"world store {damaged} is (corrupt|unreadable)"):
        open_world(damaged)


def test_store_errors_in_a_tool_call_are_environment_faults_not_agent_errors(store, tmp_path):
    from sandbox.env import EpisodeEnv

    world = B2TTools(open_world(_corrupt_copy(store, tmp_path / "random.sqlite"), verify=False))
    results = {c: world.call_tool("RestaurantSearch", {"city": c}) for c in world.store.city_names()}
    faulty = [c for c, r in results.items() if r.env_fault]
    assert faulty and not any(r.is_error for r in results.values())
    assert "could not read the travel database" in results[faulty[0]].text
    env = EpisodeEnv(world)
    call = {"name": "RestaurantSearch", "arguments": {"city": faulty[0]}}
    step = env.step(f"<tool_call>{json.dumps(call)}</tool_call>")
    assert step.responses[0].env_fault and step.any_env_fault and not step.any_error
