"""Deterministic builder of the world store: same seed and scale -> byte-identical SQLite file.

Determinism comes from per-part seeded `random.Random` streams (string seeds hash with SHA-512,
independent of PYTHONHASHSEED), a fixed city/kind iteration order, a fixed page size, no
timestamps, and inserting rows in generation order inside one transaction.
"""

import json
import logging
import os
import random
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

from sandbox.benchmarks.b2t.schema import INDEXES, SCHEMA_VERSION, TABLES
from sandbox.benchmarks.b2t.world import pois, transport, weather
from sandbox.benchmarks.b2t.world.cities import CITIES
from sandbox.benchmarks.b2t.world.integrity import stamp_content_hash
from sandbox.benchmarks.b2t.world.scales import SCALES, Scale
from sandbox.benchmarks.b2t.world.tables import table_columns
from sandbox.chunked import Workers

log = logging.getLogger(__name__)

PAGE_SIZE = 4096
GENERATOR_VERSION = "1"
POI_BUILDERS = (
    ("restaurants", pois.restaurants, "restaurants"),
    ("hotels", pois.hotels, "hotels"),
    ("attractions", pois.attractions, "attractions"),
    ("entertainment", pois.entertainment, "entertainment"),
)


def create_empty_store(path: Path) -> sqlite3.Connection:
    """A fresh store at `path` (replacing any file there) with every table and build-speed pragmas."""
    if path.exists():
        path.unlink()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    conn.execute("BEGIN")
    for ddl in TABLES.values():
        conn.execute(ddl)
    return conn


def insert_rows(conn: sqlite3.Connection, table: str, rows: Iterable[tuple]) -> int:
    """executemany of tuples in schema column order; returns how many rows went in."""
    columns = table_columns(table)
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
    before = conn.total_changes
    conn.executemany(sql, rows)
    return conn.total_changes - before


def finish_store(conn: sqlite3.Connection, meta: dict[str, str]) -> None:
    """Write meta, build the indexes after the bulk insert (faster), gather planner stats, close."""
    insert_rows(conn, "meta", sorted(meta.items()))
    for ddl in INDEXES:
        conn.execute(ddl)
    conn.execute("ANALYZE")
    conn.execute("COMMIT")
    conn.close()


def _city_rows() -> list[tuple]:
    return [
        (
            c.name,
            c.name_zh,
            c.province,
            c.latitude,
            c.longitude,
            c.description,
            json.dumps([{"name": n, "code": code} for n, code in c.airports], ensure_ascii=False),
            json.dumps(list(c.stations), ensure_ascii=False),
        )
        for c in CITIES
    ]


def build_world(
    path: str | os.PathLike, scale: str | Scale = "small", seed: int = 0, workers: int = 1
) -> dict[str, int]:
    """Generate the whole world into the SQLite file `path`; returns row counts per table.

    Writes to `path + ".tmp"` and renames at the end, so a reader never sees a half-built store.
    The POI rows are drawn by `workers` processes, a city of a table each (every one has its own
    stream), and inserted in the fixed order; trains, weather and flights stay in this process: one
    stream draws every flight row, and splitting it would change every store built so far.
    """
    scale = SCALES[scale] if isinstance(scale, str) else scale
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    started = time.perf_counter()
    conn = create_empty_store(tmp)
    counts = {"cities": insert_rows(conn, "cities", _city_rows())}
    with Workers(workers) as pool:
        for kind, (table, _, size) in enumerate(POI_BUILDERS):
            tasks = [(kind, city, getattr(scale, size), seed) for city in range(len(CITIES))]
            counts[table] = sum(insert_rows(conn, table, rows) for rows in pool.imap(_poi_rows, tasks))
            log.info("world: %s %d rows (%.1fs)", table, counts[table], time.perf_counter() - started)
    counts["trains"] = insert_rows(conn, "trains", transport.trains(scale, seed))
    counts["weather"] = insert_rows(conn, "weather", weather.weather_rows(scale, seed))
    counts["flights"] = insert_rows(conn, "flights", _with_progress(transport.flights(scale, seed), started))
    log.info("world: flights %d rows (%.1fs)", counts["flights"], time.perf_counter() - started)
    meta = {
        "schema_version": str(SCHEMA_VERSION),
        "generator_version": GENERATOR_VERSION,
        "seed": str(seed),
        "scale": scale.name,
        "date_start": scale.date_start,
        "date_end": scale.date_end,
    }
    finish_store(conn, meta)
    stamp_content_hash(tmp)
    os.replace(tmp, path)
    log.info("world: built %s in %.1fs", path, time.perf_counter() - started)
    return counts


def _poi_rows(task: tuple[int, int, int, int]) -> list[tuple]:
    """One city's rows of one POI table in column order, from that pair's own random stream."""
    kind, city, per_city, seed = task
    table, builder, _ = POI_BUILDERS[kind]
    columns = table_columns(table)
    rng = random.Random(f"{seed}:{table}:{CITIES[city].name}")
    return [tuple(r[c] for c in columns) for r in builder(CITIES[city], per_city, rng)]


def _with_progress(rows: Iterable[tuple], started: float, every: int = 200_000) -> Iterable[tuple]:
    """Pass rows through, logging the count and rate periodically (the full build takes a while)."""
    for k, row in enumerate(rows, start=1):
        if k % every == 0:
            elapsed = time.perf_counter() - started
            log.info("world: flights %d rows so far (%.0f rows/s overall)", k, k / max(elapsed, 1e-9))
        yield row
