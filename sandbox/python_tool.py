"""The agent's Python tool: model-written code runs jailed in a pool of supervisor processes.

Each pool slot is a long-lived supervisor (`sandbox/_python_worker.py`) that forks a fresh,
jailed child per call, so a call costs a fork rather than an interpreter start-up. The jail
(network/mount namespaces with a root file system that holds only the Python install and a
scratch directory, a separate uid, rlimits, an audit hook) is described in the worker's docstring
and in sandbox/README.md; `PythonSandbox.isolation` says which layers applied on this machine.
Without the kernel layer the code is not contained, so the pool refuses to start in that case
unless the caller opts in with `isolation="unsafe-ok"`. `run` is thread-safe: the episode
environment calls it from a thread pool, and each call holds one slot. Slots go to waiting calls
owner by owner (`owner=`, one per episode), so an episode that queues many calls delays another
episode's call by at most one call's time limit.
"""

import itertools
import json
import os
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Literal, get_args

from sandbox._python_cgroup import remove_leftovers
from sandbox.env import truncate_middle
from sandbox.types import ToolResult

_WORKER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_python_worker.py")
_STARTUP_TIMEOUT_S = 20.0
_PROTOCOL_SLACK_S = 5.0  # time a supervisor gets beyond the run's own timeout to answer
# "full": refuse to run without the kernel jail; "unsafe-ok": run with only the in-process audit hook.
Isolation = Literal["full", "unsafe-ok"]
ISOLATION_MODES: tuple[str, ...] = get_args(Isolation)


class PythonIsolationError(RuntimeError):
    """The kernel jail is unavailable and the caller did not accept running without it."""


@dataclass(frozen=True)
class PythonLimits:
    """Per-call limits; the defaults suit the agent's small calculations."""

    timeout_s: float = 2.0  # wall clock
    memory_mb: int = 512  # RLIMIT_AS of the child
    max_output_bytes: int = 65536  # beyond this the child is killed and the call fails
    max_output_chars: int = 4000  # what the agent sees (middle-truncated)
    max_code_chars: int = 20000
    max_file_mb: int = 16  # RLIMIT_FSIZE
    max_procs: int = 16  # RLIMIT_NPROC (only with the separate uid)


