"""A launch script as a module, loaded by path: launch/ is not a package, so tests that call a
script's parse_args or main in-process load it through here."""

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(path: str) -> ModuleType:
    """The script at `path` (relative to the repository root, e.g. "launch/eval.py"), freshly executed."""
    file = ROOT / path
    spec = importlib.util.spec_from_file_location(f"script_{file.parent.name}_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
