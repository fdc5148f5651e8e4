"""The nine tools by name: their JSON schemas and the one entry point that runs a call.

`call_tool` never raises: bad calls become `ToolResult.error` with a message for the agent, and an
unexpected internal failure is logged and reported as an error result rather than crashing a
rollout.
"""

from typing import Any

from sandbox.benchmarks.b2t.tools.map_guide import MAP_PARAMS, map_guide
from sandbox.benchmarks.b2t.tools.poi_search import SEARCHES
from sandbox.benchmarks.b2t.tools.python_exec import PYTHON_PARAMS, python_run
from sandbox.benchmarks.b2t.tools.transport_search import (
    FLIGHT_PARAMS,
    TRAIN_PARAMS,
    flight_search,
    train_search,
)
from sandbox.benchmarks.b2t.tools.weather_search import WEATHER_PARAMS, weather_search
from sandbox.tools.dispatch import Tool, dispatch
from sandbox.types import ToolResult

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
    Tool("Python", "Run Python code and return its output or the error.", PYTHON_PARAMS, python_run),
)
TOOLS: dict[str, Tool] = {t.name: t for t in _TOOL_LIST}
TOOL_NAMES: tuple[str, ...] = tuple(TOOLS)


def tool_schemas() -> list[dict[str, Any]]:
    """OpenAI-style function schemas of every tool, in a fixed order."""
    return [t.schema() for t in _TOOL_LIST]


def call_tool(world: Any, name: Any, arguments: Any) -> ToolResult:
    """Run tool `name` with `arguments` against `world`; invalid calls return error results."""
    return dispatch(TOOLS, world, name, arguments)
