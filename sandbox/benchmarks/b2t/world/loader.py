"""Build the store from user-supplied files in the documented schema, and export a store to files.

A user with the real data writes one file per table, `DIR/<table>.jsonl` (one JSON object per
line) or `DIR/<table>.csv` (header row), with exactly the columns of `sandbox/benchmarks/b2t/schema.py`.
JSON-valued columns (facilities, reviews, fares, ...) may be given as JSON text or, in JSONL, as
the list/object itself. Every table except `meta` is required; `meta` is derived when absent.
"""

import csv
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sandbox.benchmarks.b2t.schema import SCHEMA_VERSION, TABLES
from sandbox.benchmarks.b2t.world.generator import create_empty_store, finish_store, insert_rows
from sandbox.benchmarks.b2t.world.integrity import stamp_content_hash
from sandbox.benchmarks.b2t.world.tables import column_types, required_columns, table_columns
from sandbox.jsonl import read_jsonl_objects


class DataFileError(ValueError):
    """A user data file is missing, malformed, or does not match the schema."""


def _read_csv(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8", newline="") as f:
        for line_no, record in enumerate(csv.DictReader(f), start=2):
            if None in record:  # DictReader's key for fields beyond the header
                raise DataFileError(
                    f"{path}:{line_no}: {len(record[None])} more field(s) than the header row"
                )
            yield line_no, record


_NATIVE = {"INTEGER": int, "REAL": float, "TEXT": str}


def _convert(value: Any, ctype: str, where: str) -> Any:
    """Coerce one value to the column's declared type; lists/dicts become JSON text."""
    if type(value) is _NATIVE[ctype]:  # fast path: JSONL values usually arrive typed
        return value
    if value is None:
        raise DataFileError(f"{where}: null value (every column is NOT NULL)")
    try:
        if ctype == "INTEGER":
            if isinstance(value, bool):
                return int(value)
            number = float(value)
            if number != int(number):
                raise ValueError
            return int(number)
        if ctype == "REAL":
            return float(value)
    except (TypeError, ValueError):
        raise DataFileError(f"{where}: expected {ctype.lower()}, got {value!r}") from None
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def read_table_file(directory: Path, table: str) -> list[tuple]:
    """Rows of one table from DIR/<table>.jsonl or .csv, validated, in schema column order."""
    jsonl, csv_path = directory / f"{table}.jsonl", directory / f"{table}.csv"
    if jsonl.exists():
        path, records = jsonl, read_jsonl_objects(jsonl, DataFileError)
    elif csv_path.exists():
        path, records = csv_path, _read_csv(csv_path)
    else:
        raise DataFileError(f"missing data file for table {table!r}: expected {jsonl} or {csv_path}")
    columns, types, required = table_columns(table), column_types(table), set(required_columns(table))
    known = set(columns)
    rows = []
    for line_no, record in records:
        missing = [c for c in columns if c in required and c not in record]
        unknown = sorted(record.keys() - known)
        if missing or unknown:
            problems = []
            if missing:
                problems.append(f"missing columns {missing}")
            if unknown:
                problems.append(f"unknown columns {unknown}")
            raise DataFileError(
                f"{path}:{line_no}: {'; '.join(problems)} (table {table} has columns {list(columns)})"
            )
        rows.append(tuple(_convert(record[c], types[c], f"{path}:{line_no}: column {c!r}") for c in columns))
    return rows


def build_store_from_files(directory: str | os.PathLike, out: str | os.PathLike) -> dict[str, int]:
    """Build a store at `out` from the table files in `directory`; returns row counts per table."""
    directory, out = Path(directory), Path(out)
    if not directory.is_dir():
        raise DataFileError(f"data directory {directory} does not exist")
    tables = {t: read_table_file(directory, t) for t in TABLES if t != "meta"}
    meta_rows = None
    if (directory / "meta.jsonl").exists() or (directory / "meta.csv").exists():
        meta_rows = dict(read_table_file(directory, "meta"))
    dates = sorted({row[1] for row in tables["weather"]})
    meta = {
        "schema_version": str(SCHEMA_VERSION),
        "scale": "user",
        "seed": "none",
        "date_start": dates[0] if dates else "",
        "date_end": dates[-1] if dates else "",
    }
    meta.update(meta_rows or {})
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    conn = create_empty_store(tmp)
    counts = {}
    for table, rows in tables.items():
        counts[table] = insert_rows(conn, table, rows)
    finish_store(conn, meta)
    stamp_content_hash(tmp)  # replaces a stale hash a meta file may carry
    os.replace(tmp, out)
    return counts


def export_store_to_jsonl(
    store: str | os.PathLike, directory: str | os.PathLike, tables: tuple[str, ...] | None = None
) -> None:
    """Write each table of `store` as DIR/<table>.jsonl (JSON columns stay JSON text): the loader's format."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(f"file:{Path(store).resolve()}?mode=ro", uri=True)
    try:
        for table in tables or tuple(TABLES):
            columns = table_columns(table)
            with (directory / f"{table}.jsonl").open("w", encoding="utf-8") as f:
                for row in conn.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY rowid"):
                    f.write(json.dumps(dict(zip(columns, row)), ensure_ascii=False) + "\n")
    finally:
        conn.close()
