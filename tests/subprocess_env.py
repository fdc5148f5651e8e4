"""The environment of a training subprocess in the tests: CPU JAX, unbuffered output, and one
persistent compilation cache shared by the runs of a test, so a resumed or second run reuses the
first runs' executables instead of compiling again."""

from __future__ import annotations

import os
from pathlib import Path


def subprocess_env(cache: Path, devices: int | None = None) -> dict[str, str]:
    """os.environ plus the CPU backend and the shared compilation cache `cache`; `devices`: that
    many fake CPU devices (XLA_FLAGS), else the inherited setting."""
    env = dict(
        os.environ,
        JAX_PLATFORMS="cpu",
        PYTHONUNBUFFERED="1",
        JAX_COMPILATION_CACHE_DIR=str(cache),
        JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
        JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
    )
    if devices is not None:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    return env
