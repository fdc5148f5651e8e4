"""What the B2T expert's steps share (planner.py: transport; venues.py: hotel and places; days.py:
timing and the plan): search settings, the intercity Option, MapGuide leg helpers, text helpers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sandbox.benchmarks.b2t.expert.schedule import Place, Stop
from sandbox.expert_session import tool_call

SEARCH_N = 20
HOTEL_BUDGET_SHARE = 0.4
RADIUS_KM = 25.0
MAX_PLACE_ROUNDS = 4
FAST_MODES = ("Taxi", "Subway")
BRANCHING = 6
MAX_DAY_LEG_MINUTES = 120  # the evaluator's daily local transport limit
MIN_LEG_MINUTES = 5
BREAKFAST_OPEN_BY, BREAKFAST_CLOSE_FROM = 7 * 60 + 40, 9 * 60 + 30


@dataclass
class Option:
    """One intercity choice read from a search reply."""

    mode: str  # "train" | "flight"
    number: str
    kind: str  # profile vocabulary: High-speed Rail / Regular Train / Airplane
    seat: str
    depart: int
    arrive: int
    price: float  # per person

    def same_day_ok(self, latest_arrival: int, earliest_departure: int) -> bool:
        return earliest_departure <= self.depart < self.arrive <= latest_arrival


def add_new_legs(
    stops: Sequence[Stop], start: str, known: Mapping[tuple[str, str], Any], pairs: list[tuple[str, str]]
) -> None:
    """Append to `pairs` the (from, to) legs of a day walked from `start` that MapGuide has not
    answered yet (`known`) and that are not asked already: each leg is asked once per expert."""
    here = start
    for stop in stops:
        if stop.place is None:
            continue
        leg = (here, stop.place.name)
        if leg not in known and leg not in pairs:
            pairs.append(leg)
        here = stop.place.name


def map_guide_calls(city: str, pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """One MapGuide call per local leg inside `city`."""
    return [
        tool_call("MapGuide", origin_cityName=city, origin=a, destination_cityName=city, destination=b)
        for a, b in pairs
    ]


def hm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def describe(kind: str, p: Place, rooms: int) -> dict[str, str]:
    r = p.info
    if kind == "hotel":
        return {
            "description": f"{r.get('star', '')} {r.get('type', 'hotel').lower()} in "
            f"{r.get('district', '')}, rated {r.get('rating', '')}.",
            "tips": f"{rooms} room(s); facilities: {', '.join(r.get('facilities', [])) or 'basic'}.",
        }
    if kind == "attraction":
        return {
            "description": f"{r.get('type', '')}, rated {r.get('rating', '')}; about "
            f"{r.get('walking_km', 0)} km on foot.",
            "tips": f"Open {r.get('hours', '')}; ticket {r.get('ticket', 0)} CNY per person.",
        }
    return {
        "description": f"{r.get('style', '')} ({r.get('cuisine', '')}), rated {r.get('rating', '')}.",
        "tips": f"About {r.get('price_per_person', '')} CNY per person; open {r.get('hours', '')}.",
    }
