"""What every launch script shares: a user mistake ends the run with one clear line, never a traceback.

`run_main(main)` runs a script's `main(argv)` and turns the errors a user can cause (a missing or
unreadable file, a full disk, a malformed file, a bad option) into `error: ...` on stderr and exit
status 2. Set `B2T_TRACEBACK=1` to see the full traceback instead. Kept free of JAX imports: the
data scripts must start without it.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from b2tjax.data.marker import MarkerError, check_marker, read_marker
from b2tjax.errors import UserError
from models.checksums import allow_unverified
from sandbox.benchmarks import BENCHMARKS, DEFAULT_BENCHMARK, BenchmarkError, benchmark_class
from sandbox.python_tool import PythonIsolationError

USER_ERROR_EXIT = 2
INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a Ctrl-C'd program


def describe_os_error(err: OSError) -> str:
    """One line for a file-system error, naming the path: 'no space left on device writing X'."""
    if err.filename is None:  # raised with a message of its own
        return str(err)
    path = err.filename
    if err.errno == errno.ENOSPC:
        return f"no space left on the device while writing {path}"
    if err.errno == errno.EROFS:
        return f"{path} is on a read-only file system"
    reason = err.strerror or type(err).__name__
    return f"{path}: {reason[0].lower() + reason[1:]}"


def tpu_attached() -> bool:
    """Whether the PCI bus has a TPU chip (Google's vendor id, what jax's hardware_utils looks for)."""
    for vendor in Path("/sys/bus/pci/devices").glob("*/vendor"):
        try:
            if vendor.read_text().strip() == "0x1ae0":
                return True
        except OSError:
            continue
    return False


def skip_absent_tpu() -> None:
    """With libtpu installed (the `[tpu]` or `[test]` extras) but no TPU chip attached, JAX still
    loads libtpu to probe for one, and libtpu prints "Failed to find host bounds" / "unexpected
    worker hostname" warnings on every CPU command. When JAX_PLATFORMS is unset and the PCI bus has
    no TPU, name the platforms that can be here instead (a visible NVIDIA GPU: "cuda,cpu", else
    "cpu"); JAX would have chosen the same. Compile-only TPU plans (launch/plan.py) load libtpu
    themselves and name what it asks for (`quiet_compile_only_libtpu`)."""
    if "JAX_PLATFORMS" in os.environ or importlib.util.find_spec("libtpu") is None or tpu_attached():
        return
    gpu = any(Path(d).exists() for d in ("/dev/nvidia0", "/dev/nvidiactl", "/dev/dxg"))
    cuda = any(importlib.util.find_spec(m) is not None for m in ("jax_cuda12_plugin", "jax_cuda13_plugin"))
    os.environ["JAX_PLATFORMS"] = "cuda,cpu" if gpu and cuda else "cpu"
    if "jax" in sys.modules:  # imported already (not yet started): its config read the variable
        sys.modules["jax"].config.update("jax_platforms", os.environ["JAX_PLATFORMS"])


def quiet_compile_only_libtpu(slice_type: str) -> None:
    """Before libtpu loads only to compile for a TPU slice of `slice_type` (e.g. "v5p-32"): on a
    host without a TPU, libtpu asks the host for its TPU type and workers, finds neither and prints
    "Failed to find host bounds" / "unexpected worker hostname" warnings. Name them (the slice's
    type, this host); a TPU host's own values, and any set by the user, are left alone."""
    if not tpu_attached():
        os.environ.setdefault("TPU_ACCELERATOR_TYPE", slice_type)
        os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")


def check_recipe(path: Path | None, configs: Path) -> None:
    """A `--config` that names no file: one line, with the recipes in `configs` it may have meant."""
    if path is None or path.exists():
        return  # a file, or something the loader names for what it is
    near = difflib.get_close_matches(path.name, sorted(p.name for p in configs.glob("*.yaml")), n=2)
    where = path.parent if path.parent.resolve() == configs.resolve() else configs  # as the user wrote it
    hint = f"; did you mean {' or '.join(str(where / name) for name in near)}?" if near else ""
    raise UserError(f"--config {path} does not exist{hint}")


