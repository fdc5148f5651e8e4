"""The mini world of example.py written as a real SQLite store (schema of schema.py), so the
evaluator tests and benchmarks/bench_eval.py judge plans against real rows."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from sandbox.benchmarks.b2t.evaluator.example import (
    ATTRACTIONS,
    CENTRE,
    ENTERTAINMENT,
    FLIGHTS,
    HOTELS,
    RESTAURANTS,
    TRAINS,
    WEATHER,
    latlon,
)
from sandbox.benchmarks.b2t.schema import INDEXES, TABLES


def _insert(conn: sqlite3.Connection, table: str, row: dict) -> None:
    conn.execute(
        f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", tuple(row.values())
    )


def _poi_common(kind: str, n: int, name: str, north: float, east: float) -> dict:
    lat, lon = latlon(north, east)
    return {
        "id": f"{kind}-Chengdu-{n}",
        "name": name,
        "details": f"{name} in Chengdu.",
        "address": f"No. {n} Test Road, Chengdu",
        "phone": "028-0000000",
        "province": "Sichuan",
        "city": "Chengdu",
        "longitude": lon,
        "latitude": lat,
    }


def build_mini_world(path: str | Path) -> Path:
    """Write the mini world to an SQLite file (schema of sandbox/benchmarks/b2t/schema.py)."""
    path = Path(path)
    if path.exists():
        path.unlink()
    conn = sqlite3.connect(path)
    for ddl in TABLES.values():
        conn.execute(ddl)
    for ddl in INDEXES:
        conn.execute(ddl)
    for write in _WRITERS:  # always in this order: the file's bytes depend on it
        write(conn)
    conn.commit()
    conn.close()
    return path


def _write_cities(conn: sqlite3.Connection) -> None:
    for city, (lat, lon) in CENTRE.items():
        _insert(
            conn,
            "cities",
            {
                "name": city,
                "name_zh": city,
                "province": "P",
                "latitude": lat,
                "longitude": lon,
                "description": f"{city} city.",
                "airports": "[]",
                "stations": "[]",
            },
        )


def _write_restaurants(conn: sqlite3.Connection) -> None:
    for n, (name, (north, east, cuisine, price, env, op, cl)) in enumerate(RESTAURANTS.items()):
        _insert(
            conn,
            "restaurants",
            _poi_common("R", n, name, north, east)
            | {
                "location": "Jinjiang",
                "primary_category": "Food",
                "secondary_category": cuisine,
                "tertiary_category": cuisine,
                "business_hours": f"{op}-{cl}",
                "open_time": op,
                "close_time": cl,
                "rating_rank": n + 1,
                "parking": "None",
                "avg_price": price,
                "price_level": "",
                "environment": json.dumps(env),
                "avg_rating": 4.5,
                "reviews": "[]",
            },
        )


def _write_attractions(conn: sqlite3.Connection) -> None:
    for n, (name, (north, east, kind, price, walk, op, cl)) in enumerate(ATTRACTIONS.items()):
        _insert(
            conn,
            "attractions",
            _poi_common("A", n, name, north, east)
            | {
                "cover_image": "",
                "location": "Jinjiang",
                "category_name": "Attraction",
                "attraction_type": kind,
                "custom_type": kind,
                "opening_hours": f"{op}-{cl}",
                "open_time": op,
                "close_time": cl,
                "best_season": "All year",
                "recommended_duration_min": 120,
                "walking_km": walk,
                "avg_price": price,
                "avg_rating": 4.6,
                "reviews": "[]",
                "ticket_info": "[]",
            },
        )


def _write_entertainment(conn: sqlite3.Connection) -> None:
    for n, (name, (north, east, kind, price, op, cl)) in enumerate(ENTERTAINMENT.items()):
        _insert(
            conn,
            "entertainment",
            _poi_common("E", n, name, north, east)
            | {
                "cover_image": "",
                "district": "Jinjiang",
                "categories": kind,
                "business_hours": f"{op}-{cl}",
                "open_time": op,
                "close_time": cl,
                "rating_rank": 1,
                "avg_price": price,
                "avg_rating": 4.4,
            },
        )


def _write_hotels(conn: sqlite3.Connection) -> None:
    for n, (name, (north, east, star, facilities, price)) in enumerate(HOTELS.items()):
        _insert(
            conn,
            "hotels",
            _poi_common("H", n, name, north, east)
            | {
                "cover_image": "",
                "district": "Jinjiang",
                "primary_category": "Hotel",
                "secondary_category": star,
                "tertiary_category": "Hotel",
                "business_hours": "00:00-24:00",
                "rating_rank": 1,
                "parking": "Free parking",
                "wifi": int("Free WiFi" in facilities),
                "facilities": json.dumps(facilities),
                "avg_price": price,
                "avg_rating": 4.7,
                "reviews": "[]",
                "room_info": "[]",
            },
        )


def _write_trains(conn: sqlite3.Connection) -> None:
    for number, kind, origin, dest, dep, arr, fares in TRAINS:
        _insert(
            conn,
            "trains",
            {
                "train_number": number,
                "train_type": kind,
                "origin_city": origin,
                "origin_station": f"{origin} Station",
                "destination_city": dest,
                "destination_station": f"{dest} Station",
                "departure_time": dep,
                "arrival_time": arr,
                "arrival_day_offset": 0,
                "duration_text": "",
                "duration_min": 0,
                "fares": json.dumps(fares),
            },
        )


def _write_flights(conn: sqlite3.Connection) -> None:
    for number, origin, dest, date, dep, arr, cabin, price in FLIGHTS:
        _insert(
            conn,
            "flights",
            {
                "flight_number": number,
                "airline": "Sichuan Airlines",
                "airline_code": number[:2],
                "origin_city": origin,
                "origin_city_code": "SHA",
                "destination_city": dest,
                "destination_city_code": "CTU",
                "origin_airport": "PVG",
                "origin_airport_code": "PVG",
                "destination_airport": "TFU",
                "destination_airport_code": "TFU",
                "departure_date": date,
                "departure_time": dep,
                "arrival_date": date,
                "arrival_time": arr,
                "duration_min": 180,
                "departure_terminal": "T2",
                "arrival_terminal": "T1",
                "aircraft": "A320",
                "cabin_class": cabin,
                "cabin_code": "Y",
                "adult_fare": price,
                "child_fare": price,
                "fuel_surcharge": 0,
                "airport_fee": 0,
                "total_price": price,
                "discount": 1.0,
                "on_time_rate": 0.9,
                "meal": 1,
                "codeshare": "",
            },
        )


def _write_weather(conn: sqlite3.Connection) -> None:
    """The trip's days in Chengdu."""
    for date, (condition, hi, lo) in WEATHER.items():
        _insert(
            conn,
            "weather",
            {
                "city": "Chengdu",
                "date": date,
                "max_temp": hi,
                "min_temp": lo,
                "weather": condition,
                "wind": "calm",
                "air_quality": "Good",
            },
        )


_WRITERS = (
    _write_cities,
    _write_restaurants,
    _write_attractions,
    _write_entertainment,
    _write_hotels,
    _write_trains,
    _write_flights,
    _write_weather,
)


# --------------------------------------------------------------------------- the valid plan
