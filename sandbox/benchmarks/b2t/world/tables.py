"""Column names and types of each store table, read from `sandbox/benchmarks/b2t/schema.py` itself.

Creating the tables in an in-memory database and asking SQLite keeps this in step with the one
schema definition instead of a second hand-written list.
"""

import functools
import sqlite3

from sandbox.benchmarks.b2t.schema import TABLES


@functools.lru_cache(maxsize=1)
def _table_info() -> dict[str, tuple[tuple[str, str, bool], ...]]:
    conn = sqlite3.connect(":memory:")
    try:
        info = {}
        for table, ddl in TABLES.items():
            conn.execute(ddl)
            rows = conn.execute(f"PRAGMA table_info({table})").fetchall()
            # (name, declared type, required): NOT NULL or primary key columns are required.
            info[table] = tuple((r[1], r[2].upper(), bool(r[3]) or bool(r[5])) for r in rows)
        return info
    finally:
        conn.close()


def table_columns(table: str) -> tuple[str, ...]:
    """Column names of `table` in schema order."""
    return tuple(name for name, _, _ in _table_info()[table])


def column_types(table: str) -> dict[str, str]:
    """Column name -> declared SQLite type ("TEXT", "REAL", "INTEGER")."""
    return {name: ctype for name, ctype, _ in _table_info()[table]}


def required_columns(table: str) -> tuple[str, ...]:
    return tuple(name for name, _, req in _table_info()[table] if req)
