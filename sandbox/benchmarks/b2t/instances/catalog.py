"""A read-only, in-memory view of the world store for the instance generator.

The generator samples thousands of profiles and trajectories; going through the agent-facing
tools for each would be slow and would couple the benchmark to the tools' output format. It
reads the SQLite tables of `sandbox/benchmarks/b2t/schema.py` directly, once, into plain Python structures.
"""

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Columns loaded per POI kind; list-valued JSON columns are decoded.
_POI_COLUMNS = {
    "hotel": (
        "id",
        "name",
        "city",
        "district",
        "latitude",
        "longitude",
        "secondary_category",
        "tertiary_category",
        "facilities",
        "avg_price",
        "avg_rating",
        "room_info",
    ),
    "restaurant": (
        "id",
        "name",
        "city",
        "location",
        "latitude",
        "longitude",
        "secondary_category",
        "tertiary_category",
        "avg_price",
        "price_level",
        "environment",
        "avg_rating",
        "open_time",
        "close_time",
    ),
    "attraction": (
        "id",
        "name",
        "city",
        "location",
        "latitude",
        "longitude",
        "attraction_type",
        "custom_type",
        "walking_km",
        "avg_price",
        "avg_rating",
        "open_time",
        "close_time",
        "recommended_duration_min",
    ),
    "entertainment": (
        "id",
        "name",
        "city",
        "district",
        "latitude",
        "longitude",
        "categories",
        "avg_price",
        "avg_rating",
        "open_time",
        "close_time",
    ),
}
_TABLE = {
    "hotel": "hotels",
    "restaurant": "restaurants",
    "attraction": "attractions",
    "entertainment": "entertainment",
}
_JSON_COLUMNS = {"facilities", "environment", "room_info"}
# The column each preference category's main attribute filters on.
CATEGORY_COLUMN = {
    "hotel": "secondary_category",
    "restaurant": "secondary_category",
    "attraction": "attraction_type",
}


@dataclass(frozen=True)
class TransportOption:
    """One bookable intercity seat: a train (daily) or a flight (dated) in one seat class."""

    kind: str  # "train" | "flight"
    number: str  # "G1234" / "CA1501"
    mode: str  # vocab.INTERCITY_MODES value: "High-speed Rail" | "Regular Train" | "Airplane"
    seat_class: str  # vocab.SEAT_CLASSES value
    origin: str
    destination: str
    departure_time: str
    arrival_time: str
    day_offset: int  # arrival day minus departure day
    duration_min: int
    price: float  # per person, CNY
    origin_station: str
    destination_station: str
    departure_min: int  # departure_time in minutes after midnight
    arrival_min: int

    def details(self) -> dict[str, Any]:
        """The fields a trajectory event shows for this option."""
        return {
            "mode": self.mode,
            "from_city": self.origin,
            "to_city": self.destination,
            "from_station": self.origin_station,
            "to_station": self.destination_station,
            "departure_time": self.departure_time,
            "arrival_time": self.arrival_time,
            "duration_min": self.duration_min,
            "seat_class": self.seat_class,
            "price": self.price,
        }


