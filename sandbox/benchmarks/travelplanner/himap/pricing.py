"""Σ's pricing for TravelPlanner: plan fields priced exactly as `hard.total_cost` prices them.

Item shape: one field of one day of TravelPlanner's plan format,
    {"field": "transportation", "value": "Flight Number: F3573659, from St. Petersburg to Rockford, ..."}
    {"field": "current_city", "value": "from St. Petersburg to Rockford"}      # costs 0
    {"field": "breakfast" | "lunch" | "dinner", "value": "Coco Bambu, Rockford"}
    {"field": "attraction", "value": "Burpee Museum of Natural History, Rockford"}  # ONE attraction
    {"field": "accommodation", "value": "Pure luxury one bdrm + sofa bed on Central Park, Rockford"}
plus "day" (1-based; Σ sets it to the day the item is committed to). A transportation item may carry
"current_city" ("from A to B"): `total_cost` takes the route from it when the value names none.
A day holds each field once, except attractions (several per day). `plan_from_state` merges the
committed items into the plan format (attractions joined "A, City;B, City;", absent fields "-"), and
`hard.total_cost` of that plan == Σ.spent, because each item is priced with the same helpers
(`hard.transport_cost`, `meal_cost`, `stay_cost`, `charges_stay`) in the same evaluation mode.

Beyond `total_cost`'s tolerance: a restaurant, attraction, accommodation, flight or drive that the
database lacks is UNKNOWN_PLACE (total_cost would count it as 0 and the sandbox check fail it).
Venue keys: the database row a restaurant / attraction resolves to (name and city, case and spaces
folded), so two spellings of one place collide (commonsense is_valid_restaurants / attractions).
Mode lock (commonsense is_valid_transportation): self-driving never shares a trip with a flight or
a taxi, so the lock groups are "self-driving" and "flight or taxi"; a mode the query forbids ("no
flight", "no self-driving", read as the hard transportation check reads it) is a MODE_LOCK too.
TravelPlanner has no visit history: the visited set is empty.
"""

from __future__ import annotations

from typing import Any

from sandbox.benchmarks.travelplanner import hard
from sandbox.benchmarks.travelplanner.commonsense import MEALS
from sandbox.benchmarks.travelplanner.database import (
    ACCOMMODATIONS,
    ATTRACTIONS,
    NAME_COLUMN,
    RESTAURANTS,
    Database,
)
from sandbox.benchmarks.travelplanner.evaluator import MODES
from sandbox.benchmarks.travelplanner.lookup import Lookup
from sandbox.benchmarks.travelplanner.plan_reader import PLAN_FIELDS
from sandbox.benchmarks.travelplanner.query import normalize_query
from sandbox.benchmarks.travelplanner.text import (
    flight_number,
    from_to,
    is_filled,
    name_and_city,
    transport_mode,
)
from sandbox.himap.state import BadItem, GlobalState, ModeForbidden, UnknownPlace

_PLACE_KIND = {
    **{meal: RESTAURANTS for meal in MEALS},
    "attraction": ATTRACTIONS,
    "accommodation": ACCOMMODATIONS,
}
_FORBIDDEN_NEEDLE = {"no flight": "Flight", "no self-driving": "Self-driving"}  # hard.valid_transportation


