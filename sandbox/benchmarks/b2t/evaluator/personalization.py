"""Personalization (10 UPC constraints): the plan fits the hidden profile and the budget.

An attribute that is absent or null in the profile is unconstrained: its check passes. Profile
values may be a string or a list of strings; a list means "any of these". Attributes are read
from the store record of each POI (not from what the plan claims); a constrained attribute of a
place the store does not know is not met (`EvalContext.unknown_places`), nor is the budget of a
plan with an item whose store price cannot be found. Historical experiences are
folded in: a hotel, restaurant or attraction the user already visited (profile `history`) fails
the hotel star level, cuisine type or attraction type check respectively; past transportation
is not constrained (taking the same train again is no fault). The profile's intracity transport
preference has no constraint of its own (the paper's ten UPC do not include it).
"""

from __future__ import annotations

import math

from sandbox.benchmarks.b2t.evaluator.authenticity import service_fare, services_for
from sandbox.benchmarks.b2t.evaluator.context import EvalContext
from sandbox.benchmarks.b2t.evaluator.lookup import Poi, WorldIndex
from sandbox.benchmarks.b2t.evaluator.registry import constraint
from sandbox.benchmarks.b2t.plan import Activity, normalize_name
from sandbox.benchmarks.b2t.vocab import PRICE_LEVEL_RANGE, WALKING_LIMIT_KM

_HIGH_SPEED_PREFIXES = ("G", "D", "C")


def _matches(
    ctx: EvalContext, kind: str, dimension: str, attribute: str, history: str | None, value_of, describe: str
) -> list[str]:
    """Every POI of a kind has a wanted value, and is not one the user visited before."""
    wanted = ctx.profile.values(dimension, attribute)
    visited = ctx.profile.history_names(history) if history else frozenset()
    out = ctx.unknown_places((kind,), f"its {describe}") if wanted is not None else []
    for view, act, poi in ctx.local_activities():
        if poi is None or poi.kind != kind:
            continue
        where = f"day {view.day.number} {act.label}"
        if wanted is not None and not value_of(poi, wanted):
            out.append(f"{where}: {describe} {poi.category!r} not in {wanted}")
        if normalize_name(poi.name) in visited:
            out.append(f"{where}: the user has been there before")
    return out


@constraint(
    "hotel_star_level",
    "Personalization",
    "Every hotel has one of the user's star levels and is not one they stayed at before.",
)
def hotel_star_level(ctx: EvalContext) -> list[str]:
    return _matches(
        ctx,
        "hotel",
        "hotel",
        "star_requirement",
        "accommodations",
        lambda poi, wanted: poi.category in wanted,
        "star level",
    )


@constraint("hotel_amenities", "Personalization", "Every hotel has all of the user's essential facilities.")
def hotel_amenities(ctx: EvalContext) -> list[str]:
    wanted = ctx.profile.values("hotel", "essential_facilities")
    if wanted is None:
        return []
    out = ctx.unknown_places(("hotel",), "its facilities")
    for view, act, poi in ctx.local_activities():
        if poi is not None and poi.kind == "hotel":
            lacking = [f for f in wanted if f not in poi.facilities]
            if lacking:
                out.append(f"day {view.day.number} {act.label}: lacks {', '.join(lacking)}")
    return out


@constraint(
    "attraction_type",
    "Personalization",
    "Every attraction is of a type the user prefers and not one they visited before.",
)
def attraction_type(ctx: EvalContext) -> list[str]:
    return _matches(
        ctx,
        "attraction",
        "attraction",
        "preferred_attraction_types",
        "attractions",
        lambda poi, wanted: poi.category in wanted,
        "type",
    )


def daily_walking_km(ctx: EvalContext) -> list[float]:
    """Per day: MapGuide walking distance of the walking legs + the attractions' walking_km.

    A walking leg counts at the geo model's distance when both ends are known (a plan cannot
    shrink it by misstating it), else at its stated distance.
    """
    totals = []
    for view in ctx.days:
        km = 0.0
        for leg in view.legs:
            if leg.activity.transport.mode == "Walking":
                km += (
                    leg.expected.distance_km if leg.expected else (leg.activity.transport.distance_km or 0.0)
                )
        km += sum(
            poi.walking_km for poi in view.pois.values() if poi is not None and poi.kind == "attraction"
        )
        totals.append(km)
    return totals


@constraint(
    "walking_tolerance",
    "Personalization",
    "Walking per day (walking legs + attractions' walking) stays within the user's "
    "tolerance (Low 3 km, Medium 5 km, High unlimited).",
)
def walking_tolerance(ctx: EvalContext) -> list[str]:
    tolerance = ctx.profile.get("attraction", "walking_tolerance")
    if not isinstance(tolerance, str) or tolerance not in WALKING_LIMIT_KM:
        return []
    limit = WALKING_LIMIT_KM[tolerance]
    if limit == float("inf"):
        return []
    # Walking at an unknown attraction, or on a walking leg to or from an unknown place, is unknown.
    out = ctx.unknown_places(("attraction",), "its walking")
    out += [
        f"day {view.day.number} {leg.activity.label}: a walk to or from a place the store does not know"
        for view in ctx.days
        for leg in view.legs
        if leg.activity.transport.mode == "Walking" and leg.unknown_end
    ]
    return out + [
        f"day {view.day.number}: {km:.1f} km of walking (limit {limit:g} km)"
        for view, km in zip(ctx.days, daily_walking_km(ctx))
        if km > limit + 1e-9
    ]