@dataclass
class Catalog:
    """Cities, POIs per (kind, city) and a cache of intercity options per route and date."""

    path: Path
    cities: dict[str, dict[str, Any]]
    pois: dict[str, dict[str, list[dict[str, Any]]]]  # kind -> city -> rows (store order)
    date_start: str
    date_end: str
    _conn: sqlite3.Connection
    _transport_cache: dict[tuple[str, str, str], list[TransportOption]] = field(default_factory=dict)
    _train_cache: dict[tuple[str, str], list[TransportOption]] = field(default_factory=dict)
    _by_category: dict[tuple[str, str, str], list[dict[str, Any]]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> "Catalog":
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"world store {path} not found; build it with launch/make_data.py")
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False)
        conn.row_factory = sqlite3.Row
        meta = {r["key"]: r["value"] for r in conn.execute("SELECT key, value FROM meta")}
        cities = {r["name"]: dict(r) for r in conn.execute("SELECT * FROM cities ORDER BY name")}
        pois: dict[str, dict[str, list[dict[str, Any]]]] = {}
        for kind, columns in _POI_COLUMNS.items():
            by_city: dict[str, list[dict[str, Any]]] = {c: [] for c in cities}
            sql = f"SELECT {', '.join(columns)} FROM {_TABLE[kind]} ORDER BY city, id"
            for row in conn.execute(sql):
                rec = dict(row)
                for col in _JSON_COLUMNS.intersection(rec):
                    rec[col] = json.loads(rec[col])
                rec["kind"] = kind
                rec["_pos"] = len(by_city.get(rec["city"], ()))
                by_city.setdefault(rec["city"], []).append(rec)
            pois[kind] = by_city
        date_start, date_end = _calendar(conn, meta)
        return cls(path=path, cities=cities, pois=pois, date_start=date_start, date_end=date_end, _conn=conn)

    def city_names(self) -> list[str]:
        return sorted(self.cities)

    @staticmethod
    def position(record: dict[str, Any]) -> int:
        """A record's index in its (kind, city) list: the store order."""
        return record["_pos"]

    def by_category(self, kind: str, city: str, value: str) -> list[dict[str, Any]]:
        """Records of `kind` in `city` whose main category (cuisine, star, type) is `value`."""
        if not self._by_category:
            for k, column in CATEGORY_COLUMN.items():
                for c, rows in self.pois[k].items():
                    for row in rows:
                        self._by_category.setdefault((k, c, row[column]), []).append(row)
        return self._by_category.get((kind, city, value), [])

    def transport(
        self, origin: str, destination: str, date: str, modes: tuple[str, ...] | None = None
    ) -> list[TransportOption]:
        """Train seats and flight cabins from `origin` to `destination` departing on `date`
        (only of the intercity `modes` given, e.g. ("Airplane",); default all)."""
        trains = modes is None or any(m != "Airplane" for m in modes)
        flights = modes is None or "Airplane" in modes
        out = self._trains(origin, destination) if trains else []
        if flights:
            key = (origin, destination, date)
            if key not in self._transport_cache:
                self._transport_cache[key] = self._flights(origin, destination, date)
            out = out + self._transport_cache[key]
        return out

    def _trains(self, origin: str, destination: str) -> list[TransportOption]:
        if (origin, destination) in self._train_cache:
            return self._train_cache[(origin, destination)]
        out = []
        rows = self._conn.execute(
            "SELECT * FROM trains WHERE origin_city = ? AND destination_city = ? ORDER BY "
            "departure_time, train_number",
            (origin, destination),
        )
        for r in rows:
            for seat, fare in sorted(json.loads(r["fares"]).items()):
                out.append(
                    TransportOption(
                        kind="train",
                        number=r["train_number"],
                        mode=r["train_type"],
                        seat_class=seat,
                        origin=origin,
                        destination=destination,
                        departure_time=r["departure_time"],
                        arrival_time=r["arrival_time"],
                        day_offset=int(r["arrival_day_offset"]),
                        duration_min=int(r["duration_min"]),
                        price=float(fare),
                        origin_station=r["origin_station"],
                        destination_station=r["destination_station"],
                        departure_min=_minutes(r["departure_time"]),
                        arrival_min=_minutes(r["arrival_time"]),
                    )
                )
        self._train_cache[(origin, destination)] = out
        return out

    def _flights(self, origin: str, destination: str, date: str) -> list[TransportOption]:
        out = []
        rows = self._conn.execute(
            "SELECT * FROM flights WHERE origin_city = ? AND destination_city = ? AND "
            "departure_date = ? ORDER BY departure_time, flight_number, cabin_class",
            (origin, destination, date),
        )
        for r in rows:
            offset = 0 if r["arrival_date"] == r["departure_date"] else 1
            out.append(
                TransportOption(
                    kind="flight",
                    number=r["flight_number"],
                    mode="Airplane",
                    seat_class=r["cabin_class"],
                    origin=origin,
                    destination=destination,
                    departure_time=r["departure_time"],
                    arrival_time=r["arrival_time"],
                    day_offset=offset,
                    duration_min=int(r["duration_min"]),
                    price=float(r["total_price"]),
                    origin_station=r["origin_airport"],
                    destination_station=r["destination_airport"],
                    departure_min=_minutes(r["departure_time"]),
                    arrival_min=_minutes(r["arrival_time"]),
                )
            )
        return out


def _calendar(conn: sqlite3.Connection, meta: dict[str, str]) -> tuple[str, str]:
    """The date range the store has weather (and flights) for."""
    if "date_start" in meta and "date_end" in meta:
        return meta["date_start"], meta["date_end"]
    row = conn.execute("SELECT MIN(date), MAX(date) FROM weather").fetchone()
    if row[0] is None:
        raise ValueError("world store has no weather dates; cannot choose trip dates")
    return row[0], row[1]


def _minutes(hhmm: str) -> int:
    hours, minutes = hhmm.split(":")
    return int(hours) * 60 + int(minutes)
