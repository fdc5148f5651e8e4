"""The TravelPlanner database: accommodations, attractions, restaurants, flights, distances, cities.

Rows are plain dicts with the official column names and the value types the official loader gives
them (prices of accommodations are floats, restaurant costs ints, ...), kept per city in file order,
because the evaluator's lookups take "the first matching row in file order". Rows with an empty field
are dropped from the three place tables and the flights table, as the official loader drops them;
`distance.csv` keeps every row and the first row of a repeated city pair is the one used.

A Database is built from the official CSV directory (`from_dir`), from the reference information of
a query file (`add_reference_info`, whose city blocks equal the full database's rows for those cities),
or both. Pure Python: no pandas, so rollout hosts need nothing beyond the standard library.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox.jsonl import read_jsonl_objects

ACCOMMODATIONS = "accommodations"
ATTRACTIONS = "attractions"
RESTAURANTS = "restaurants"
PLACE_KINDS = (ACCOMMODATIONS, ATTRACTIONS, RESTAURANTS)

# TravelPlanner's public data shipped with the package (CC-BY-4.0, data/ATTRIBUTION.md): the database,
# the 45 training queries and their reference information; the default for make_data and scoring.
PACKAGE_DATA_DIR = Path(__file__).resolve().parent / "data"
DEFAULT_DATABASE_DIR = PACKAGE_DATA_DIR / "database"

# Official file names inside a database directory.
FILE_NAMES = {
    ACCOMMODATIONS: "clean_accommodations_2022.csv",
    ATTRACTIONS: "attractions.csv",
    RESTAURANTS: "clean_restaurant_2022.csv",
    "distance": "distance.csv",
    "cities": "citySet_with_states.txt",
    "flights": "clean_Flights_2022.csv",
}

_Converter = Callable[[str], Any]


def _int_or_float(text: str) -> int | float:
    """An integer column that a CSV may still write as "3.0"."""
    value = float(text)
    return int(value) if value.is_integer() and "." not in text else value


# Columns the official loader keeps, with the type it infers for each (str unless listed).
_COLUMNS: dict[str, dict[str, _Converter]] = {
    ACCOMMODATIONS: {
        "NAME": str,
        "price": float,
        "room type": str,
        "house_rules": str,
        "minimum nights": float,
        "maximum occupancy": _int_or_float,
        "review rate number": float,
        "city": str,
    },
    ATTRACTIONS: {
        "Name": str,
        "Latitude": float,
        "Longitude": float,
        "Address": str,
        "Phone": str,
        "Website": str,
        "City": str,
    },
    RESTAURANTS: {
        "Name": str,
        "Average Cost": _int_or_float,
        "Cuisines": str,
        "Aggregate Rating": float,
        "City": str,
    },
    "flights": {
        "Flight Number": str,
        "Price": _int_or_float,
        "DepTime": str,
        "ArrTime": str,
        "ActualElapsedTime": str,
        "FlightDate": str,
        "OriginCityName": str,
        "DestCityName": str,
        "Distance": float,
    },
}
# The column holding the city of a place row, and the one holding its name.
CITY_COLUMN = {ACCOMMODATIONS: "city", ATTRACTIONS: "City", RESTAURANTS: "City"}
NAME_COLUMN = {ACCOMMODATIONS: "NAME", ATTRACTIONS: "Name", RESTAURANTS: "Name"}

# Reference-information keys: "Attractions in X", "Flight from A to B on D", "Taxi from A to B", ...
_REF_PLACE_PREFIX = {
    "Attractions in ": ATTRACTIONS,
    "Restaurants in ": RESTAURANTS,
    "Accommodations in ": ACCOMMODATIONS,
}


class DatabaseError(ValueError):
    """A database file is missing or malformed (the message names the file and line)."""


@dataclass(frozen=True)
class Route:
    """One row of the distance table: durations like "10 hours 55 mins", distances like "1,144 km".

    Either text may be empty (the table has no route there)."""

    origin: str
    destination: str
    duration: str
    distance: str

    @property
    def drivable(self) -> bool:
        """The official rule: a route exists when both texts are present and the duration has no "day"."""
        return bool(self.duration) and bool(self.distance) and "day" not in self.duration

    @property
    def km(self) -> float:
        """Distance in km ("1,144 km" -> 1144.0)."""
        return float(self.distance.replace("km", "").replace(",", "").strip())

    def cost(self, mode: str) -> int | None:
        """Official per-vehicle cost: int(km x 0.05) self-driving, int(km) taxi; None without a route."""
        if not self.drivable:
            return None
        rate = 0.05 if mode == "self-driving" else 1.0
        return int(self.km * rate)


@dataclass
class Database:
    """All TravelPlanner tables; see the module docstring for the row conventions.

    Accessors never raise for an unknown city or pair: they return an empty list or None."""

    places: dict[str, dict[str, list[dict[str, Any]]]] = field(
        default_factory=lambda: {kind: {} for kind in PLACE_KINDS}
    )
    flight_rows: list[dict[str, Any]] = field(default_factory=list)
    routes: dict[tuple[str, str], Route] = field(default_factory=dict)
    city_states: dict[str, str] = field(default_factory=dict)
    _flight_keys: set[tuple[Any, ...]] = field(default_factory=set, repr=False)

    # ---------------------------------------------------------------- building
    @classmethod
    def from_dir(cls, path: str | Path) -> Database:
        """Read the official files found in `path` (any subset; the flights CSV is optional)."""
        root = Path(path)
        if not root.is_dir():
            raise DatabaseError(f"{root}: not a directory")
        db = cls()
        for kind in PLACE_KINDS:
            file = root / FILE_NAMES[kind]
            if file.exists():
                for row in _read_table(file, kind):
                    db._add_place(kind, row)
        if (root / FILE_NAMES["flights"]).exists():
            db.add_flights(_read_table(root / FILE_NAMES["flights"], "flights"))
        if (root / FILE_NAMES["distance"]).exists():
            for route in _read_routes(root / FILE_NAMES["distance"]):
                db.routes.setdefault((route.origin, route.destination), route)
        if (root / FILE_NAMES["cities"]).exists():
            db.city_states.update(_read_city_states(root / FILE_NAMES["cities"]))
        return db

    @classmethod
    def from_reference_info(cls, path: str | Path) -> Database:
        """A database holding only what a `*_ref_info.jsonl` file gives (its cities, flights, routes)."""
        db = cls()
        db.add_reference_info(path)
        return db

    def add_reference_info(self, path: str | Path) -> None:
        """Add the rows, flights and routes of every line of a `*_ref_info.jsonl` file.

        A city already present keeps its rows (reference blocks repeat the database's rows), and a
        route already present keeps its first row, so the result does not depend on the loading order
        of equal data."""
        file = Path(path)
        try:
            for line_no, info in read_jsonl_objects(file, DatabaseError):
                try:
                    self.add_reference_block(info)
                except (TypeError, KeyError, ValueError, AttributeError) as err:
                    raise DatabaseError(
                        f"{file}:{line_no}: not valid reference information ({err})"
                    ) from None
        except OSError as err:
            raise DatabaseError(f"{file}: cannot read ({err.strerror})") from None

    def add_reference_block(self, info: dict[str, Any]) -> None:
        """Add one query's reference information (a dict as in `*_ref_info.jsonl`)."""
        for key, value in info.items():
            kind = next((k for prefix, k in _REF_PLACE_PREFIX.items() if key.startswith(prefix)), None)
            if kind is not None:
                city = key.split(" in ", 1)[1]
                if city not in self.places[kind] and isinstance(value, list):
                    for row in value:
                        self._add_place(kind, _typed(row, kind))
            elif key.startswith("Flight from ") and isinstance(value, list):
                self.add_flights(_typed(row, "flights") for row in value)
            elif key.startswith(("Self-driving from ", "Taxi from ")):
                route = _route_from_text(key, value)
                if route is not None:
                    self.routes.setdefault((route.origin, route.destination), route)

    def add_flights(self, rows: Iterable[dict[str, Any]]) -> None:
        """Append flight rows (official columns), skipping exact duplicates and rows with empty fields."""
        for row in rows:
            key = tuple(row.get(col) for col in _COLUMNS["flights"])
            if key in self._flight_keys or any(v in ("", None) for v in key):
                continue
            self._flight_keys.add(key)
            self.flight_rows.append(row)

    def _add_place(self, kind: str, row: dict[str, Any]) -> None:
        self.places[kind].setdefault(row[CITY_COLUMN[kind]], []).append(row)

    # ---------------------------------------------------------------- accessors
    def rows(self, kind: str, city: str) -> list[dict[str, Any]]:
        """Rows of `kind` ("accommodations" | "attractions" | "restaurants") in `city`, in file order."""
        if kind not in self.places:
            raise KeyError(f"unknown place kind {kind!r}; expected one of {PLACE_KINDS}")
        return self.places[kind].get(city, [])

    def accommodations(self, city: str) -> list[dict[str, Any]]:
        return self.rows(ACCOMMODATIONS, city)

    def attractions(self, city: str) -> list[dict[str, Any]]:
        return self.rows(ATTRACTIONS, city)

    def restaurants(self, city: str) -> list[dict[str, Any]]:
        return self.rows(RESTAURANTS, city)

    def find_places(self, kind: str, name: str, city: str) -> list[dict[str, Any]]:
        """Rows of `city` whose name contains `name` (case-sensitive substring), in file order: the
        official lookup of a "Name, City" item."""
        column = NAME_COLUMN[kind]
        return [row for row in self.rows(kind, city) if name in str(row[column])]

    def flights(self, origin: str, destination: str, date: str | None = None) -> list[dict[str, Any]]:
        """Flights from `origin` to `destination` (on `date` "YYYY-MM-DD" when given), in file order."""
        return [
            row
            for row in self.flight_rows
            if row["OriginCityName"] == origin
            and row["DestCityName"] == destination
            and (date is None or row["FlightDate"] == date)
        ]

    def flights_numbered(self, number: str) -> list[dict[str, Any]]:
        """Every flight row with this flight number, in file order."""
        return [row for row in self.flight_rows if row["Flight Number"] == number]

    def route(self, origin: str, destination: str) -> Route | None:
        """The first distance-table row for this ordered pair, or None when the table lacks it."""
        return self.routes.get((origin, destination))

    def drive_cost(self, origin: str, destination: str, mode: str) -> int | None:
        """Per-vehicle cost of "self-driving" or "taxi" between two cities; None when not drivable."""
        route = self.route(origin, destination)
        return None if route is None else route.cost(mode)

    @property
    def cities(self) -> list[str]:
        """Every city of the city list, in file order."""
        return list(self.city_states)

    @property
    def states(self) -> list[str]:
        """Every state of the city list, in order of first appearance."""
        return list(dict.fromkeys(self.city_states.values()))

    def state_of(self, city: str) -> str | None:
        return self.city_states.get(city)

    def cities_in_state(self, state: str) -> list[str]:
        """Cities of `state`, in file order."""
        return [city for city, st in self.city_states.items() if st == state]


# -------------------------------------------------------------------- file readers
def _typed(row: dict[str, Any], kind: str) -> dict[str, Any]:
    """Keep the official columns of a row, converting CSV text to the official types."""
    out = {}
    for column, convert in _COLUMNS[kind].items():
        value = row[column]
        out[column] = convert(value) if isinstance(value, str) and convert is not str else value
    return out


def _read_table(path: Path, kind: str) -> list[dict[str, Any]]:
    """Rows of an official CSV, dropping rows with an empty field as the official loader does."""
    rows = []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in _COLUMNS[kind] if c not in (reader.fieldnames or [])]
        if missing:
            raise DatabaseError(f"{path}: missing columns {missing}")
        for line_no, raw in enumerate(reader, start=2):
            # The official loader drops a row with an empty value in ANY column, kept or not.
            if None in raw or any(v is None or v == "" for v in raw.values()):
                if None in raw:
                    raise DatabaseError(f"{path}:{line_no}: more fields than the header has")
                continue
            try:
                rows.append(_typed(raw, kind))
            except ValueError as err:
                raise DatabaseError(f"{path}:{line_no}: {err}") from None
    return rows


