"""WeatherSearch: the forecast of a city for `n` consecutive days from a date."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from sandbox.benchmarks.b2t.tools.format import render
from sandbox.benchmarks.b2t.tools.places import resolve_city_arg
from sandbox.tools.args import N_MAX, N_MIN, Param, check_date, check_n

if TYPE_CHECKING:  # the store is only a type here
    from sandbox.benchmarks.b2t.world.store import World

WEATHER_PARAMS = (
    Param("city", "string", "city name", required=True),
    Param("date", "string", 'first date "YYYY-MM-DD" (default: first available date)'),
    Param("n", "integer", f"number of consecutive days ({N_MIN}-{N_MAX})", default=5),
)


def weather_search(world: World, args: dict[str, Any]) -> str:
    """WeatherSearch: n consecutive days of a city's forecast, noting where the store's dates end."""
    city = resolve_city_arg(world, args, "city")
    n = check_n(args["n"])
    start = (
        world.date_start
        if args["date"] is None
        else check_date(args["date"], "date", world.date_start, world.date_end)
    )
    last = (dt.date.fromisoformat(start) + dt.timedelta(days=n - 1)).isoformat()
    rows = world.query(
        "SELECT * FROM weather WHERE city = ? AND date BETWEEN ? AND ? ORDER BY date", (city, start, last)
    )
    items = [
        {
            "date": r["date"],
            "weather": r["weather"],
            "max_temp": r["max_temp"],
            "min_temp": r["min_temp"],
            "wind": r["wind"],
            "air_quality": r["air_quality"],
        }
        for r in rows
    ]
    header = f"Weather in {city} from {start}: {len(items)} day(s)."
    if len(items) < n:
        header += f" Forecasts end on {world.date_end}."
    return render(header, items)
