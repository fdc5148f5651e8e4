"""The Tiny Trip world: a few cities with lunch places and their prices, one lookup tool."""

from __future__ import annotations

import json
from typing import Any

from sandbox.tools.args import Param
from sandbox.tools.dispatch import Tool, dispatch
from sandbox.types import ToolResult

RESTAURANTS: dict[str, dict[str, float]] = {
    "Avalon": {"Corner Deli": 12.0, "Noodle Bar": 18.0, "Blue Cafe": 30.0, "Harbor Grill": 45.0},
    "Brightwater": {"Soup Stop": 9.0, "Taco Stand": 14.0, "Olive Tree": 26.0},
}


def _lookup(world: TinyTripWorld, args: dict[str, Any]) -> str:
    city = args["city"]
    if city not in RESTAURANTS:
        return ToolResult.error(f"no city {city!r}; cities: {sorted(RESTAURANTS)}")
    rows = sorted(RESTAURANTS[city].items(), key=lambda kv: kv[1])
    return "\n".join(json.dumps({"name": name, "price": price}) for name, price in rows)


TOOLS = {
    "RestaurantLookup": Tool(
        "RestaurantLookup",
        "Lunch places of a city with their price per meal, cheapest first.",
        (Param("city", "string", "the city", required=True),),
        _lookup,
    )
}


class TinyTripWorld:
    """The World protocol (sandbox.types.World) over the table above."""

    def call_tool(self, name: str, arguments: dict) -> ToolResult:
        return dispatch(TOOLS, self, name, arguments)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [tool.schema() for tool in TOOLS.values()]


def price(city: str, name: str) -> float | None:
    """A restaurant's price in `city`, None when the city has no such place."""
    return RESTAURANTS.get(city, {}).get(name)