def run_main(main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None) -> int:
    """`main(argv)`, with user errors reported in one line (exit 2) instead of a traceback; JAX is
    kept from probing for an absent TPU first (skip_absent_tpu)."""
    skip_absent_tpu()
    if os.environ.get("B2T_TRACEBACK"):
        return main(argv)
    try:
        return main(argv)
    # their messages name what is at fault (PythonIsolationError: what is missing and the opt-in)
    except (UserError, BenchmarkError, PythonIsolationError) as err:  # BenchmarkError: a corrupt store too
        message = str(err)
    except OSError as err:  # missing, unreadable or unwritable paths, a full disk
        message = describe_os_error(err)
    except UnicodeDecodeError as err:
        message = f"a file is not UTF-8 text ({err.reason} at byte {err.start})"
    except RecursionError:
        message = "an input is nested too deeply to read"
    except KeyboardInterrupt:  # a training run's second Ctrl-C (its first saves and stops)
        print("interrupted: stopped without saving", file=sys.stderr)
        return INTERRUPTED_EXIT
    print(f"error: {message}", file=sys.stderr)
    return USER_ERROR_EXIT


# Libraries whose INFO lines flood a run: Orbax logs through absl (flag lookups, missing metrics,
# metadata-store dumps), and JAX reports every accelerator backend it probes and does not find.
QUIET_LOGGERS = ("absl", "jax._src.xla_bridge")


def setup_logging() -> None:
    """Our scripts' INFO lines on stderr with time and source; the libraries' only from WARNING."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    for name in QUIET_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def check_output_file(path: Path, option: str) -> None:
    """Fail before any work when `path` cannot be written (a run must not end by losing its result)."""
    if path.is_dir():
        raise UserError(f"{option} {path} is a directory, expected a file path")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    writable = (
        parent.is_dir() and os.access(parent, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))
    )
    if not writable:
        raise UserError(f"{option} {path} is not writable")
    probe = parent / f".b2t-write-probe-{os.getpid()}"
    try:  # access() ignores read-only mounts; a real create does not
        probe.touch()
        probe.unlink()
    except OSError as err:
        reason = (err.strerror or type(err).__name__).lower()
        raise UserError(f"{option} {path} is not writable ({reason})") from None


def add_trust_option(parser: argparse.ArgumentParser) -> None:
    """`--trust-unverified`, for the scripts that load checkpoints (see `trust_from_args`)."""
    parser.add_argument(
        "--trust-unverified",
        action="store_true",
        help="load checkpoint directories that have no checksum manifest (b2t_checksums.json)",
    )


def trust_from_args(args: argparse.Namespace) -> None:
    """Apply `--trust-unverified`: without it a checkpoint with no manifest is refused."""
    allow_unverified(bool(args.trust_unverified))


def damaged_store(data_dir: Path, err: Exception) -> UserError:
    """The one line for an SQLite store that cannot be read (truncated, overwritten), naming it."""
    store = data_dir / "world.sqlite" if (data_dir / "world.sqlite").exists() else data_dir
    return UserError(f"{store} is damaged ({err}); rebuild it with launch/make_data.py")


def benchmark_parser(
    argv: Sequence[str] | None, purpose: str, *, reads_data: bool = True, **parser_options
) -> tuple[argparse.ArgumentParser, str]:
    """A script's parser with `--benchmark` (help: "benchmark `purpose`"), and the benchmark named
    in `argv`, else the one `--data DIR` holds (its marker), else the default: its own options depend
    on it, so it is read before the full parser exists. A `--benchmark` that the marker contradicts
    is a UserError. `reads_data=False` (make_data) takes no marker."""
    held_by = "the one --data holds, else " if reads_data else ""

    def add_benchmark(parser: argparse.ArgumentParser, default: str | None) -> None:
        parser.add_argument(
            "--benchmark",
            default=default,
            choices=sorted(BENCHMARKS),
            help=f"benchmark {purpose} (default: {held_by}{DEFAULT_BENCHMARK})",
        )

    first = argparse.ArgumentParser(add_help=False)
    add_benchmark(first, None)
    if reads_data:
        first.add_argument("--data", type=Path)
    known = first.parse_known_args(argv)[0]
    known.data = getattr(known, "data", None)
    try:
        held = read_marker(known.data)
        if known.benchmark is not None:
            check_marker(known.data, known.benchmark)
    except MarkerError as err:
        raise UserError(str(err)) from None
    name = known.benchmark or held or DEFAULT_BENCHMARK
    parser = argparse.ArgumentParser(formatter_class=argparse.RawDescriptionHelpFormatter, **parser_options)
    add_benchmark(parser, name)
    return parser, name


def add_benchmark_options(parser: argparse.ArgumentParser, name: str, *, data: bool = False) -> None:
    """Benchmark `name`'s own options (`add_data_arguments` for make_data, else `add_arguments`);
    a benchmark that cannot be loaded is a parser error."""
    try:
        benchmark = benchmark_class(name)
    except BenchmarkError as err:
        parser.error(str(err))
    (benchmark.add_data_arguments if data else benchmark.add_arguments)(parser)
