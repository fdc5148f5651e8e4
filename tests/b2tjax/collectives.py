"""Every cross-process call a pod's GRPO steps make, named by where the project made it.

A pod job of tests/b2tjax/pod_jobs.py with "collectives": PATH records, on each process, every call
of the cross-process primitives below made while the trainer runs its GRPO steps, and writes them
to PATH.pN (a JSON list of [call site, primitive], in call order). A call site is the innermost
project function on the stack outside the wrappers that only forward a collective (WRAPPERS).
tests/b2tjax/test_multihost.py then checks them against ALLOWED: a new collective anywhere else,
one that a process skips or makes elsewhere than the others, fails the test.
"""

from __future__ import annotations

import functools
import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Where a GRPO step may talk across processes, and why. Shrink it as the calls move into the one
# named agreement of a step (b2tjax/run/agreement.py agree_step).
ALLOWED = {
    "b2tjax/run/agreement.py:agree_step": "the step's one agreement: every process holds the same batch",
    # the sampler's protocol (rollout/lockstep.py): each round's flags, chunk widths, prefix copies
    "rollout/lockstep.py:loop_across_hosts": "the sampler's rounds in lock step",
    "rollout/device.py:prefill": "the sampler's chunk width and prefix copies, agreed per chunk",
    "rollout/device.py:_everyones": "the sampler's prefix copies of every process",
    # the orchestrator's checkpoint (b2tjax/run/checkpoint.py): a SIGTERM on one host stops every
    # host in the same step; Orbax's barriers around a save, also from its own threads
    "b2tjax/run/checkpoint.py:stop_agreed": "a stop asked of one host is agreed by all",
    "b2tjax/run/checkpoint.py:save": "Orbax's barriers around a step's save",
    "orbax/checkpoint/_src/multihost/multihost.py:sync_global_processes": "Orbax's barriers, its threads",
    "b2tjax/run/agreement.py:pool": "a phase's per-process parts (records, verdicts, counts) pooled",
}
# Functions that only forward a collective: the site is their caller.
WRAPPERS = {("rollout/hosts.py", "*")}
PRIMITIVES = {
    "rollout.hosts": ("allgather",),
    "jax.experimental.multihost_utils": ("process_allgather", "sync_global_devices", "broadcast_one_to_all"),
}

_inside = threading.local()  # .depth: a primitive calling another is recorded once


def call_site() -> str:
    """path:function of the innermost project frame that is not a wrapper (nor this module); on a
    thread that runs no project code, the innermost library frame outside JAX (package/path:function)."""
    frame, library = sys._getframe(2), None
    while frame is not None:
        path, name = Path(frame.f_code.co_filename).resolve(), frame.f_code.co_name
        if "site-packages" in path.parts:  # a library (CI's environment lives in the checkout)
            if library is None and "jax" not in path.parts:
                library = f"{path.as_posix().split('site-packages/')[-1]}:{name}"
        elif path.is_relative_to(ROOT) and not path.is_relative_to(ROOT / "tests"):
            rel = path.relative_to(ROOT).as_posix()
            if (rel, "*") not in WRAPPERS and (rel, name) not in WRAPPERS:
                return f"{rel}:{name}"
        frame = frame.f_back
    return library or "outside the project"


def record(out: str) -> Callable[[], None]:
    """Install the recording for one job; returns the function that writes what it saw to out.pN."""
    import importlib

    import jax

    from b2tjax.run.trainer import Trainer

    seen: list[tuple[str, str]] = []
    on = threading.Event()
    undo = []

    def counted(name, fn):  # noqa: ANN001, ANN202
        @functools.wraps(fn)
        def call(*args, **kwargs):  # noqa: ANN202
            depth = getattr(_inside, "depth", 0)
            if on.is_set() and not depth:
                seen.append((call_site(), name))
            _inside.depth = depth + 1
            try:
                return fn(*args, **kwargs)
            finally:
                _inside.depth = depth

        return call

    for module_name, names in PRIMITIVES.items():
        module = importlib.import_module(module_name)
        for name in names:
            undo.append((module, name, getattr(module, name)))
            setattr(module, name, counted(name, getattr(module, name)))
    steps = Trainer._grpo_steps

    def grpo_steps(self, *args, **kwargs):  # noqa: ANN001, ANN202
        on.set()
        try:
            return steps(self, *args, **kwargs)
        finally:
            on.clear()

    undo.append((Trainer, "_grpo_steps", steps))
    Trainer._grpo_steps = grpo_steps

    def write() -> None:
        for owner, name, original in undo:
            setattr(owner, name, original)
        Path(f"{out}.p{jax.process_index()}").write_text(json.dumps(seen))

    return write
