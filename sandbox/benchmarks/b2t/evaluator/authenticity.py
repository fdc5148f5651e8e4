"""Authenticity (4 constraints): what the plan names exists in the store, as the plan states it."""

from __future__ import annotations

from sandbox.benchmarks.b2t import geo
from sandbox.benchmarks.b2t.evaluator.context import POI_KIND, EvalContext
from sandbox.benchmarks.b2t.evaluator.lookup import WorldIndex
from sandbox.benchmarks.b2t.evaluator.registry import constraint
from sandbox.benchmarks.b2t.plan import Activity, normalize_name

# A stated local trip duration matches MapGuide when within max(10 min, 25 %) of its duration.
LOCAL_DURATION_TOLERANCE_MIN = 10.0
LOCAL_DURATION_TOLERANCE_FRACTION = 0.25


def within_hours(open_min: int | None, close_min: int | None, start: int, end: int) -> bool:
    """Whether [start, end] lies inside opening hours; close <= open means open past midnight."""
    if open_min is None or close_min is None:
        return True
    if close_min > open_min:
        return open_min <= start and end <= close_min
    return start >= open_min or end <= close_min


@constraint(
    "poi_authenticity",
    "Authenticity",
    "Every restaurant, attraction, entertainment venue and hotel exists in the store in "
    "the destination city (under its activity type).",
)
def poi_authenticity(ctx: EvalContext) -> list[str]:
    out = []
    for view, act, poi in ctx.local_activities():
        if not act.name:
            out.append(f"day {view.day.number} {act.label}: no name")
        elif poi is None:
            out.append(
                f"day {view.day.number} {act.label}: no {POI_KIND[act.type]} of that "
                f"name in {ctx.destination}"
            )
    return out


def _goes(act: Activity, origin: str, destination: str) -> bool:
    return (
        act.type == "intercity_transport"
        and normalize_name(act.from_city or "") == normalize_name(origin)
        and normalize_name(act.to_city or "") == normalize_name(destination)
    )


def _same(a: str | None, b: str | None) -> bool:
    return bool(a and b) and normalize_name(a) == normalize_name(b)


def services_for(index: WorldIndex, date: str | None, act: Activity) -> tuple:
    """The store's services with the activity's number (flights: on that date)."""
    if not act.number:
        return ()
    if act.mode == "train":
        return index.train(act.number)
    if act.mode == "flight" and date:
        return index.flight(act.number, date)
    return ()


def matching_services(services: tuple, act: Activity) -> list:
    """Services that run the activity's route at its stated times."""
    return [
        s
        for s in services
        if _same(s.origin_city, act.from_city)
        and _same(s.destination_city, act.to_city)
        and s.departure_time == act.start_time
        and s.arrival_time == act.end_time
    ]


def _seats(service) -> tuple[str, ...]:
    return tuple(service.fares) if hasattr(service, "fares") else (service.cabin_class,)


def service_fare(index: WorldIndex, date: str | None, act: Activity) -> float | None:
    """Per-person store fare of the activity's service and seat class (None if not found)."""
    for s in matching_services(services_for(index, date, act), act):
        if hasattr(s, "fares") and act.seat_class in s.fares:
            return s.fares[act.seat_class]
        if not hasattr(s, "fares") and s.cabin_class == act.seat_class:
            return s.total_price
    return None


def _service_problem(ctx: EvalContext, date: str | None, act: Activity) -> str | None:
    """Why an intercity activity is not a real service, or None when it is."""
    if act.mode not in ("train", "flight"):
        return "mode must be 'train' or 'flight'"
    if not act.number:
        return "no train/flight number"
    services = services_for(ctx.index, date, act)
    if not services:
        return f"no {act.mode} {act.number}" + (f" on {date}" if act.mode == "flight" else "")
    matching = matching_services(services, act)
    if not matching:
        s = services[0]
        return (
            f"{act.number} runs {s.origin_city} -> {s.destination_city} "
            f"{s.departure_time}-{s.arrival_time}, not {act.from_city} -> {act.to_city} "
            f"{act.start_time}-{act.end_time}"
        )
    offered = {seat for s in matching for seat in _seats(s)}
    if act.seat_class and act.seat_class not in offered:
        return f"{act.number} has no {act.seat_class!r} (offers {', '.join(sorted(offered))})"
    return None


@constraint(
    "intercity_transport_authenticity",
    "Authenticity",
    "Day 1 starts with the outbound and the last day ends with the return; every "
    "train/flight exists with its route, times, date and seat class.",
)
def intercity_transport_authenticity(ctx: EvalContext) -> list[str]:
    out = []
    q = ctx.query
    if q.needs_intercity and ctx.days:
        first, last = ctx.days[0].day.activities, ctx.days[-1].day.activities
        if not (first and _goes(first[0], q.origin, q.destination)):
            out.append(f"day 1 does not start with transport {q.origin} -> {q.destination}")
        if not (last and _goes(last[-1], q.destination, q.origin)):
            out.append(
                f"day {ctx.days[-1].day.number} does not end with transport {q.destination} -> {q.origin}"
            )
    for view, act in ctx.intercity():
        problem = _service_problem(ctx, view.date, act)
        if problem:
            out.append(f"day {view.day.number} {act.label}: {problem}")
    return out


@constraint(
    "local_transport_authenticity",
    "Authenticity",
    "Every local trip uses a known mode and its duration is within max(10 min, 25%) of "
    "MapGuide's for that mode between the two places.",
)
def local_transport_authenticity(ctx: EvalContext) -> list[str]:
    out = []
    for view in ctx.days:
        for leg in view.legs:
            mode, stated = leg.activity.transport.mode, leg.activity.transport.duration_min
            where = f"day {view.day.number} {leg.activity.label}"
            if mode is not None and mode not in geo.LOCAL_MODES:
                out.append(f"{where}: unknown local transport mode {mode!r}")
            elif leg.unknown_end and mode is not None:
                # An end the store does not know (or no hotel to start the day from): the trip's
                # duration and distance cannot be checked, so they are not accepted.
                out.append(f"{where}: the trip starts or ends at a place the store does not know")
            elif leg.expected is not None and stated is not None:
                expected = leg.expected.duration_min
                tolerance = max(LOCAL_DURATION_TOLERANCE_MIN, LOCAL_DURATION_TOLERANCE_FRACTION * expected)
                if abs(stated - expected) > tolerance:
                    out.append(
                        f"{where}: {mode} takes about {expected} min "
                        f"({leg.expected.distance_km} km), plan says {stated:g} min"
                    )
    return out


@constraint(
    "business_hours",
    "Authenticity",
    "Every visit (meal, attraction, entertainment, hotel check-in) lies within the place's business hours.",
)
def business_hours(ctx: EvalContext) -> list[str]:
    out = ctx.unknown_places(what="its business hours")
    for view, act, poi in ctx.local_activities():
        if poi is not None and not within_hours(poi.open_min, poi.close_min, act.start, act.end):
            hours = "-".join(f"{m // 60:02d}:{m % 60:02d}" for m in (poi.open_min, poi.close_min))
            out.append(f"day {view.day.number} {act.label}: outside business hours {hours}")
    return out
