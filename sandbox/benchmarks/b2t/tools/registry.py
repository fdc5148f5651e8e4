"""The agent's tools over a world store: their JSON schemas and `B2TTools`, the face an episode
calls them through (the store itself is SQL only).

`call_tool` never raises: bad calls become `ToolResult.error` with a message for the agent, and an
unexpected internal failure is logged and reported as an error result rather than crashing a
rollout. The Python tool is not here: the episode environment runs it (sandbox.env); a prompt adds
its schema only when the run enables it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sandbox.benchmarks.b2t.tools.map_guide import MAP_PARAMS, map_guide
from sandbox.benchmarks.b2t.tools.poi_search import SEARCHES
from sandbox.benchmarks.b2t.tools.transport_search import (
    FLIGHT_PARAMS,
    TRAIN_PARAMS,
    flight_search,
    train_search,
)
from sandbox.benchmarks.b2t.tools.weather_search import WEATHER_PARAMS, weather_search
from sandbox.env import python_tool_schema
from sandbox.tools.dispatch import Tool, dispatch
from sandbox.types import ToolResult

if TYPE_CHECKING:  # the store is only a type here
    from sandbox.benchmarks.b2t.world.store import World

_TOOL_LIST = (
    *(Tool(s.tool, s.description, s.params(), s.run) for s in SEARCHES),
    Tool(
        "FlightSearch",
        "Search flights between two cities on a date, optionally by cabin class.",
        FLIGHT_PARAMS,
        flight_search,
    ),
    Tool("TrainSearch", "Search the daily trains between two cities.", TRAIN_PARAMS, train_search),
    Tool(
        "WeatherSearch", "Weather of a city for consecutive days from a date.", WEATHER_PARAMS, weather_search
    ),
    Tool(
        "MapGuide",
        "Routes between two places: walking, transit (subway, bus) and driving (taxi, "
        "ride-sharing) inside a city, or train/flight/drive options between two cities.",
        MAP_PARAMS,
        map_guide,
    ),
)
TOOLS: dict[str, Tool] = {t.name: t for t in _TOOL_LIST}
TOOL_NAMES: tuple[str, ...] = tuple(TOOLS)


def tool_schemas(python: bool = False) -> list[dict[str, Any]]:
    """OpenAI-style function schemas of every tool in a fixed order; the Python tool's last when
    `python` (the episodes get a Python runner)."""
    return [t.schema() for t in _TOOL_LIST] + ([python_tool_schema()] if python else [])


class B2TTools:
    """The tools of one world store, as `EpisodeEnv` calls them (sandbox.types.World). Pickles as
    its store (which pickles as its path)."""

    def __init__(self, store: World):
        self.store = store

    def __repr__(self) -> str:
        return f"B2TTools({self.store!r})"

    def call_tool(self, name: Any, arguments: Any) -> ToolResult:
        """Run tool `name` with `arguments` against the store; invalid calls return error results."""
        return dispatch(TOOLS, self.store, name, arguments)

    def tool_schemas(self) -> list[dict[str, Any]]:
        """The world tools' schemas (the Python tool is the episode's, see `tool_schemas`)."""
        return tool_schemas()
