"""Read-only, cached access to the world store for the evaluator.

The evaluator runs on every RL rollout, so it must not issue one SQL query per plan item: the
POIs of a (kind, city) are loaded once into a dict keyed by normalised name, and transport and
weather queries are memoised. One `WorldIndex` exists per store file per process (`index_for`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sandbox.benchmarks.b2t.plan import normalize_name, time_to_minutes
from sandbox.benchmarks.b2t.world.integrity import verify_store_once


@dataclass(frozen=True)
class Poi:
    """What the checks need of one POI record."""

    kind: str  # "restaurant" | "hotel" | "attraction" | "entertainment"
    name: str
    latitude: float
    longitude: float
    open_min: int | None  # business hours as minutes after midnight (None: unknown)
    close_min: int | None
    category: str  # cuisine / star level / attraction type / entertainment type
    avg_price: float  # per person (hotel: per room and night)
    environment: frozenset[str] = frozenset()  # restaurants
    facilities: frozenset[str] = frozenset()  # hotels
    walking_km: float = 0.0  # attractions


@dataclass(frozen=True)
class CityInfo:
    name: str
    latitude: float
    longitude: float


@dataclass(frozen=True)
class TrainService:
    number: str
    train_type: str
    origin_city: str
    destination_city: str
    departure_time: str
    arrival_time: str
    fares: dict[str, float]


@dataclass(frozen=True)
class FlightService:
    number: str
    origin_city: str
    destination_city: str
    departure_time: str
    arrival_time: str
    cabin_class: str
    total_price: float


@dataclass(frozen=True)
class WeatherRecord:
    condition: str
    max_temp: float
    min_temp: float


_POI_QUERIES = {
    "restaurant": "SELECT name, latitude, longitude, open_time, close_time, secondary_category, "
    "avg_price, environment FROM restaurants WHERE city = ?",
    "hotel": "SELECT name, latitude, longitude, business_hours, secondary_category, avg_price, "
    "facilities, wifi FROM hotels WHERE city = ?",
    "attraction": "SELECT name, latitude, longitude, open_time, close_time, attraction_type, "
    "avg_price, walking_km FROM attractions WHERE city = ?",
    "entertainment": "SELECT name, latitude, longitude, open_time, close_time, categories, "
    "avg_price FROM entertainment WHERE city = ?",
}


def _hours(text: str) -> tuple[int | None, int | None]:
    start, _, end = (text or "").partition("-")
    return time_to_minutes(start.strip()), time_to_minutes(end.strip())


def _json_list(text: str) -> list:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return []
    return value if isinstance(value, list) else []


def _poi_from_row(kind: str, row: tuple) -> Poi:
    name, lat, lon = row[0], row[1], row[2]
    if kind == "hotel":
        open_min, close_min = _hours(row[3])
        facilities = set(_json_list(row[6]))
        if row[7]:
            facilities.add("Free WiFi")
        return Poi(
            kind, name, lat, lon, open_min, close_min, row[4], float(row[5]), facilities=frozenset(facilities)
        )
    open_min, close_min = time_to_minutes(row[3]), time_to_minutes(row[4])
    common = (kind, name, lat, lon, open_min, close_min, row[5], float(row[6]))
    if kind == "restaurant":
        return Poi(*common, environment=frozenset(_json_list(row[7])))
    if kind == "attraction":
        return Poi(*common, walking_km=float(row[7]))
    return Poi(*common)


class WorldIndex:
    """Cached lookups on one store file (read-only connection, usable from any thread)."""

    def __init__(self, path: str):
        self.path = path
        # Judging against an edited store (prices set to 99,999) must fail as opening it does.
        verify_store_once(path)
        self._conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        self._lock = threading.Lock()
        self._pois: dict[tuple[str, str], dict[str, Poi]] = {}
        self._cities: dict[str, CityInfo] | None = None
        self.train = lru_cache(maxsize=4096)(self._train)
        self.flight = lru_cache(maxsize=65536)(self._flight)
        self.weather = lru_cache(maxsize=65536)(self._weather)

    def _query(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._lock:
            return self._conn.execute(sql, args).fetchall()

    def pois(self, kind: str, city: str) -> dict[str, Poi]:
        """Every POI of a kind in a city, keyed by normalised name (first record wins)."""
        key = (kind, city)
        table = self._pois.get(key)
        if table is None:
            table = {}
            for row in self._query(_POI_QUERIES[kind], (city,)):
                table.setdefault(normalize_name(row[0]), _poi_from_row(kind, row))
            self._pois[key] = table
        return table

    def poi(self, kind: str, city: str, name: str) -> Poi | None:
        return self.pois(kind, city).get(normalize_name(name))

    def city(self, name: str) -> CityInfo | None:
        if self._cities is None:
            self._cities = {
                normalize_name(r[0]): CityInfo(*r)
                for r in self._query("SELECT name, latitude, longitude FROM cities")
            }
        return self._cities.get(normalize_name(name))

    def _train(self, number: str) -> tuple[TrainService, ...]:
        rows = self._query(
            "SELECT train_number, train_type, origin_city, destination_city, departure_time, "
            "arrival_time, fares FROM trains WHERE train_number = ?",
            (number,),
        )
        out = []
        for row in rows:
            try:
                fares = {str(k): float(v) for k, v in json.loads(row[6]).items()}
            except (TypeError, ValueError, AttributeError):
                fares = {}
            out.append(TrainService(*row[:6], fares=fares))
        return tuple(out)

    def _flight(self, number: str, date: str) -> tuple[FlightService, ...]:
        rows = self._query(
            "SELECT flight_number, origin_city, destination_city, departure_time, arrival_time, "
            "cabin_class, total_price FROM flights WHERE flight_number = ? AND departure_date = ?",
            (number, date),
        )
        return tuple(FlightService(*row) for row in rows)

    def _weather(self, city: str, date: str) -> WeatherRecord | None:
        rows = self._query(
            "SELECT weather, max_temp, min_temp FROM weather WHERE city = ? AND date = ?", (city, date)
        )
        return WeatherRecord(*rows[0]) if rows else None


_INDEXES: dict[tuple[str, float, int], WorldIndex] = {}
_INDEXES_LOCK = threading.Lock()


def store_path(world: Any) -> str:
    """The SQLite file behind a World object, a path, or a DATA directory."""
    if isinstance(world, WorldIndex):
        return world.path
    if isinstance(world, (str, os.PathLike)):
        path = os.fspath(world)
    else:
        path = next(
            (
                os.fspath(getattr(world, attr))
                for attr in ("path", "db_path", "store_path")
                if isinstance(getattr(world, attr, None), (str, os.PathLike))
            ),
            None,
        )
        if path is None:
            raise TypeError(
                f"cannot find the store file of {type(world).__name__}; pass a "
                "World, a WorldIndex or the path of world.sqlite"
            )
    if os.path.isdir(path):
        path = os.path.join(path, "world.sqlite")
    return os.path.abspath(path)


def index_for(world: Any) -> WorldIndex:
    """The cached index of a world (rebuilt when the store file changes on disk, and per process:
    an SQLite connection must not cross a fork)."""
    if isinstance(world, WorldIndex):
        return world
    path = store_path(world)
    key = (path, os.path.getmtime(path), os.getpid())
    index = _INDEXES.get(key)
    if index is None:
        with _INDEXES_LOCK:
            index = _INDEXES.get(key)
            if index is None:
                index = WorldIndex(path)
                _INDEXES[key] = index
    return index