@constraint(
    "cuisine_type",
    "Personalization",
    "Every meal is at a restaurant of a preferred cuisine the user has not been to.",
)
def cuisine_type(ctx: EvalContext) -> list[str]:
    return _matches(
        ctx,
        "restaurant",
        "dining",
        "cuisine_preferences",
        "restaurants",
        lambda poi, wanted: poi.category in wanted,
        "cuisine",
    )


@constraint(
    "price_level",
    "Personalization",
    "Every meal's restaurant has an average price per person inside the user's price "
    "level range (inclusive).",
)
def price_level(ctx: EvalContext) -> list[str]:
    wanted = ctx.profile.values("dining", "price_level")
    if wanted is None:
        return []
    ranges = [PRICE_LEVEL_RANGE[w] for w in wanted if w in PRICE_LEVEL_RANGE]
    out = ctx.unknown_places(("restaurant",), "its price level")
    for view, act, poi in ctx.local_activities():
        if (
            poi is not None
            and poi.kind == "restaurant"
            and not any(lo <= poi.avg_price <= hi for lo, hi in ranges)
        ):
            out.append(
                f"day {view.day.number} {act.label}: {poi.avg_price:g} CNY/person is "
                f"outside {', '.join(wanted)}"
            )
    return out


@constraint(
    "dining_environment",
    "Personalization",
    "Every meal's restaurant offers one of the user's dining environments.",
)
def dining_environment(ctx: EvalContext) -> list[str]:
    wanted = ctx.profile.values("dining", "dining_environment")
    if wanted is None:
        return []
    return ctx.unknown_places(("restaurant",), "its dining environment") + [
        f"day {view.day.number} {act.label}: environment {sorted(poi.environment)} has none of {wanted}"
        for view, act, poi in ctx.local_activities()
        if poi is not None and poi.kind == "restaurant" and not poi.environment & set(wanted)
    ]


def intercity_kind(ctx: EvalContext, date: str | None, act: Activity) -> str | None:
    """The profile vocabulary's name for a train/flight (store train type, else by number)."""
    if act.mode == "flight":
        return "Airplane"
    if act.mode != "train":
        return None
    services = services_for(ctx.index, date, act)
    if services:
        return services[0].train_type
    return "High-speed Rail" if (act.number or "").startswith(_HIGH_SPEED_PREFIXES) else ("Regular Train")


@constraint(
    "intercity_mode",
    "Personalization",
    "Every intercity trip uses the user's intercity mode (high-speed rail, regular train, airplane).",
)
def intercity_mode(ctx: EvalContext) -> list[str]:
    wanted = ctx.profile.values("transportation", "intercity_transport")
    if wanted is None:
        return []
    out = []
    for view, act in ctx.intercity():
        kind = intercity_kind(ctx, view.date, act)
        if kind not in wanted:
            out.append(
                f"day {view.day.number} {act.label}: {kind or 'unknown mode'} is not {' or '.join(wanted)}"
            )
    return out


@constraint("seat_class", "Personalization", "Every train/flight is booked in the user's seat class.")
def seat_class(ctx: EvalContext) -> list[str]:
    wanted = ctx.profile.values("transportation", "seat_class")
    if wanted is None:
        return []
    return [
        f"day {view.day.number} {act.label}: seat {act.seat_class!r} is not {' or '.join(wanted)}"
        for view, act in ctx.intercity()
        if act.seat_class not in wanted
    ]


def activity_cost(index: WorldIndex, people: int, date: str | None, act: Activity, poi: Poi | None) -> float:
    """What the budget check counts for one activity: max(stated price, store price).

    Store prices are for the whole party: meals and tickets avg_price x people, hotels the
    nightly avg_price x rooms (ceil(people / 2)), trains/flights the seat's fare x people. Taking
    the larger of the two means a plan can neither under-report nor hide an item's cost. `poi` is
    the store record of a local activity (None: not found, only the stated price counts); HiMAP's
    Σ prices committed items with this same function, so its spend is this check's total.
    """
    if act.type == "intercity_transport":
        fare = service_fare(index, date, act)
        store = fare * people if fare is not None else 0.0
    else:
        rooms = math.ceil(people / 2)
        store = 0.0 if poi is None else poi.avg_price * (rooms if act.type == "hotel" else people)
    return max(act.price or 0.0, store)


def item_costs(ctx: EvalContext) -> list[tuple[int, Activity, float]]:
    """(day, activity, cost) for every activity, each at `activity_cost`."""
    return [
        (
            view.day.number,
            act,
            activity_cost(ctx.index, ctx.query.people, view.date, act, view.pois.get(act.index)),
        )
        for view in ctx.days
        for act in view.day.activities
    ]


@constraint(
    "budget",
    "Personalization",
    "The plan's total cost (each item at the larger of its stated and store price) is "
    "within the query's budget.",
)
def budget(ctx: EvalContext) -> list[str]:
    if ctx.query.budget is None:
        return []
    # A price the store cannot confirm (an invented place or service) could be anything.
    out = ctx.unknown_places(what="its price")
    out += [
        f"day {view.day.number} {act.label}: no store fare for this service and seat, so its price "
        "cannot be verified"
        for view, act in ctx.intercity()
        if service_fare(ctx.index, view.date, act) is None
    ]
    costs = item_costs(ctx)
    total = sum(cost for _, _, cost in costs)
    if total <= ctx.query.budget + 1e-6:
        return out
    top = sorted(costs, key=lambda item: -item[2])[:2]
    return out + [
        f"total cost {total:.0f} CNY exceeds the budget {ctx.query.budget:.0f} CNY "
        f"(largest: " + ", ".join(f"day {d} {a.label} {c:.0f}" for d, a, c in top) + ")"
    ]
