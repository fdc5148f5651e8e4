"""Supervisor process of the Python tool: runs each request as a fresh, jailed call.

Started by `sandbox.python_tool.PythonSandbox` as `python -I _python_worker.py CONFIG_JSON`; it
imports nothing from the project (its helper modules `_python_jail`, `_python_seccomp`,
`_python_cgroup`, `_python_cleanup`, `_python_child` and `_python_zygote` are loaded by path)
so that it starts fast. The protocol on stdin/stdout is length-prefixed JSON frames (4-byte big-endian length,
then UTF-8 JSON): a hello, then per request the result and, after the clean-up, a ready frame.

Isolation, kernel layer (when the supervisor runs as root, which it tests at start-up):
  * the supervisor opens its cgroup directories, then moves itself into a new network namespace
    (only a downed loopback: no network) and a new mount namespace whose root is built from
    scratch: an empty read-only tmpfs holding read-only bind mounts of the Python install (with
    the host's site-packages, a virtual environment's included) and the system library
    directories, `/etc/ld.so.cache`, four harmless devices (`/dev/null`,
    `/dev/zero`, `/dev/random`, `/dev/urandom`) and a private tmpfs `/scratch` for the per-call
    working directories' mount points. It pivots into that root and detaches the old one, so no other file of
    the host (data directory, project checkout, /etc, /proc, /home, /dev/shm) exists for the code;
  * once jailed, it forks its zygote (`_python_zygote.py`), a quiescent process that forks each
    call's init and nothing else, so no call shares pages with a process that keeps working;
  * each call (`_python_child.py`), prepared before its code arrives, runs in its own cgroup
    (memory, processes and CPU of all its processes together), its own IPC namespace (System V
    and POSIX IPC die with the call) and PID namespace (no host process can be named; the call's
    processes die with its pid 1), under a separate uid with the rlimits AS, CPU, NPROC, FSIZE,
    NOFILE, CORE, the seccomp allow-list (`_python_seccomp.py`), a fresh tmpfs working directory
    (0700) and PR_SET_PDEATHSIG;
  * before the answer every process of the call is dead and reaped (and every process of the
    uid is killed); after it the working directory is unmounted and the cgroup removed, each
    step tried whatever the others did, within `_CLEANUP_S`, or the host replaces the slot.
Python layer (always): an audit hook that refuses sockets, process creation, signals to other
processes and writes outside the working directory with a clear message. Without root only the
Python layer, the rlimits and the process-group kill apply; that is not a security boundary,
which is why the host refuses that mode unless the caller opts in (`isolation="unsafe-ok"`).
"""

import importlib.util
import json
import os
import platform
import select
import signal
import struct
import sys
import time


