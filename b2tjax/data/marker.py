"""A data directory names the benchmark it holds, so commands given only `--data DIR` read it.

`launch/make_data.py` writes `DIR/benchmark.json` ({"benchmark": "travelplanner"}); eval, rollouts
and train take the benchmark from it when none is given, and refuse a different one with a line
naming both. A directory built before the marker existed has none: the default or the given
benchmark is used, as before. The marker also holds a digest of the tool schemas the data was built
against ("tools"): SFT traces list the tools of their build while GRPO prompts list the code's, so
data built before a tool changed is refused in one line. `check_data_dir` is what every reader of
DATA checks first. Kept free of JAX imports (the data scripts start without it).
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from b2tjax.errors import UserError
from sandbox.benchmarks import benchmark_class
from sandbox.benchmarks.base import BenchmarkError

MARKER = "benchmark.json"


class MarkerError(ValueError):
    """The marker is unreadable, or names another benchmark than the one asked for (one line)."""


def tools_digest(data_dir: Path, benchmark: str) -> str | None:
    """A digest of the tool schemas `benchmark`'s agent gets on `data_dir` (the world of its first
    training instance), as this code defines them; None without a training split."""
    return _tools_digest(Path(data_dir).resolve(), benchmark)


@functools.cache
def _tools_digest(data_dir: Path, benchmark: str) -> str | None:
    """Cached: the launcher checks DATA before JAX starts and the task again when it opens it;
    the training split is read for it once per process."""
    bench = benchmark_class(benchmark)(data_dir)
    try:
        visible = bench.load_visible(bench.splits[0])
    except BenchmarkError:
        return None
    if not visible:
        return None
    schemas = bench.world_for(visible[0]).tool_schemas()
    return hashlib.sha256(json.dumps(schemas, sort_keys=True).encode()).hexdigest()[:16]


def write_marker(data_dir: Path, benchmark: str) -> None:
    """Record which benchmark `data_dir` holds and its tools' digest (same bytes for the same
    benchmark and tools: reproducible builds)."""
    marker = {"benchmark": benchmark}
    digest = tools_digest(data_dir, benchmark)
    if digest is not None:
        marker["tools"] = digest
    (data_dir / MARKER).write_text(json.dumps(marker) + "\n", encoding="utf-8")


def check_tools(data_dir: Path, benchmark: str) -> None:
    """Refuse data built against other tool schemas than this code's (a marker without a digest,
    from before digests were recorded, is accepted as before)."""
    try:
        recorded = json.loads((data_dir / MARKER).read_text(encoding="utf-8")).get("tools")
    except (OSError, ValueError, AttributeError):
        return  # no marker, or one read_marker reports
    if recorded is not None and recorded != tools_digest(data_dir, benchmark):
        raise UserError(
            f"{data_dir} was built with other tool schemas than this code's (its SFT traces would "
            f"list other tools than the prompts); rebuild it with launch/make_data.py --benchmark "
            f"{benchmark} --out {data_dir} --force"
        )


def read_marker(data_dir: Path | str | None) -> str | None:
    """The benchmark `data_dir` holds; None when there is no directory or no marker."""
    if data_dir is None:
        return None
    path = Path(data_dir) / MARKER
    if not path.is_file():
        return None
    try:
        name = json.loads(path.read_text(encoding="utf-8")).get("benchmark")
    except (OSError, ValueError, AttributeError) as err:
        raise MarkerError(
            f"{path} is not a benchmark marker ({err}); rebuild with launch/make_data.py"
        ) from None
    if not isinstance(name, str):
        raise MarkerError(f"{path} names no benchmark; rebuild with launch/make_data.py")
    return name


def check_marker(data_dir: Path | str | None, benchmark: str) -> None:
    """Refuse to run `benchmark` on a directory built for another one."""
    held = read_marker(data_dir)
    if held is not None and held != benchmark:
        raise MarkerError(
            f"{data_dir} holds {held} data, not {benchmark}: pass --benchmark {held} "
            f"(or build {benchmark} data with launch/make_data.py --benchmark {benchmark})"
        )


def check_data_dir(data_dir: Path, benchmark: str) -> None:
    """UserError unless `data_dir` is a complete `benchmark` data directory: a file, an empty or
    absent directory, another benchmark's data, or missing pieces are each one line."""
    if data_dir.exists() and not data_dir.is_dir():
        raise UserError(f"data directory {data_dir} is a file")
    if not data_dir.is_dir() or not any(data_dir.iterdir()):
        raise UserError(
            f"data directory {data_dir} is absent or empty; build it with "
            f"launch/make_data.py --benchmark {benchmark} --out {data_dir}"
        )
    try:
        check_marker(data_dir, benchmark)
    except MarkerError as err:
        raise UserError(str(err)) from None
    missing = benchmark_class(benchmark).missing_data(data_dir)
    if missing:
        raise UserError(
            f"data directory {data_dir} lacks {', '.join(missing)}; rebuild it with launch/"
            f"make_data.py --out {data_dir} --force (or point data.data_dir elsewhere)"
        )
    check_tools(data_dir, benchmark)
