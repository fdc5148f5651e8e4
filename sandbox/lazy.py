"""Lazy package exports: `import sandbox` (or a benchmark package) stays cheap, and importing one
part never drags in the others."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module-level `__getattr__` for `package` that imports `exports[name]` (a module path) on
    first use of `name` and returns that module's attribute."""

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(exports[name]), name)

    return __getattr__
