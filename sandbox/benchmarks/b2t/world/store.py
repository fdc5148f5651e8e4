"""Read-only access to a world store: the SQL lookups the tools, the evaluator and the planner read.

The SQLite file is opened with `mode=ro`, one connection per (process, thread): tools run from a
thread pool inside rollout workers, and SQLite connections must not cross threads or forks.
Lookups return plain dicts with JSON columns decoded (lists/dicts), so callers never parse JSON.
"""

import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from sandbox.benchmarks.b2t.schema import POI_TABLES, SCHEMA_VERSION
from sandbox.benchmarks.b2t.world.integrity import verify_store_once

JSON_COLUMNS = frozenset(
    {"environment", "reviews", "facilities", "room_info", "ticket_info", "fares", "airports", "stations"}
)


def decode_row(row: sqlite3.Row) -> dict[str, Any]:
    """sqlite3.Row -> dict, JSON text columns parsed."""
    out = dict(row)
    for key in JSON_COLUMNS.intersection(out):
        out[key] = json.loads(out[key])
    return out


def _normalize(name: str) -> str:
    return " ".join(name.replace("'", "").replace("’", "").casefold().split())


class World:
    """A world store opened read-only. Safe to share between threads; reopen after fork is automatic.

    Opening verifies the store (`sandbox.benchmarks.b2t.world.integrity`: the build-time content
    hash, or SQLite's
    quick check for a store without one; 0.2 s small, 0.8 s full) and raises StoreCorruptError
    naming the file.
    `verify=False` skips that, e.g. in worker processes of a store the parent already checked.
    The agent's tools over it are `sandbox.benchmarks.b2t.tools.registry.B2TTools`.
    """

    def __init__(self, path: str | os.PathLike, verify: bool = True):
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(
                f"world store {self.path} not found; build it with `python launch/make_data.py --out DIR`"
            )
        self._local = threading.local()
        self._name_index: dict[tuple[str, str], dict[str, str]] = {}  # filled lazily; dict writes are atomic
        if verify:
            verify_store_once(self.path)
        self.meta = {r["key"]: r["value"] for r in self.query("SELECT key, value FROM meta")}
        if self.meta.get("schema_version") != str(SCHEMA_VERSION):
            raise ValueError(
                f"{self.path}: schema version {self.meta.get('schema_version')!r}, "
                f"this code reads {SCHEMA_VERSION}; rebuild the store"
            )
        self.date_start, self.date_end = self.meta.get("date_start", ""), self.meta.get("date_end", "")
        self._cities = {r["name"]: decode_row(r) for r in self.query("SELECT * FROM cities ORDER BY name")}
        self._city_alias: dict[str, str] = {}
        for name, city in self._cities.items():
            self._city_alias[_normalize(name)] = name
            self._city_alias[_normalize(city["name_zh"])] = name

    def __reduce__(self):
        """Pickles as its path, so a World can be sent to worker processes (which reopen the file
        without verifying it again)."""
        return (World, (self.path, False))

    def __repr__(self) -> str:
        return f"World({str(self.path)!r}, scale={self.meta.get('scale')!r}, seed={self.meta.get('seed')!r})"

    # -- connections -------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != os.getpid():
            conn = sqlite3.connect(f"file:{self.path.resolve()}?mode=ro", uri=True, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute("PRAGMA query_only=ON")
            conn.execute("PRAGMA cache_size=-65536")  # 64 MiB page cache per connection
            conn.execute("PRAGMA mmap_size=1073741824")
            self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def query(self, sql: str, params: tuple | list = ()) -> list[sqlite3.Row]:
        """Run a read-only SQL query on this thread's connection."""
        return self._conn().execute(sql, params).fetchall()

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- lookups -----------------------------------------------------------------------------
    def resolve_city(self, name: str) -> str | None:
        """Canonical city name for an English or Chinese name in any case; None if unknown."""
        return self._city_alias.get(_normalize(name)) if isinstance(name, str) else None

    def cities(self) -> list[dict[str, Any]]:
        return [dict(c) for c in self._cities.values()]

    def city_names(self) -> list[str]:
        return list(self._cities)

    def city(self, name: str) -> dict[str, Any] | None:
        canonical = self.resolve_city(name)
        return dict(self._cities[canonical]) if canonical else None

    def find_poi(self, kind: str, city: str, name: str) -> dict[str, Any] | None:
        """The POI of `kind` (restaurant/hotel/attraction/entertainment) named `name` in `city`.

        Exact name first (indexed), then a case/space/apostrophe-insensitive match; None when absent.
        """
        table = POI_TABLES.get(kind)
        canonical = self.resolve_city(city)
        if table is None or canonical is None or not isinstance(name, str):
            return None
        rows = self.query(f"SELECT * FROM {table} WHERE city = ? AND name = ?", (canonical, name))
        if not rows:
            poi_id = self._normalized_names(table, canonical).get(_normalize(name))
            rows = self.query(f"SELECT * FROM {table} WHERE id = ?", (poi_id,)) if poi_id else []
        return decode_row(rows[0]) if rows else None

    def _normalized_names(self, table: str, city: str) -> dict[str, str]:
        """normalized name -> id for one table and city, built on first use (names are unique per city)."""
        key = (table, city)
        index = self._name_index.get(key)
        if index is None:
            rows = self.query(f"SELECT id, name FROM {table} WHERE city = ? ORDER BY id DESC", (city,))
            index = {_normalize(r["name"]): r["id"] for r in rows}
            self._name_index[key] = index
        return index

    def find_any_poi(self, city: str, name: str) -> tuple[str, dict[str, Any]] | None:
        """(kind, POI) for a name of any kind in the city: exact matches in every kind before loose ones."""
        canonical = self.resolve_city(city)
        if canonical is None or not isinstance(name, str):
            return None
        for kind, table in POI_TABLES.items():
            rows = self.query(f"SELECT * FROM {table} WHERE city = ? AND name = ?", (canonical, name))
            if rows:
                return kind, decode_row(rows[0])
        for kind in POI_TABLES:
            poi = self.find_poi(kind, canonical, name)
            if poi is not None:
                return kind, poi
        return None

    def poi_by_id(self, poi_id: str) -> tuple[str, dict[str, Any]] | None:
        prefix = {"R": "restaurant", "H": "hotel", "A": "attraction", "E": "entertainment"}
        kind = prefix.get(poi_id.split("-", 1)[0]) if isinstance(poi_id, str) else None
        if kind is None:
            return None
        rows = self.query(f"SELECT * FROM {POI_TABLES[kind]} WHERE id = ?", (poi_id,))
        return (kind, decode_row(rows[0])) if rows else None

    def trains(self, origin: str, destination: str, train_number: str | None = None) -> list[dict[str, Any]]:
        """Daily trains origin -> destination (ordered by departure), optionally one train number."""
        o, d = self.resolve_city(origin), self.resolve_city(destination)
        sql = "SELECT * FROM trains WHERE origin_city = ? AND destination_city = ?"
        params: list[Any] = [o, d]
        if train_number is not None:
            sql += " AND train_number = ?"
            params.append(train_number)
        return [decode_row(r) for r in self.query(sql + " ORDER BY departure_time, train_number", params)]

    def flights(
        self,
        origin: str,
        destination: str,
        date: str,
        flight_number: str | None = None,
        cabin_class: str | None = None,
    ) -> list[dict[str, Any]]:
        """Flights origin -> destination departing on `date` (ordered by time, then price)."""
        o, d = self.resolve_city(origin), self.resolve_city(destination)
        sql = "SELECT * FROM flights WHERE origin_city = ? AND destination_city = ? AND departure_date = ?"
        params: list[Any] = [o, d, date]
        if flight_number is not None:
            sql += " AND flight_number = ?"
            params.append(flight_number)
        if cabin_class is not None:
            sql += " AND cabin_class = ?"
            params.append(cabin_class)
        return [decode_row(r) for r in self.query(sql + " ORDER BY departure_time, total_price, id", params)]

    def weather(self, city: str, date: str) -> dict[str, Any] | None:
        rows = self.query(
            "SELECT * FROM weather WHERE city = ? AND date = ?", (self.resolve_city(city), date)
        )
        return dict(rows[0]) if rows else None


def open_world(path: str | os.PathLike, verify: bool = True) -> World:
    """Open a world store read-only. `path` is the .sqlite file or the data directory holding world.sqlite."""
    path = Path(path)
    if path.is_dir():
        path = path / "world.sqlite"
    return World(path, verify=verify)
