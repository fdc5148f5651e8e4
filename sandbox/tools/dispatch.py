"""A tool by name, its schema, and the one guarded way to run a call: shared by every benchmark.

`dispatch` never raises: an unknown tool, arguments nested too deeply to validate, an invalid
argument or a failing tool all come back as `ToolResult.error` with a message for the agent; a
store that cannot be read is an environment fault (the agent is not penalised for it).
"""

from __future__ import annotations

import logging
import reprlib
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sandbox.nesting import MAX_JSON_DEPTH, nested_deeper_than
from sandbox.tools.args import Param, ToolArgError, function_schema, validate_arguments
from sandbox.types import ToolResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    params: tuple[Param, ...]
    run: Callable[[Any, dict[str, Any]], str | ToolResult]  # (the benchmark's world or database, args)

    def schema(self) -> dict[str, Any]:
        return function_schema(self.name, self.description, self.params)


def dispatch(tools: Mapping[str, Tool], context: Any, name: Any, arguments: Any) -> ToolResult:
    """Run `tools[name]` on `context` with validated `arguments`; invalid calls return error results."""
    tool = tools.get(name) if isinstance(name, str) else None
    if tool is None:
        return ToolResult.error(f"unknown tool {name!r}; available tools: {list(tools)}")
    if nested_deeper_than(arguments):  # repr and validation would recurse past Python's limit
        return ToolResult.error(f"{name} arguments are nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        args = validate_arguments(name, tool.params, arguments)
        out = tool.run(context, args)
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