def _load(name: str):
    """Import the sibling module `name` by path (the project is not on this process's path)."""
    spec = importlib.util.spec_from_file_location(
        name, os.path.join(os.path.dirname(os.path.abspath(__file__)), name + ".py")
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


jail = _load("_python_jail")
seccomp = _load("_python_seccomp")
cgroups = _load("_python_cgroup")
cleanup = _load("_python_cleanup")
child = _load("_python_child")
zygote = _load("_python_zygote")
_WORKDIR_MB = 64  # each call's working directory: a tmpfs of this size (its pages count in the cgroup)
_WORKDIR_INODES = 16384  # ... holding at most this many files and directories
_REAP_S = 5.0  # the most a stopped call's processes may take to die before the reply
_CLEANUP_S = 0.5  # the most cleaning up after a call and preparing the next may take
_FORK_S = 1.0  # the most the zygote may take to fork a prepared call


# ---------------------------------------------------------------- framing


def _read_exact(fd: int, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def _read_frame(fd: int) -> dict | None:
    head = _read_exact(fd, 4)
    if head is None:
        return None
    body = _read_exact(fd, struct.unpack(">I", head)[0])
    return None if body is None else json.loads(body)


def _write_frame(fd: int, obj: dict) -> None:
    data = json.dumps(obj).encode()
    os.write(fd, struct.pack(">I", len(data)) + data)


# ---------------------------------------------------------------- the supervisor


class _Call:
    """A prepared call: its init's pid, pidfd and pipes, its working directory, its number."""

    def __init__(
        self, n: int, pid: int, out_r: int, req_w: int, status_r: int, workdir: str, mounted: bool
    ) -> None:
        self.n, self.pid, self.out_r, self.req_w, self.status_r = n, pid, out_r, req_w, status_r
        self.workdir, self.mounted = workdir, mounted
        self.pidfd = os.pidfd_open(pid)  # the init cannot be reaped before this: see _python_zygote
        self.gone = False  # every process of the call is dead (and, without a zygote, reaped)


class Supervisor:
    def __init__(self, cfg: dict, private_fds: tuple[int, ...] = ()) -> None:
        self.base_dir = cfg["base_dir"]
        self.guard = bool(cfg.get("audit_guard", True))
        self.limits: dict = cfg["limits"]
        self.site_dirs: list[str] = cfg.get("site_dirs", [])
        self.uid = None
        self.cgroups = None
        self.zygote = None  # forks the calls once jailed; without the jail the supervisor does
        self.isolation = {
            "kernel": False,
            "network": "audit hook only",
            "filesystem": "audit hook only",
            "signals": "own session + process-group kill only",
            "uid": os.getuid(),
            "cgroup": "none: needs the kernel jail (root)",
        }
        os.umask(0o022)  # the jail's directories must be traversable by the run's uid
        if not cfg.get("kernel_isolation", True):
            self.isolation["kernel_error"] = "kernel isolation was switched off (kernel_isolation=False)"
        elif os.geteuid() != 0:
            self.isolation["kernel_error"] = f"the process runs as uid {os.geteuid()}, not root"
        else:
            self._enter_jail()
        if self.uid is not None:
            template = {"uid": self.uid, "guard": self.guard, "limits": self.limits}
            private = (*private_fds, *self.cgroups.dirs.values())
            self.zygote = zygote.Zygote(self.namespaces, self.base_dir, template, private)
        jail.libc.prctl(jail.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.runs = 0
        self.next: _Call | None = None  # the prepared call the next request runs in
        self.done: _Call | None = None  # the call that ran last, until it is cleaned up

    def _enter_jail(self) -> None:
        calls = cgroups.CallCgroups(f"b2t-python-{os.getpid()}")  # /sys is gone once jailed
        try:
            seccomp.compiled(platform.machine())  # built once here; every call inherits it
            self.namespaces = jail.own_namespaces()  # /proc is gone once jailed
            self.base_dir = jail.enter_jail(self.base_dir, self.site_dirs)
        except OSError as e:
            calls.close()
            self.isolation["kernel_error"] = f"the kernel refused the jail ({e})"
            return
        self.uid = jail.UID_BASE + os.getpid()
        self.cgroups = calls
        self.isolation = {
            "kernel": True,
            "network": "new network namespace (no interfaces up)",
            "filesystem": "own root: Python install and libraries read-only, a fresh tmpfs working "
            "directory per call",
            "signals": "separate uid per supervisor; own PID namespace per call",
            "ipc": "own IPC namespace per call",
            "seccomp": "allow-list of the system calls Python needs (no namespaces, mounts, bpf, "
            "io_uring, ptrace, keyring, netlink)",
            "uid": self.uid,
            "cgroup": calls.describe(),
            "cgroup_paths": calls.paths,
            "cgroup_prefix": calls.prefix,
        }

    def _sweep(self, call: _Call) -> None:
        """Kill the init, its process group and (with a uid) every process of the run's uid."""
        for target in (
            lambda: signal.pidfd_send_signal(call.pidfd, signal.SIGKILL),
            lambda: os.killpg(call.pid, signal.SIGKILL),  # a group keeps its number while it has members
        ):
            try:
                target()
            except ProcessLookupError:
                pass
        if self.uid is None:
            return
        # kill(-1) reaches every process whose real or saved uid is the run's; the saved uid 0
        # keeps the capabilities to switch back. No call process can name this one meanwhile:
        # they all live in PID namespaces of their own.
        os.setresuid(self.uid, self.uid, 0)
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        finally:
            os.setresuid(0, 0, 0)

    def _kill_and_reap(self, call: _Call, deadline: float) -> bool:
        """Sweep until every process of `call` is dead (and reaped); False if `deadline` came first.

        With the zygote, the init's pidfd says so: it reads as exited only once every process of
        its PID namespace is gone. Without it, the supervisor is a child subreaper and inherits
        orphaned grandchildren, so "no children left" means the run left nothing behind. Sweeps
        repeat because a fork bomb may add processes while one is under way.
        """
        while not call.gone and time.monotonic() < deadline:
            self._sweep(call)
            if self.zygote is not None:
                call.gone = bool(select.select([call.pidfd], [], [], 0.002)[0])
                continue
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                call.gone = True
                break
            time.sleep(0.002)
        return call.gone

    def prepare(self) -> None:
        """Create the next call (cgroup, working directory, its two processes) before its code exists."""
        self.runs += 1
        n = self.runs
        workdir = os.path.join(self.base_dir, f"run-{n}")
        mounted = self.uid is not None
        if mounted:
            jail.mount_workdir(workdir, self.uid, _WORKDIR_MB, _WORKDIR_INODES)
        else:
            os.mkdir(workdir, 0o700)
        joins = []
        if self.cgroups is not None:
            # The init counts too: one process and a few MB beyond the code's own.
            mem = (int(self.limits["memory_mb"]) + 32) * 2**20
            joins = self.cgroups.create(n, mem, int(self.limits["max_procs"]) + 1)
        out_r, out_w = os.pipe()
        req_r, req_w = os.pipe()
        status_r, status_w = os.pipe()
        os.set_blocking(status_r, False)
        try:
            if self.zygote is not None:
                pid = self.zygote.fork_call(n, [out_w, req_r, status_w, *joins], _FORK_S)
            else:
                call = {"uid": None, "guard": self.guard, "limits": self.limits, "joins": []}
                pid = zygote.fork_here([out_w, req_r, status_w], workdir, call, (out_r, req_w, status_r))
        finally:
            for fd in (out_w, req_r, status_w, *joins):
                os.close(fd)
        self.next = _Call(n, pid, out_r, req_w, status_r, workdir, mounted)

    def run(self, req: dict) -> dict:
        """Hand `req` to the prepared call and collect its outcome; its processes are dead after."""
        call, self.next = self.next, None
        self.done = call
        start = time.monotonic()
        try:
            _write_frame(call.req_w, {"code": req["code"], "timeout_s": req["timeout_s"]})
        except BrokenPipeError:
            pass  # the prepared call died: its own exit status and output say why
        os.close(call.req_w)
        return self._collect(float(req["timeout_s"]), call, start)

    def recycle(self) -> bool:
        """Clean up the call that ran and prepare the next; False when this slot must be replaced.

        Every step runs even when an earlier one failed (the cgroup is removed whatever became of
        the directory), and each is bounded by `_CLEANUP_S`: a slot that cannot be cleaned in
        that time is not reused.
        """
        call, self.done = self.done, None
        deadline = time.monotonic() + _CLEANUP_S
        ok = True
        if call is not None:
            steps = (
                lambda: os.close(call.out_r),
                lambda: os.close(call.status_r),
                lambda: self._kill_and_reap(call, deadline),
                lambda: os.close(call.pidfd),
                lambda: self._remove_workdir(call, deadline),
                lambda: self.cgroups is None or self.cgroups.destroy(call.n, deadline),
            )
            for step in steps:
                try:
                    ok = step() is not False and ok
                except Exception:  # noqa: BLE001 - a failed step means a dirty slot, not a crash
                    ok = False
        if ok and time.monotonic() < deadline:
            try:
                self.prepare()
            except Exception:  # noqa: BLE001
                return False
            return True
        return False

    def _remove_workdir(self, call: _Call, deadline: float) -> bool:
        if call.mounted:
            jail.unmount_workdir(call.workdir)
            return True
        return cleanup.remove_tree(call.workdir, deadline)

    def _collect(self, timeout: float, call: _Call, start: float) -> dict:
        """Output and outcome of `call`: the user process's wait status as its init reported it."""
        out_r = call.out_r
        deadline = start + timeout
        cap = int(self.limits["max_output_bytes"])
        poller = select.poll()
        poller.register(out_r, select.POLLIN | select.POLLHUP)
        poller.register(call.pidfd, select.POLLIN)
        out = bytearray()
        status, exited, eof = None, False, False
        while not exited or not eof:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if not exited:
                    status = "timeout"
                break  # else: the init exited; what it left running is killed below
            for fd, _ in poller.poll(remaining * 1000):
                if fd == out_r:
                    chunk = os.read(out_r, 65536)
                    if not chunk:
                        eof = True
                        poller.unregister(out_r)
                    out += chunk
                elif not exited:
                    exited = True
                    poller.unregister(call.pidfd)
                    deadline = min(deadline, time.monotonic() + 0.2)  # grace to drain the pipe
            if len(out) > cap:
                status = "output_limit"
                break
        self._kill_and_reap(call, time.monotonic() + _REAP_S)
        try:  # every writer is dead (or the slot is replaced): the user's status, or nothing
            raw = os.read(call.status_r, 4)
        except BlockingIOError:
            raw = b""
        # No status: the init was killed (a timeout, or the cgroup's OOM killer took the call).
        wait_status = struct.unpack("i", raw)[0] if len(raw) == 4 else signal.SIGKILL
        if status is None:
            if os.WIFSIGNALED(wait_status):
                status = "signal"
            else:
                status = "ok" if os.WEXITSTATUS(wait_status) == 0 else "error"
        return {
            "status": status,
            "output": bytes(out[:cap]).decode("utf-8", errors="replace"),
            "exit_code": os.WEXITSTATUS(wait_status) if os.WIFEXITED(wait_status) else None,
            "signal": os.WTERMSIG(wait_status) if os.WIFSIGNALED(wait_status) else None,
            "elapsed_s": round(time.monotonic() - start, 4),
        }


def _site(dirs: list[str]) -> None:
    """What `site` gives user code, without running any .pth file: site-packages on the path (after
    the standard library, as `site` puts them), and `exit`, `quit`, `help`, `copyright`."""
    sys.path.extend(d for d in dirs if d not in sys.path)
    import site

    site.setquit()
    site.setcopyright()
    site.sethelper()


def main() -> None:
    cfg = json.loads(sys.argv[1])
    _site(cfg.get("site_dirs", []))
    # The protocol gets its own descriptors; fd 0/1 then point at /dev/null so that nothing
    # printed by accident can corrupt a frame.
    req_fd, resp_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    supervisor = Supervisor(cfg, (req_fd, resp_fd))
    try:
        supervisor.prepare()
    except Exception as e:  # noqa: BLE001 - the host reports that the slot did not start
        _write_frame(resp_fd, {"ready": False, "error": f"{type(e).__name__}: {e}"})
        return
    _write_frame(resp_fd, {"ready": True, "isolation": supervisor.isolation})
    # Each request gets two frames: the call's result as soon as its processes are dead, then,
    # after the clean-up and the next call's preparation, whether this slot may serve again.
    while (req := _read_frame(req_fd)) is not None:
        try:
            resp = supervisor.run(req)
        except Exception as e:  # noqa: BLE001 - report, then clean up and let the host decide
            resp = {
                "status": "internal",
                "output": f"{type(e).__name__}: {e}",
                "exit_code": None,
                "signal": None,
                "elapsed_s": 0.0,
            }
        _write_frame(resp_fd, resp)
        clean = supervisor.recycle()
        _write_frame(resp_fd, {"ready": clean})
        if not clean:
            return  # the host replaces this slot; it is never reused


if __name__ == "__main__":
    main()
