"""Distances and local travel times between coordinates.

One model of movement inside a city, shared by the MapGuide tool (what the agent is told) and by
the evaluator (what a plan's local transport is checked against), so the two never disagree.
"""

import math
from dataclasses import dataclass

EARTH_RADIUS_KM = 6371.0088

# mode -> (detour factor over the straight line, mean speed km/h, fixed overhead minutes).
# Overheads model waiting, walking to stations and parking; detours model street grids.
LOCAL_MODES: dict[str, tuple[float, float, float]] = {
    "Walking": (1.25, 4.8, 0.0),
    "Subway": (1.30, 32.0, 8.0),
    "Bus": (1.35, 16.0, 7.0),
    "Taxi": (1.35, 26.0, 4.0),
    "Ride-sharing": (1.35, 26.0, 6.0),
}
# Inter-city ground travel (road) for MapGuide between cities.
INTERCITY_DRIVE = (1.25, 75.0, 0.0)


@dataclass(frozen=True)
class Route:
    mode: str
    distance_km: float
    duration_min: int


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance in km."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(min(1.0, a)))


def _route(mode: str, straight_km: float, detour: float, speed: float, overhead: float) -> Route:
    distance = straight_km * detour
    minutes = overhead + 60.0 * distance / speed
    return Route(mode=mode, distance_km=round(distance, 1), duration_min=max(1, int(round(minutes))))


def local_route(mode: str, lat1: float, lon1: float, lat2: float, lon2: float) -> Route:
    """Route of one local mode (one of `vocab.INTRACITY_MODES`) between two points."""
    if mode not in LOCAL_MODES:
        raise ValueError(f"unknown local transport mode {mode!r}; use one of {sorted(LOCAL_MODES)}")
    return _route(mode, haversine_km(lat1, lon1, lat2, lon2), *LOCAL_MODES[mode])


def local_routes(lat1: float, lon1: float, lat2: float, lon2: float) -> dict[str, Route]:
    """Every local mode's route between two points in the same city."""
    straight = haversine_km(lat1, lon1, lat2, lon2)
    return {mode: _route(mode, straight, *params) for mode, params in LOCAL_MODES.items()}


def intercity_drive(lat1: float, lon1: float, lat2: float, lon2: float) -> Route:
    """Driving route between two cities."""
    return _route("Driving", haversine_km(lat1, lon1, lat2, lon2), *INTERCITY_DRIVE)
