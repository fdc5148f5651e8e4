"""The repository's size rules: no module over 400 lines and no function over 60
outside the tests, so each module keeps one job and each function fits on a screen. A data table that
must grow past the limit belongs in a data file (JSON, CSV), not in code."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("sandbox", "models", "rollout", "b2tjax", "launch", "benchmarks")
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def oversized(paths: list[pathlib.Path]) -> list[str]:
    """One line per file or function over its limit."""
    found = []
    for path in paths:
        source = path.read_text()
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        if source.count("\n") > MAX_FILE_LINES:
            found.append(f"{name}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_module_or_function_over_the_limits() -> None:
    paths = sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))
    assert len(paths) > 100  # the scan sees the code, not an empty glob
    assert not oversized(paths), oversized(paths)


def test_the_scan_catches_a_long_function_and_a_long_file(tmp_path: pathlib.Path) -> None:
    long_function = tmp_path / "long_function.py"
    long_function.write_text("def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES)
    long_file = tmp_path / "long_file.py"
    long_file.write_text("x = 1\n" * (MAX_FILE_LINES + 1))
    fine = tmp_path / "fine.py"
    fine.write_text("def f():\n" + "    x = 1\n" * (MAX_FUNCTION_LINES - 1))
    found = oversized([long_function, long_file, fine])
    assert [line.split(":")[0].split("/")[-1] for line in found] == ["long_function.py", "long_file.py"]
