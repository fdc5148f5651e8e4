"""The environment of a training subprocess in the tests: CPU JAX, unbuffered output, and a
persistent compilation cache shared by several runs (the session's `jax_cache` of tests/conftest.py,
or a module's), so a resumed or second run reuses the first runs' executables instead of compiling
again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def xla_flags(devices: int) -> str:
    """The inherited XLA flags (the suite's, tests/conftest.py) with `devices` fake CPU devices."""
    kept = [f for f in os.environ.get("XLA_FLAGS", "").split() if "host_platform_device_count" not in f]
    return " ".join([*kept, f"--xla_force_host_platform_device_count={devices}"])


def fake_devices_env(devices: int) -> dict[str, str]:
    """os.environ on the CPU backend with `devices` fake CPU devices."""
    return dict(os.environ, XLA_FLAGS=xla_flags(devices), JAX_PLATFORMS="cpu")


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
        env["XLA_FLAGS"] = xla_flags(devices)
    return env


def script_json(script: str, devices: int) -> dict:
    """Run a test module as a script on `devices` fake CPU devices (a device count is fixed when JAX
    starts, so a sharded check needs its own process); the JSON of its last output line."""
    env = fake_devices_env(devices)
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        [sys.executable, script], env=env, capture_output=True, text=True, timeout=600, cwd=str(root)
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
