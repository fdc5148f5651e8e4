"""Database lookups of plan items, as the evaluation makes them (official or strict)."""

from dataclasses import dataclass
from typing import Any

from sandbox.benchmarks.travelplanner.database import NAME_COLUMN, Database
from sandbox.benchmarks.travelplanner.text import before_parenthesis, name_and_city


@dataclass(frozen=True)
class Lookup:
    """The evaluator's view of the database.

    Official: an item "Name, City" matches every row of City whose name CONTAINS Name, and the first
    match in file order supplies prices and attributes. Strict: the row's name (trimmed) must EQUAL
    Name, so "Inn, Austin" does not silently match "Grand Inn Suites"."""

    db: Database
    strict: bool

    def places(self, kind: str, item: Any) -> list[dict[str, Any]]:
        """Rows matching a "Name, City" item, in file order (TypeError for a non-string item)."""
        name, city = name_and_city(item)
        if not self.strict:
            return self.db.find_places(kind, name, city)
        column = NAME_COLUMN[kind]
        return [row for row in self.db.rows(kind, city) if str(row[column]).strip() == name]

    def flight_on_route(self, number: str, origin: str, destination: str) -> bool:
        """A flight with this number flies origin -> destination (its date is not checked)."""
        return any(
            row["OriginCityName"] == origin and row["DestCityName"] == destination
            for row in self.db.flights_numbered(number)
        )

    def flight_price(self, number: str, origin: str, destination: str) -> float | None:
        """Ticket price of a flight: official, the first row with that number whatever its route;
        strict, the first row with that number on that route."""
        rows = self.db.flights_numbered(number)
        if self.strict:
            rows = [r for r in rows if r["OriginCityName"] == origin and r["DestCityName"] == destination]
        return rows[0]["Price"] if rows else None

    def drive_cost(self, origin: str, destination: str, mode: str) -> int | None:
        """Per-vehicle cost of "self-driving" / "taxi"; "(State)" suffixes are cut first."""
        return self.db.drive_cost(before_parenthesis(origin), before_parenthesis(destination), mode)
