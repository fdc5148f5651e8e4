"""The nine tools by name: their JSON schemas and the one entry point that runs a call.

`call_tool` never raises: bad calls become `ToolResult.error` with a message for the agent, and an
unexpected internal failure is logged and reported as an error result rather than crashing a
rollout.
"""

import logging
import reprlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sandbox.nesting import MAX_JSON_DEPTH, nested_deeper_than
from sandbox.tools.args import Param, ToolArgError, validate_arguments
from sandbox.tools.map_guide import MAP_PARAMS, map_guide
from sandbox.tools.poi_search import SEARCHES
from sandbox.tools.python_exec import PYTHON_PARAMS, python_run
from sandbox.tools.transport_search import FLIGHT_PARAMS, TRAIN_PARAMS, flight_search, train_search
from sandbox.tools.weather_search import WEATHER_PARAMS, weather_search
from sandbox.types import ToolResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    params: tuple[Param, ...]
    run: Callable[[Any, dict[str, Any]], str | ToolResult]

    def schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": {p.name: p.json_schema() for p in self.params},
                    "required": [p.name for p in self.params if p.required],
                },
            },
        }


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
    tool = TOOLS.get(name) if isinstance(name, str) else None
    if tool is None:
        return ToolResult.error(f"unknown tool {name!r}; available tools: {list(TOOL_NAMES)}")
    if nested_deeper_than(arguments):  # repr and validation would recurse past Python's limit
        return ToolResult.error(f"{name} arguments are nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        args = validate_arguments(name, tool.params, arguments)
        out = tool.run(world, args)
    except ToolArgError as e:
        return ToolResult.error(str(e))
    except sqlite3.Error as e:  # a corrupt or unreadable store: the environment's fault, not the agent's
        log.error("tool %s: store error (%s) on %s", name, e, reprlib.repr(arguments))
        return ToolResult.environment_fault(
            f"{name} could not read the travel database ({type(e).__name__}: {e})"
        )
    except Exception as e:  # a bug here must not kill a rollout; it is logged and surfaced
        log.exception("tool %s failed on %s", name, reprlib.repr(arguments))
        return ToolResult.error(f"{name} failed internally ({type(e).__name__}: {e})")
    return out if isinstance(out, ToolResult) else ToolResult(out)