class TravelPlannerPricing:
    """Prices, venue keys and mode groups of TravelPlanner plan fields for one query."""

    def __init__(self, query: dict[str, Any], db: Database, mode: str = "official"):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.query = normalize_query(query)
        self.lookup = Lookup(db, strict=mode == "strict")

    # ----- Pricing protocol --------------------------------------------------------------------

    def cost(self, item: dict) -> float:
        field, value, day = self._read(item)
        people = self.query["people_number"]
        if field == "current_city":
            return 0.0
        if field == "transportation":
            return self._transport_cost(item, value, people)
        self._row(field, value)  # a place the database lacks is UNKNOWN_PLACE, even where it costs 0
        if field == "attraction":
            return 0.0
        if field == "accommodation":
            charged = hard.charges_stay(self.query, day - 1, self.lookup)
            return float(hard.stay_cost(value, people, self.lookup)) if charged else 0.0
        return float(hard.meal_cost(value, people, self.lookup))

    def venue_key(self, item: dict) -> str | None:
        field, value, _ = self._read(item)
        if field not in MEALS and field != "attraction":
            return None
        kind = _PLACE_KIND[field]
        row = self._row(field, value)
        name, city = str(row[NAME_COLUMN[kind]]), name_and_city(value)[1]
        return f"{kind}:{_fold(name)}|{_fold(city)}"

    def history_key(self, item: dict) -> str | None:
        return None

    def transport_mode(self, item: dict) -> str | None:
        field, value, _ = self._read(item)
        if field != "transportation":
            return None
        forbidden = self.query["local_constraint"]["transportation"]
        needle = _FORBIDDEN_NEEDLE.get(forbidden)
        text = value.lower() if self.lookup.strict else value
        if needle and (needle.lower() if self.lookup.strict else needle) in text:
            raise ModeForbidden(f"day {item['day']} transportation {value!r}: the query says {forbidden}")
        mode = transport_mode(value)
        return None if mode is None else ("self-driving" if mode == "Self-driving" else "flight or taxi")

    def slot(self, item: dict) -> str | None:
        field, _, _ = self._read(item)
        return None if field == "attraction" else field

    def label(self, item: dict) -> str:
        return f"day {item.get('day')} {item.get('field')} {item.get('value')!r}"

    # ----- helpers -----------------------------------------------------------------------------

    def _read(self, item: dict) -> tuple[str, str, int]:
        field, value, day = item.get("field"), item.get("value"), item.get("day")
        if field not in PLAN_FIELDS:
            raise BadItem(f"field must be one of {', '.join(PLAN_FIELDS)}, got {field!r}")
        if not isinstance(value, str) or not is_filled(value):
            raise BadItem(f"{field}: value must be a non-empty text other than '-', got {value!r}")
        if not isinstance(day, int) or not 1 <= day <= self.query["days"]:
            raise BadItem(f"{field}: day {day!r} is outside the {self.query['days']}-day trip")
        if field == "attraction" and ";" in value.strip().rstrip(";"):
            raise BadItem("attraction: commit one attraction per item ('Name, City')")
        if field == "attraction":
            value = value.strip().rstrip(";")
        return field, value, day

    def _row(self, field: str, value: str) -> dict[str, Any]:
        """The database row the evaluator's lookup gives for a place item (first match)."""
        rows = self.lookup.places(_PLACE_KIND[field], value)
        if not rows:
            name, city = name_and_city(value)
            raise UnknownPlace(f"no {_PLACE_KIND[field].rstrip('s')} named {name!r} in {city!r}")
        return rows[0]

    def _transport_cost(self, item: dict, value: str, people: int) -> float:
        """hard.transport_cost of the item, after making sure the service it names exists."""
        current = item.get("current_city", "-")
        if not isinstance(current, str):
            raise BadItem(f"transportation: current_city must be a text, got {current!r}")
        origin, destination = from_to(value)
        if origin is None or destination is None:
            origin, destination = from_to(current)
        if origin is None or destination is None:
            raise BadItem(f"transportation {value!r} names no route 'from A to B'")
        lowered = value.lower()
        if "flight number" in lowered:
            try:
                number = flight_number(value)
            except IndexError:
                raise BadItem(f"transportation {value!r}: write 'Flight Number: F123, ...'") from None
            if self.lookup.flight_price(number, origin, destination) is None:
                raise UnknownPlace(f"no flight {number} from {origin} to {destination}")
        elif "self-driving" in lowered or "taxi" in lowered:
            how = "self-driving" if "self-driving" in lowered else "taxi"
            if self.lookup.drive_cost(origin, destination, how) is None:
                raise UnknownPlace(f"no {how} route from {origin} to {destination}")
        day = {"transportation": value, "current_city": current}
        return float(hard.transport_cost(day, people, self.lookup))


def plan_from_state(state: GlobalState, days: int) -> list[dict[str, Any]]:
    """The committed items of days 1..`days` as a TravelPlanner plan (absent fields "-"; the day's
    current_city from its current_city item, else from its transportation item's "current_city")."""
    plan = []
    for number in range(1, days + 1):
        day: dict[str, Any] = {"days": number, **{f: "-" for f in PLAN_FIELDS}}
        attractions, route = [], "-"
        for item in state.committed(number):
            if item["field"] == "attraction":
                attractions.append(item["value"].strip().rstrip(";"))
            else:
                day[item["field"]] = item["value"]
            if item["field"] == "transportation":
                route = item.get("current_city", "-")
        if not is_filled(day["current_city"]):  # no current_city item: the transportation's route
            day["current_city"] = route
        if attractions:
            day["attraction"] = "".join(f"{a};" for a in attractions)
        plan.append(day)
    return plan


def travelplanner_state(query: dict[str, Any], db: Database, mode: str = "official") -> GlobalState:
    """Σ for one TravelPlanner query: its budget, no visited set."""
    pricing = TravelPlannerPricing(query, db, mode)
    return GlobalState(pricing, pricing.query["budget"])


def _fold(name: str) -> str:
    """The form Σ compares venue names in: case-folded, inner whitespace collapsed (as B2T's)."""
    return " ".join(name.split()).casefold()
