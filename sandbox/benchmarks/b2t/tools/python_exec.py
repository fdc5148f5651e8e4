"""The Python tool: model-written code runs in the isolated sandbox of `sandbox.python_tool`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sandbox.tools.args import Param
from sandbox.types import ToolResult

if TYPE_CHECKING:  # the World is only a type here: it imports the tool registry
    from sandbox.benchmarks.b2t.world.store import World

PYTHON_PARAMS = (Param("code", "string", "Python code to run; print() what you want to see", required=True),)


def python_run(world: World, args: dict[str, Any]) -> ToolResult:
    try:
        sandbox = world.python_tool()
    except ImportError as e:
        return ToolResult.error(f"the Python tool is not available in this installation ({e})")
    except RuntimeError as e:  # PythonIsolationError: no jail on this machine and no opt-in
        return ToolResult.error(f"the Python tool is disabled on this machine ({e})")
    return sandbox.run(args["code"])
