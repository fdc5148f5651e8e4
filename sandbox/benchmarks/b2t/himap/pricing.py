"""Σ's pricing for B2T: plan activities priced exactly as the evaluator's budget check prices them.

Item shape: one activity of the B2T plan format (docs/ARCHITECTURE.md, "Plan format"), e.g.
    {"type": "meal", "meal": "lunch", "name": "Spicy House", "start_time": "12:20",
     "end_time": "13:20", "price": 220.0, "transport": {...}}
plus "day" (Σ sets it to the day the item is committed to). The activity is read with the plan
reader (`sandbox.benchmarks.b2t.plan.read_plan`), so every spelling the reader accepts is accepted
here, and it is
priced with the evaluator's own `activity_cost` (max of stated and store price, party and room
rules; flights at the fare of the trip's date for that day). A merged plan whose days list the
committed activities of each day (`state.committed(day)` as it is: the plan reader ignores the
activities' "day") has the evaluator's total cost == Σ.spent.

Rules beyond the evaluator's tolerance: a meal, attraction, entertainment or hotel that is not in
the destination's store, or a train/flight that does not run as stated (route, times, seat, date),
is UNKNOWN_PLACE (the evaluator would count only its stated price and fail authenticity anyway).

Venue keys: restaurants and attractions by their normalised name (`no_repeated_restaurants`
compares meals that way). History keys add hotels. The visited set comes from the visible
trajectory: what the user booked in the destination is exactly the profile's hidden
history (sandbox/benchmarks/b2t/instances/trajectories.py builds the history from those
bookings), so Σ never reads the
hidden profile. The query's facts (destination, dates, people, budget) are the ones the instruction
states; `from_ground_truth` reads them from the ground truth's "query" part only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sandbox.benchmarks.b2t.evaluator.authenticity import service_fare
from sandbox.benchmarks.b2t.evaluator.context import POI_KIND, Query, parse_query
from sandbox.benchmarks.b2t.evaluator.lookup import WorldIndex, index_for
from sandbox.benchmarks.b2t.evaluator.personalization import activity_cost
from sandbox.benchmarks.b2t.plan import Activity, normalize_name, read_plan
from sandbox.himap.state import BadItem, GlobalState, UnknownPlace

# Store kinds whose repeats the evaluator penalises (restaurants: no_repeated_restaurants;
# attractions: the attraction checks) and kinds it penalises revisiting (profile history).
_VENUE_KINDS = ("restaurant", "attraction")
_HISTORY_KINDS = ("restaurant", "attraction", "hotel")


class B2TPricing:
    """Prices, keys and modes of B2T plan activities for one trip (world store + query)."""

    def __init__(self, world: Any, query: Query):
        if not query.destination:
            raise ValueError("the query has no destination: B2T items cannot be priced")
        self.index: WorldIndex = index_for(world)
        self.query = query

    @classmethod
    def from_ground_truth(cls, world: Any, ground_truth: dict) -> B2TPricing:
        """Pricing for an instance; reads only the ground truth's "query" (never its profile)."""
        return cls(world, parse_query(ground_truth))

    # ----- Pricing protocol --------------------------------------------------------------------

    def cost(self, item: dict) -> float:
        act = self._activity(item)
        date = self.query.date_of(item["day"])
        if act.type == "intercity_transport":
            if act.mode is None or not act.number:
                raise BadItem(f"{act.label}: an intercity item needs a mode (train/flight) and a number")
            if service_fare(self.index, date, act) is None:
                raise UnknownPlace(
                    f"no {act.mode} {act.number} {act.from_city} -> {act.to_city} {act.start_time}-"
                    f"{act.end_time} with seat {act.seat_class!r}" + (f" on {date}" if date else "")
                )
            return activity_cost(self.index, self.query.people, date, act, None)
        poi = self.index.poi(POI_KIND[act.type], self.query.destination, act.name)
        if poi is None:
            raise UnknownPlace(f"no {POI_KIND[act.type]} named {act.name!r} in {self.query.destination}")
        return activity_cost(self.index, self.query.people, date, act, poi)

    def venue_key(self, item: dict) -> str | None:
        return self._key(self._activity(item), _VENUE_KINDS)

    def history_key(self, item: dict) -> str | None:
        return self._key(self._activity(item), _HISTORY_KINDS)

    def transport_mode(self, item: dict) -> str | None:
        act = self._activity(item)
        return act.mode if act.type == "intercity_transport" else None

    def slot(self, item: dict) -> str | None:
        act = self._activity(item)
        return act.meal if act.type == "meal" else ("hotel" if act.type == "hotel" else None)

    def label(self, item: dict) -> str:
        try:
            return f"day {item.get('day')} {self._activity(item).label}"
        except BadItem:
            return f"day {item.get('day')} item {item.get('name') or item.get('number') or '?'!r}"

    # ----- helpers -----------------------------------------------------------------------------

    def _activity(self, item: dict) -> Activity:
        """The item read by the plan reader, as the evaluator reads it inside a plan."""
        days = self.query.days
        if days is not None and not (isinstance(item.get("day"), int) and 1 <= item["day"] <= days):
            raise BadItem(f"day {item.get('day')!r} is outside the {days}-day trip")
        body = {k: v for k, v in item.items() if k != "day"}
        result = read_plan([{"day": item.get("day", 1), "activities": [body]}])
        if not result.ok:  # the reader's reason names "day N activity 1": the item is named by Σ
            raise BadItem(result.reason.replace(f"day {item.get('day', 1)} activity 1", "the item", 1))
        act = result.plan.days[0].activities[0]
        if act.type != "intercity_transport" and not act.name:
            raise BadItem(f"{act.label}: a {act.type} item needs a name")
        return act

    def _key(self, act: Activity, kinds: tuple[str, ...]) -> str | None:
        kind = POI_KIND.get(act.type)
        return f"{kind}:{normalize_name(act.name)}" if kind in kinds and act.name else None


def visited_from_trajectory(trajectory: Iterable[dict], destination: str) -> frozenset[str]:
    """History keys of what the user booked in the destination (restaurants, attractions, hotels),
    read from the visible behaviour trajectory."""
    dest = normalize_name(destination)
    out = set()
    for event in trajectory:
        if not isinstance(event, dict) or event.get("action") != "book":
            continue
        kind, name, details = event.get("poi_type"), event.get("poi_name"), event.get("details")
        if (
            kind in _HISTORY_KINDS
            and isinstance(name, str)
            and isinstance(details, dict)
            and normalize_name(str(details.get("city", ""))) == dest
        ):
            out.add(f"{kind}:{normalize_name(name)}")
    return frozenset(out)


def b2t_state(world: Any, visible: dict, ground_truth: dict) -> GlobalState:
    """Σ for one B2T instance: the query's budget, the visited set from the visible trajectory."""
    pricing = B2TPricing.from_ground_truth(world, ground_truth)
    visited = visited_from_trajectory(visible.get("trajectory") or [], pricing.query.destination or "")
    return GlobalState(pricing, pricing.query.budget, visited)
