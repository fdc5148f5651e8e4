"""The Python tool's pool machinery: a slot (one supervisor process) and the fair hand-out of slots.

Used by `sandbox.python_tool.PythonSandbox`, which owns the slots' lifecycle.
"""

import itertools
import json
import os
import select
import site
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Hashable

from sandbox._python_cgroup import remove_leftovers

_WORKER_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_python_worker.py")
_STARTUP_TIMEOUT_S = 20.0
# The supervisor starts without `site` (-S): the .pth files of this install may import whatever
# they like (an editable finder, a certificate hook), which would then sit in every call's
# forked memory and cost each fork and exit. It gets the site-packages directories instead.
_SITE_DIRS = [d for d in site.getsitepackages() if os.path.isdir(d)]


class Slot:
    """One supervisor process and its protocol pipes."""

    def __init__(self, config: dict) -> None:
        self.base_dir: str = config["base_dir"]
        self.why_dead = "its supervisor process exited"  # what a call finding it dead reports
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-S", _WORKER_PATH, json.dumps({**config, "site_dirs": _SITE_DIRS})],
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
            why = f": {hello['error']}" if hello and hello.get("error") else ""
            raise RuntimeError(f"the Python tool's supervisor process did not start{why}")
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


class FairSlots:
    """Idle slots handed to waiting calls, fewest-slots-held owner first (ties: who asked first).

    A plain FIFO would serve an episode's 20 queued calls before a later episode's one call. At
    most `limit` calls hold a slot at once; further idle slots are spares that serve while the
    slots just used are cleaned up.
    """

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._cond = threading.Condition()
        self._idle: list[Slot] = []
        self._waiting: list[tuple[int, Hashable]] = []  # (ticket, owner)
        self._held: Counter = Counter()
        self._tickets = itertools.count()

    def put(self, slot: Slot) -> None:
        with self._cond:
            self._idle.append(slot)
            self._cond.notify_all()

    def get(self, owner: Hashable | None) -> tuple[Slot, Hashable]:
        """Wait for a slot; returns it and the owner key to pass to `release`."""
        with self._cond:
            ticket = next(self._tickets)
            owner = ("call", ticket) if owner is None else owner
            entry = (ticket, owner)
            self._waiting.append(entry)
            try:
                while not (self._idle and sum(self._held.values()) < self._limit and self._first() == entry):
                    self._cond.wait()
            finally:
                self._waiting.remove(entry)
            self._held[owner] += 1
            self._cond.notify_all()  # the next waiter may take another idle slot
            return self._idle.pop(), owner

    def _first(self) -> tuple[int, Hashable]:
        return min(self._waiting, key=lambda w: (self._held[w[1]], w[0]))

    def release(self, owner: Hashable) -> None:
        """The owner's call is over (its slot comes back through `put` once it is clean)."""
        with self._cond:
            self._held[owner] -= 1
            if not self._held[owner]:
                del self._held[owner]
            self._cond.notify_all()