def _read_routes(path: Path) -> list[Route]:
    with path.open(encoding="utf-8", newline="") as handle:
        return [
            Route(r["origin"], r["destination"], r["duration"] or "", r["distance"] or "")
            for r in csv.DictReader(handle)
        ]


def _read_city_states(path: Path) -> dict[str, str]:
    """City -> state from "City<TAB>State" lines."""
    out: dict[str, str] = {}
    for line_no, line in enumerate(path.read_text(encoding="utf-8").split("\n"), start=1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2:
            raise DatabaseError(f"{path}:{line_no}: expected 'City<TAB>State', got {line!r}")
        out[parts[0]] = parts[1]
    return out


def _route_from_text(key: str, text: Any) -> Route | None:
    """Parse "self-driving, from A to B, duration: D, distance: K km, cost: C" (None for "No valid
    information."). The pair comes from the key "Self-driving from A to B"."""
    if not isinstance(text, str) or "duration: " not in text:
        return None
    origin, destination = key.split(" from ", 1)[1].split(" to ", 1)
    fields = dict(part.split(": ", 1) for part in text.split(", ") if ": " in part)
    # The distance itself may contain ", " ("1,144 km" has no space, so split is safe).
    return Route(origin, destination, fields.get("duration", ""), fields.get("distance", ""))
