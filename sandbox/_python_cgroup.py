"""One cgroup per Python-tool call: the call's memory, process count and CPU bounded as a whole.

rlimits bound each process on its own, so a call that forks could hold N times the memory limit;
a cgroup counts every process of the call together. The supervisor opens its own cgroup's
directories before it enters the jail (the jail has no /sys) and creates the per-call cgroups
through those descriptors. cgroup v2 is used when this process's cgroup may enable the memory
and pids controllers for its children; else the v1 memory, pids and cpu hierarchies; else none,
and `describe()` says what stays bounded per process only. Imports nothing from the project (the
supervisor loads it by path); the host uses `remove_leftovers` after killing a supervisor.
"""

import os
import signal
import time

_CPU_PERIOD_US = 100_000
_REQUIRED = {"memory.max", "memory.limit_in_bytes", "pids.max"}


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(mount point, root inside the hierarchy, fs type, options) of every cgroup mount."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(fields) >= 5 and len(rfields) >= 3 and rfields[0] in ("cgroup", "cgroup2"):
                found.append((fields[4], fields[3], rfields[0], set(rfields[2].split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """Controller name (or "" for v2) -> this process's cgroup path."""
    paths = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for c in controllers.split(",") if controllers else [""]:
                paths[c] = path
    return paths


def _join(mount: str, root: str, path: str) -> str | None:
    if root != "/" and not (path == root or path.startswith(root + "/")):
        return None  # our cgroup is outside what this mount shows
    rel = path[len(root) :] if root != "/" else path
    return mount + rel.rstrip("/")


def _read(dir_fd: int, name: str) -> str:
    fd = os.open(name, os.O_RDONLY, dir_fd=dir_fd)
    try:
        return os.read(fd, 1 << 16).decode()
    finally:
        os.close(fd)


def _write(dir_fd: int, name: str, value: str) -> None:
    fd = os.open(name, os.O_WRONLY, dir_fd=dir_fd)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _v2_parent(mounts, own) -> tuple[str, list[str]] | None:
    """The v2 parent directory and the controllers its children get, if memory and pids can be had."""
    for mount, root, fstype, _ in mounts:
        path = _join(mount, root, own.get("", "/")) if fstype == "cgroup2" else None
        if path is None or not os.path.isdir(path):
            continue
        available = open(os.path.join(path, "cgroup.controllers")).read().split()
        for c in ("memory", "pids", "cpu"):
            if c in available:
                try:  # fails (EBUSY) when our cgroup holds processes and is not the root
                    with open(os.path.join(path, "cgroup.subtree_control"), "w") as f:
                        f.write(f"+{c}")
                except OSError:
                    pass
        enabled = open(os.path.join(path, "cgroup.subtree_control")).read().split()
        if "memory" in enabled and "pids" in enabled:
            return path, [c for c in ("memory", "pids", "cpu") if c in enabled]
    return None


class CallCgroups:
    """Per-call cgroups named `{prefix}-{n}` under this process's own cgroup(s)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.version = 0
        self.error = ""
        self.dirs: dict[str, int] = {}  # controller ("" for v2) -> parent directory descriptor
        self.paths: list[str] = []  # the parents' host paths, for `remove_leftovers`
        try:
            self._open()
        except OSError as e:
            self.error = f"cgroups unavailable ({e})"
            self.close()

    def _open(self) -> None:
        mounts, own = _mounts(), _own_paths()
        v2 = _v2_parent(mounts, own)
        if v2 is not None:
            self.version, self.controllers = 2, v2[1]
            self.paths = [v2[0]]
            self.dirs[""] = os.open(v2[0], os.O_RDONLY | os.O_DIRECTORY)
            return
        for mount, root, fstype, options in mounts:
            for c in ("memory", "pids", "cpu"):
                if fstype == "cgroup" and c in options and c in own and c not in self.dirs:
                    path = _join(mount, root, own[c])
                    if path and os.access(path, os.W_OK):
                        self.dirs[c] = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
                        self.paths.append(path)
        if "memory" in self.dirs and "pids" in self.dirs:
            self.version, self.controllers = 1, list(self.dirs)
        else:
            self.error = "no writable cgroup with the memory and pids controllers"
            self.close()

    def describe(self) -> str:
        if self.version:
            return (
                f"cgroup v{self.version} per call bounding {'+'.join(self.controllers)} of all its processes"
            )
        return (
            f"none: {self.error}; memory and CPU time are bounded per process only (RLIMIT_AS, "
            "RLIMIT_CPU) and processes per uid (RLIMIT_NPROC), so a call's forks together may exceed them"
        )

    def create(self, n: int, memory_bytes: int, max_procs: int, cpus: float = 1.0) -> list[int]:
        """Make call `n`'s cgroup; returns write descriptors of its `cgroup.procs` to join it."""
        if not self.version:
            return []
        name = f"{self.prefix}-{n}"
        quota = f"{int(cpus * _CPU_PERIOD_US)}"
        settings = {
            "memory": [("memory.max", str(memory_bytes)), ("memory.swap.max", "0"), ("memory.oom.group", "1")]
            if self.version == 2
            else [
                ("memory.limit_in_bytes", str(memory_bytes)),
                ("memory.memsw.limit_in_bytes", str(memory_bytes)),
            ],
            "pids": [("pids.max", str(max_procs))],
            "cpu": [("cpu.max", f"{quota} {_CPU_PERIOD_US}")]
            if self.version == 2
            else [("cpu.cfs_period_us", str(_CPU_PERIOD_US)), ("cpu.cfs_quota_us", quota)],
        }
        joins = []
        for key, parent in self.dirs.items():
            os.mkdir(name, 0o755, dir_fd=parent)
            call = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=parent)
            try:
                for controller in [key] if key else self.controllers:
                    for file, value in settings[controller]:
                        try:
                            _write(call, file, value)
                        except OSError:
                            if file in _REQUIRED:
                                raise  # the optional ones depend on kernel options (swap accounting)
                joins.append(os.open("cgroup.procs", os.O_WRONLY, dir_fd=call))
            finally:
                os.close(call)
        return joins

    def destroy(self, n: int, deadline: float) -> None:
        """Kill whatever of call `n` still runs and remove its cgroup directories by `deadline`.

        Every controller's directory is tried even when one fails; the first failure is raised.
        """
        name = f"{self.prefix}-{n}"
        failure = None
        for parent in self.dirs.values():
            try:
                _kill_and_remove(parent, name, max(0.0, deadline - time.monotonic()))
            except OSError as e:
                failure = failure or e
        if failure is not None:
            raise failure

    def close(self) -> None:
        for fd in self.dirs.values():
            os.close(fd)
        self.dirs = {}


def _kill_and_remove(parent: int, name: str, wait_s: float = 5.0) -> None:
    """SIGKILL every process in `parent/name`, then rmdir it (retried while they die)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            call = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=parent)
        except FileNotFoundError:
            return
        try:
            for pid in _read(call, "cgroup.procs").split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
        finally:
            os.close(call)
        try:
            os.rmdir(name, dir_fd=parent)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def remove_leftovers(paths: list[str], prefix: str) -> None:
    """Host side: remove the call cgroups a killed supervisor left under `paths`."""
    for path in paths:
        try:
            parent = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue
        try:
            for entry in os.listdir(parent):
                if entry.startswith(prefix + "-"):
                    try:
                        _kill_and_remove(parent, entry)
                    except OSError:
                        pass
        finally:
            os.close(parent)
