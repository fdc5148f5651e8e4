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

import logging
import os
import tempfile
import threading
import time
import weakref
from collections.abc import Hashable
from dataclasses import asdict, dataclass
from typing import Literal, get_args

from sandbox._python_cleanup import remove_tree
from sandbox._python_pool import FairSlots, Slot
from sandbox.env import truncate_middle
from sandbox.types import ToolResult

log = logging.getLogger(__name__)
_PROTOCOL_SLACK_S = 5.0  # time a supervisor gets beyond the run's own timeout to answer
# A used slot must say it is clean (and has its next call prepared) this long after its result,
# or it is replaced: the supervisor's own bound (0.5 s) plus slack for a loaded machine.
_READY_S = 1.5
_REMOVE_S = 10.0  # the most the host spends deleting a replaced slot's directory
_CHILD_LIMITS = ("memory_mb", "max_output_bytes", "max_file_mb", "max_procs")  # what a supervisor enforces
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


def _environment_fault(message: str) -> ToolResult:
    """A failure of the tool's own runtime: logged for the operator, not charged to the agent."""
    log.warning("Python tool: %s", message)
    return ToolResult.environment_fault(message)


def _shutdown(slots: list, base_dirs: list) -> None:
    for slot in list(slots):
        slot.kill()
    for d in list(base_dirs):
        remove_tree(d, time.monotonic() + _REMOVE_S)


class PythonSandbox:
    """A pool of `num_workers` jailed Python runners.

    `run(code)` returns a `ToolResult`: the combined stdout/stderr (a trailing expression's value
    is printed, as in a REPL) or an error result for exceptions, timeouts, limits and crashes.
    Never raises for anything the code does. `close()` (or the context manager) ends the pool.

    `isolation="full"` (the default) raises `PythonIsolationError` when the kernel jail cannot be
    set up here; `"unsafe-ok"` then runs with the audit hook and rlimits only, which hostile
    code can escape. `kernel_isolation=False` skips the jail (as on a machine without it).
    At most `num_workers` calls run at once; `spare_workers` more slots (default: as many) serve
    while the slots just used clean up and prepare their next call, off any call's path.
    """

    def __init__(
        self,
        num_workers: int = 2,
        limits: PythonLimits = PythonLimits(),
        *,
        isolation: Isolation = "full",
        kernel_isolation: bool = True,
        audit_guard: bool = True,
        spare_workers: int | None = None,
    ) -> None:
        if num_workers < 1 or (spare_workers is not None and spare_workers < 0):
            raise ValueError("num_workers must be >= 1 and spare_workers >= 0")
        if isolation not in ISOLATION_MODES:
            raise ValueError(
                f"Python tool isolation must be one of {list(ISOLATION_MODES)}, got {isolation!r}"
            )
        self.limits = limits
        self._kernel_isolation = kernel_isolation
        self._audit_guard = audit_guard
        self._idle = FairSlots(num_workers)
        self._slots: list[Slot] = []
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
        for _ in range(num_workers - 1 + (num_workers if spare_workers is None else spare_workers)):
            self._idle.put(self._spawn())

    def _spawn(self) -> Slot:
        base_dir = tempfile.mkdtemp(prefix="b2t-python-")
        os.chmod(base_dir, 0o711)
        config = {
            "base_dir": base_dir,
            "kernel_isolation": self._kernel_isolation,
            "audit_guard": self._audit_guard,
            "limits": {k: v for k, v in asdict(self.limits).items() if k in _CHILD_LIMITS},
        }
        try:
            slot = Slot(config)
        except BaseException:
            remove_tree(base_dir, time.monotonic() + _REMOVE_S)
            raise
        with self._lock:
            self._slots.append(slot)
            self._base_dirs.append(base_dir)
            if not self._closed:
                return slot
        self._discard(slot)  # close() ran meanwhile: this slot must not outlive the pool
        remove_tree(base_dir, time.monotonic() + _REMOVE_S)
        raise RuntimeError("the Python tool has been shut down")

    def _discard(self, slot: Slot) -> None:
        """Kill `slot` and forget it; its directory is the caller's to delete (`_remove_dir`)."""
        slot.kill()
        with self._lock:
            if slot in self._slots:
                self._slots.remove(slot)
                self._base_dirs.remove(slot.base_dir)

    def _recycle(self, slot: Slot, healthy: bool) -> None:
        """Back to the idle slots once the supervisor says it is clean, else replaced (thread body).

        A slot that failed is never reused: a fresh one takes its place first, then the old
        directory is deleted (bounded), off every call's path.
        """
        try:
            ready = healthy and slot.receive(_READY_S) == {"ready": True}
        except (OSError, ValueError):  # close() killed the slot meanwhile
            ready = False
        if ready and not self._closed:
            self._idle.put(slot)
            return
        self._discard(slot)
        replacement = slot  # if none can start, the next call on the dead slot tries again, and says why
        if not self._closed:
            try:
                replacement = self._spawn()
            except Exception as e:  # noqa: BLE001
                slot.why_dead = f"no new supervisor started: {type(e).__name__}: {e}"
            self._idle.put(replacement)
        remove_tree(slot.base_dir, time.monotonic() + _REMOVE_S)

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
        slot, owner = self._idle.get(owner)
        start = time.monotonic()
        healthy = False
        try:
            result, healthy = self._call(slot, {"code": code, "timeout_s": timeout}, timeout)
            return result, time.monotonic() - start
        except Exception as e:  # noqa: BLE001 - a broken pool must not crash the rollout
            fault = _environment_fault(f"the Python tool failed: {type(e).__name__}: {e}")
            return fault, time.monotonic() - start
        finally:
            self._idle.release(owner)
            threading.Thread(target=self._recycle, args=(slot, healthy), daemon=True).start()

    def _call(self, slot: Slot, request: dict, timeout: float) -> tuple[ToolResult, bool]:
        """The reply to `request`, and whether the slot still answers (else it is replaced)."""
        if not slot.alive():  # died between calls: the runtime, not the code, failed
            return _environment_fault(f"the Python tool's runtime could not start ({slot.why_dead})"), False
        try:
            slot.send(request)
            reply = slot.receive(timeout + _PROTOCOL_SLACK_S)
        except (OSError, ValueError):
            reply = None
        if reply is None:
            crashed = "the Python process crashed or stopped answering; it was restarted"
            return ToolResult.error(crashed), False
        return self._to_result(reply, timeout), True

    def _to_result(self, reply: dict, timeout: float) -> ToolResult:
        lim = self.limits
        output = truncate_middle(reply["output"], lim.max_output_chars).rstrip("\n")
        status = reply["status"]
        if status == "internal":
            return _environment_fault(f"the Python tool's supervisor failed: {output}")
        if status == "ok":
            return ToolResult(output if output else "(no output)")
        reason = {
            "error": f"the code failed (exit code {reply['exit_code']})",
            "timeout": f"the code ran longer than the {timeout:g} s time limit and was stopped",
            "output_limit": f"the code printed more than {lim.max_output_bytes} bytes and was stopped",
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