class _Slot:
    """One supervisor process and its protocol pipes."""

    def __init__(self, config: dict) -> None:
        self.base_dir: str = config["base_dir"]
        self.proc = subprocess.Popen(
            [sys.executable, "-I", _WORKER_PATH, json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
        hello = self.receive(_STARTUP_TIMEOUT_S)
        if not hello or not hello.get("ready"):
            self.kill()
            raise RuntimeError("the Python tool's supervisor process did not start")
        self.isolation: dict = hello["isolation"]

    def send(self, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.proc.stdin.write(struct.pack(">I", len(data)) + data)
        self.proc.stdin.flush()

    def receive(self, timeout_s: float) -> dict | None:
        """One frame, or None if the supervisor died or did not answer in time."""
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        buf = b""
        need = 4
        header_done = False
        while True:
            while len(buf) < need:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                    return None
                chunk = os.read(fd, need - len(buf))
                if not chunk:
                    return None
                buf += chunk
            if header_done:
                return json.loads(buf)
            need = struct.unpack(">I", buf)[0]
            buf, header_done = b"", True

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, 9)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        isolation = getattr(self, "isolation", {})
        if isolation.get("cgroup_paths"):  # a call cut short leaves its cgroup behind
            remove_leftovers(isolation["cgroup_paths"], isolation["cgroup_prefix"])


class _FairSlots:
    """Idle slots handed to waiting calls, fewest-slots-held owner first (ties: who asked first).

    A plain FIFO would serve an episode's 20 queued calls before a later episode's one call.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._idle: list[_Slot] = []
        self._waiting: list[tuple[int, Hashable]] = []  # (ticket, owner)
        self._held: Counter = Counter()
        self._tickets = itertools.count()

    def put(self, slot: _Slot) -> None:
        with self._cond:
            self._idle.append(slot)
            self._cond.notify_all()

    def get(self, owner: Hashable | None) -> tuple[_Slot, Hashable]:
        """Wait for a slot; returns it and the owner key to pass to `release`."""
        with self._cond:
            ticket = next(self._tickets)
            owner = ("call", ticket) if owner is None else owner
            entry = (ticket, owner)
            self._waiting.append(entry)
            try:
                while not (self._idle and self._first() == entry):
                    self._cond.wait()
            finally:
                self._waiting.remove(entry)
            self._held[owner] += 1
            self._cond.notify_all()  # the next waiter may take another idle slot
            return self._idle.pop(), owner

    def _first(self) -> tuple[int, Hashable]:
        return min(self._waiting, key=lambda w: (self._held[w[1]], w[0]))

    def release(self, owner: Hashable, slot: _Slot | None) -> None:
        with self._cond:
            self._held[owner] -= 1
            if not self._held[owner]:
                del self._held[owner]
            if slot is not None:
                self._idle.append(slot)
            self._cond.notify_all()


def _shutdown(slots: list, base_dirs: list) -> None:
    for slot in slots:
        slot.kill()
    for d in base_dirs:
        shutil.rmtree(d, ignore_errors=True)


class PythonSandbox:
    """A pool of `num_workers` jailed Python runners.

    `run(code)` returns a `ToolResult`: the combined stdout/stderr (a trailing expression's value
    is printed, as in a REPL) or an error result for exceptions, timeouts, limits and crashes.
    Never raises for anything the code does. `close()` (or the context manager) ends the pool.

    `isolation="full"` (the default) raises `PythonIsolationError` when the kernel jail cannot be
    set up here; `"unsafe-ok"` then runs with the audit hook and rlimits only, which hostile
    code can escape. `kernel_isolation=False` skips the jail (as on a machine without it).
    """

    def __init__(
        self,
        num_workers: int = 2,
        limits: PythonLimits = PythonLimits(),
        *,
        isolation: Isolation = "full",
        kernel_isolation: bool = True,
        audit_guard: bool = True,
    ) -> None:
        if num_workers < 1:
            raise ValueError("num_workers must be >= 1")
        if isolation not in ISOLATION_MODES:
            raise ValueError(
                f"Python tool isolation must be one of {list(ISOLATION_MODES)}, got {isolation!r}"
            )
        self.limits = limits
        self._kernel_isolation = kernel_isolation
        self._audit_guard = audit_guard
        self._idle = _FairSlots()
        self._slots: list[_Slot] = []
        self._base_dirs: list[str] = []
        self._lock = threading.Lock()
        self._closed = False
        self._finalizer = weakref.finalize(self, _shutdown, self._slots, self._base_dirs)
        self._idle.put(self._spawn())
        self.isolation: dict = self._slots[0].isolation
        if isolation == "full" and not self.isolation.get("kernel"):
            self.close()
            raise PythonIsolationError(
                f"the Python tool cannot be jailed here: {self.isolation.get('kernel_error')}; its jail "
                "needs root with mount and network namespaces (user namespaces alone are not used). "
                "Without it model-written code can read and change this machine: set "
                "rollout.python_tool_isolation=unsafe-ok (PythonSandbox(isolation='unsafe-ok')) to accept "
                "that, or disable the tool"
            )
        for _ in range(num_workers - 1):
            self._idle.put(self._spawn())

    def _spawn(self) -> _Slot:
        base_dir = tempfile.mkdtemp(prefix="b2t-python-")
        os.chmod(base_dir, 0o711)
        try:
            slot = _Slot(
                {
                    "base_dir": base_dir,
                    "kernel_isolation": self._kernel_isolation,
                    "audit_guard": self._audit_guard,
                }
            )
        except BaseException:
            shutil.rmtree(base_dir, ignore_errors=True)
            raise
        with self._lock:
            self._slots.append(slot)
            self._base_dirs.append(base_dir)
        return slot

    def _replace(self, slot: _Slot) -> _Slot:
        slot.kill()
        with self._lock:
            self._slots.remove(slot)
            self._base_dirs.remove(slot.base_dir)
        shutil.rmtree(slot.base_dir, ignore_errors=True)
        return self._spawn()

    def run(self, code: str, timeout_s: float | None = None, *, owner: Hashable | None = None) -> ToolResult:
        """Run `code` in a fresh jailed process; see the class docstring."""
        return self.run_timed(code, timeout_s, owner=owner)[0]

    def run_timed(
        self, code: str, timeout_s: float | None = None, *, owner: Hashable | None = None
    ) -> tuple[ToolResult, float]:
        """`run`, plus the seconds the call held a slot (what an episode's Python budget counts)."""
        if not isinstance(code, str):
            return ToolResult.error(f"'code' must be a string, got {type(code).__name__}"), 0.0
        lim = self.limits
        if len(code) > lim.max_code_chars:
            return ToolResult.error(f"code is {len(code)} characters; the limit is {lim.max_code_chars}"), 0.0
        if self._closed:
            return ToolResult.error("the Python tool has been shut down"), 0.0
        timeout = float(timeout_s if timeout_s is not None else lim.timeout_s)
        request = {
            "code": code,
            "timeout_s": timeout,
            "memory_mb": lim.memory_mb,
            "max_output_bytes": lim.max_output_bytes,
            "max_file_mb": lim.max_file_mb,
            "max_procs": lim.max_procs,
        }
        slot, owner = self._idle.get(owner)
        start = time.monotonic()
        try:
            result, slot = self._call(slot, request, timeout)
            return result, time.monotonic() - start
        except Exception as e:  # noqa: BLE001 - a broken pool must not crash the rollout
            return ToolResult.error(
                f"the Python tool failed: {type(e).__name__}: {e}"
            ), time.monotonic() - start
        finally:
            self._idle.release(owner, None if self._closed else slot)

    def _call(self, slot: _Slot, request: dict, timeout: float) -> tuple[ToolResult, _Slot]:
        """The reply to `request` and the slot to return to the pool (a new one if `slot` died)."""
        reply = None
        if slot.alive():
            try:
                slot.send(request)
                reply = slot.receive(timeout + _PROTOCOL_SLACK_S)
            except (OSError, ValueError):
                reply = None
        if reply is None:
            error = ToolResult.error("the Python process crashed or stopped answering; it was restarted")
            return error, self._replace(slot)
        return self._to_result(reply, timeout), slot

    def _to_result(self, reply: dict, timeout: float) -> ToolResult:
        lim = self.limits
        output = truncate_middle(reply["output"], lim.max_output_chars).rstrip("\n")
        status = reply["status"]
        if status == "ok":
            return ToolResult(output if output else "(no output)")
        reason = {
            "error": f"the code failed (exit code {reply['exit_code']})",
            "timeout": f"the code ran longer than the {timeout:g} s time limit and was stopped",
            "output_limit": f"the code printed more than {lim.max_output_bytes} bytes and was stopped",
            "internal": "the Python tool's supervisor failed",
        }.get(status)
        if status == "signal":
            sig = reply["signal"]
            reason = {
                24: "the code exceeded its CPU time limit",
                25: "the code wrote a file over the size limit",
                9: f"the code was killed (likely over the {lim.memory_mb} MB memory limit)",
            }.get(sig, f"the code was killed by signal {sig}")
        return ToolResult.error(f"{reason}\n{output}" if output else reason)

    def close(self) -> None:
        """Stop every supervisor and remove their directories."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> "PythonSandbox":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
