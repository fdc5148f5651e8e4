"""World sizes: how many records of each kind the generator writes, and over which calendar.

`small` is the default (seconds to build; tests, CPU demo, instances over spring-summer 2026);
`full` has the paper's shape (about 80k POIs, about 730k flight/train/weather records).
The small calendar is contained in the full one, so instance dates valid on small stay valid.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Scale:
    name: str
    restaurants: int  # per city
    hotels: int  # per city
    attractions: int  # per city
    entertainment: int  # per city
    date_start: str  # first calendar day (flights, weather), inclusive
    date_end: str  # last calendar day, inclusive
    flights_hub_routes_only: bool  # small: only routes with a hub end
    flights_per_route: tuple[int, int, int]  # daily flights for (hub-hub, hub-other, other-other)
    trains_per_pair: tuple[int, int]  # (high-speed, regular) services per ordered city pair


SCALES: dict[str, Scale] = {
    "small": Scale(
        "small",
        restaurants=400,
        hotels=50,
        attractions=45,
        entertainment=32,
        date_start="2026-03-01",
        date_end="2026-08-31",
        flights_hub_routes_only=True,
        flights_per_route=(2, 1, 0),
        trains_per_pair=(3, 1),
    ),
    "full": Scale(
        "full",
        restaurants=1233,
        hotels=938,
        attractions=342,
        entertainment=846,
        date_start="2026-01-01",
        date_end="2026-12-31",
        flights_hub_routes_only=False,
        flights_per_route=(5, 2, 1),
        trains_per_pair=(12, 7),
    ),
}
