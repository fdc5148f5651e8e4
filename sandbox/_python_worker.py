"""Supervisor process of the Python tool: runs each request in a fresh, jailed child.

Started by `sandbox.python_tool.PythonSandbox` as `python -I _python_worker.py CONFIG_JSON`; it
imports nothing from the project so that it starts fast and can be run by path. The protocol on
stdin/stdout is length-prefixed JSON frames (4-byte big-endian length, then UTF-8 JSON).

Isolation, kernel layer (when the supervisor runs as root, which it tests at start-up):
  * the supervisor moves itself into a new network namespace (only a downed loopback: no
    network) and a new mount namespace whose root is built from scratch: an empty read-only
    tmpfs holding read-only bind mounts of the Python install (standard library, site-packages)
    and the system library directories, `/etc/ld.so.cache`, four harmless devices (`/dev/null`,
    `/dev/zero`, `/dev/random`, `/dev/urandom`) and a private tmpfs `/scratch` for the per-run
    working directories. It pivots into that root and detaches the old one, so no other file
    of the host (data directory, project checkout, /etc, /proc, /home) exists for the code;
  * each child gets its own uid (so it cannot signal or read the host, the supervisor or other
    runs; RLIMIT_NPROC counts only its own processes), a fresh 0700 working directory, its own
    session, PR_SET_PDEATHSIG, and the rlimits AS, CPU, NPROC, FSIZE, NOFILE, CORE;
  * after the run every process of that uid is killed (`kill(-1)` from a process holding the
    uid), which also catches children that left the process group.
Python layer (always): an audit hook that refuses sockets, process creation, signals to other
processes and writes outside the working directory with a clear message. Without root only the
Python layer, the rlimits and the process-group kill apply; that is not a security boundary,
which is why the host refuses that mode unless the caller opts in (`isolation="unsafe-ok"`).
"""

import ast
import ctypes
import io
import json
import linecache
import os
import platform
import resource
import select
import shutil
import signal
import struct
import sys
import sysconfig
import time
import traceback

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MNT_DETACH = 0x2
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41}  # glibc has no wrapper
CODE_FILENAME = "<python>"
UID_BASE = 1_000_000  # far above any real account; uid = UID_BASE + supervisor pid (unique while alive)
JAIL_SCRATCH = "/scratch"  # where the working directories live inside the jail
# System library directories (a symlink such as /lib -> usr/lib is recreated as a symlink).
_LIB_DIRS = ("/lib", "/lib32", "/lib64", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/local/lib")
_DEVICES = ("/dev/null", "/dev/zero", "/dev/random", "/dev/urandom")
_FILES = ("/etc/ld.so.cache",)

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source, target, fstype, flags: int, data) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def _python_dirs() -> list[str]:
    """The Python install's directories the jailed interpreter imports from.

    Only paths inside the install prefixes: a `.pth` entry pointing elsewhere (an editable
    install of the project checkout) is deliberately left out.
    """
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    paths = sysconfig.get_paths()
    candidates = [paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    candidates += [sysconfig.get_config_var("LIBDIR") or "", *sys.path]
    dirs = {os.path.realpath(p) for p in candidates if p and os.path.isdir(p)}
    return [d for d in dirs if any(d == p or d.startswith(p + os.sep) for p in prefixes)]


def _outermost(dirs: set[str]) -> list[str]:
    """`dirs` without those nested in another one (a bind mount already shows them)."""
    return sorted(d for d in dirs if not any(d != o and d.startswith(o + os.sep) for o in dirs))


def _bind_read_only(source: str, root: str, flags: int = MS_NOSUID | MS_NODEV) -> None:
    """Bind `source` at the same path under `root`, read-only."""
    target = root + source
    if os.path.isdir(source):
        os.makedirs(target, 0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
        open(target, "a").close()
    _mount(source, target, None, MS_BIND, None)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags, None)


def _build_root(root: str) -> None:
    """Fill the empty tmpfs at `root` with what the jail exposes (see the module docstring)."""
    dirs = set(_python_dirs())
    for d in _LIB_DIRS:
        if os.path.islink(d):
            os.makedirs(os.path.dirname(root + d), 0o755, exist_ok=True)
            os.symlink(os.readlink(d), root + d)
        elif os.path.isdir(d):
            dirs.add(os.path.realpath(d))
    for d in _outermost(dirs):
        _bind_read_only(d, root)
    for f in _FILES:
        if os.path.isfile(f):
            _bind_read_only(f, root)
    for dev in _DEVICES:
        if os.path.exists(dev):
            _bind_read_only(dev, root, MS_NOSUID)
    os.makedirs(root + JAIL_SCRATCH, 0o755)
    _mount("tmpfs", root + JAIL_SCRATCH, "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=0711")
    _mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, None)


def _pivot_into(root: str) -> None:
    """Make `root` this mount namespace's `/` and detach the host's file system from it."""
    number = SYS_PIVOT_ROOT.get(platform.machine())
    if number is None:
        raise OSError(0, f"pivot_root: unknown system call number on {platform.machine()}")
    os.chdir(root)
    _check(_libc.syscall(number, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", MNT_DETACH), "umount old root")
    os.chdir("/")


def _enter_jail(root: str) -> str:
    """New network + mount namespace rooted in a fresh tmpfs at `root`; returns the scratch dir."""
    _check(_libc.unshare(CLONE_NEWNET | CLONE_NEWNS), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    try:
        _build_root(root)
        _pivot_into(root)
    except OSError:
        _libc.umount2(root.encode(), MNT_DETACH)  # leave the host's directory usable (unsafe-ok)
        raise
    return JAIL_SCRATCH


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


# ---------------------------------------------------------------- the jailed child


def _audit_guard(workdir: str):
    """Audit hook that refuses what the sandbox does not offer, with a message the agent can read."""
    real = os.path.realpath
    workdir = real(workdir)
    own_pid = os.getpid()
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    path_events = {
        "os.remove",
        "os.rename",
        "os.rmdir",
        "os.mkdir",
        "os.symlink",
        "os.link",
        "os.chmod",
        "os.chown",
        "os.truncate",
        "os.utime",
        "shutil.rmtree",
        "shutil.copyfile",
        "shutil.move",
    }
    process_events = {
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.exec",
        "os.spawn",
        "os.system",
        "subprocess.Popen",
        "pty.spawn",
        "os.startfile",
    }

    def inside(path) -> bool:
        if isinstance(path, int):
            return True  # an already-open descriptor
        try:
            p = real(os.fsdecode(path))
        except (TypeError, ValueError):
            return False
        return p == workdir or p.startswith(workdir + os.sep)

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & write_flags
            )
            if writing and path is not None and not inside(path):
                raise PermissionError(f"writing outside the working directory is not allowed: {path!r}")
        elif event in path_events:
            for a in args:
                if isinstance(a, (str, bytes, os.PathLike)) and not inside(a):
                    raise PermissionError(f"{event} outside the working directory is not allowed: {a!r}")
        elif event.startswith("socket."):
            raise PermissionError("network access is disabled in the Python tool")
        elif event in process_events:
            raise PermissionError("starting processes is disabled in the Python tool")
        elif event in ("os.kill", "os.killpg", "signal.pthread_kill"):
            if event != "os.kill" or args[0] != own_pid:
                raise PermissionError("sending signals to other processes is not allowed")

    return hook


def _print_user_traceback(exc: BaseException) -> None:
    """Traceback without the sandbox's own frames (they are noise to the agent)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename != __file__]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.StackSummary.from_list(frames).format()
    lines += traceback.format_exception_only(type(exc), exc)
    sys.stderr.write("".join(lines))


def _run_user_code(code: str) -> int:
    """Execute `code` like a script; a trailing expression's value is printed, as in a REPL."""
    linecache.cache[CODE_FILENAME] = (len(code), None, code.splitlines(True), CODE_FILENAME)
    scope = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        tree = ast.parse(code, CODE_FILENAME)
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, CODE_FILENAME, "exec"), scope)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), CODE_FILENAME, "eval"), scope)
            if value is not None:
                print(repr(value))
        return 0
    except SystemExit as e:
        if e.code is None or e.code == 0:
            return 0
        if not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
            return 1
        return e.code
    except BaseException as e:  # noqa: BLE001 - everything the user code raises is reported
        _print_user_traceback(e)
        return 1


def _child(req: dict, out_w: int, workdir: str, uid: int | None, guard: bool) -> None:
    """Runs in the forked child; never returns."""
    code = 1
    supervisor_pid = os.getppid()
    try:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        os.closerange(3, 65536)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGXCPU, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        mem = int(req["memory_mb"]) * 2**20
        limits = {
            resource.RLIMIT_AS: mem,
            resource.RLIMIT_DATA: mem,
            resource.RLIMIT_CPU: int(req["timeout_s"]) + 1,
            resource.RLIMIT_FSIZE: int(req["max_file_mb"]) * 2**20,
            resource.RLIMIT_NOFILE: 64,
            resource.RLIMIT_CORE: 0,
        }
        if uid is not None:
            limits[resource.RLIMIT_NPROC] = int(req["max_procs"])
        for which, value in limits.items():
            resource.setrlimit(which, (value, value))
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        # After the uid change (which clears it): die with the supervisor, even if it died already.
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != supervisor_pid:
            os._exit(1)
        os.chdir(workdir)
        os.environ.clear()
        os.environ.update(
            {
                "PATH": "/usr/local/bin:/usr/bin:/bin",
                "HOME": workdir,
                "TMPDIR": workdir,
                "LANG": "C.UTF-8",
                "PYTHONIOENCODING": "utf-8",
                "OPENBLAS_NUM_THREADS": "1",
                "OMP_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1",
            }
        )
        sys.stdout = io.TextIOWrapper(
            io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace"
        )
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
        )
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        import tempfile

        tempfile.tempdir = workdir
        sys.dont_write_bytecode = True
        if guard:
            sys.addaudithook(_audit_guard(workdir))
        code = _run_user_code(req["code"])
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - a broken child must still exit, never return
        try:
            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
        code = 1
    os._exit(code & 0xFF)


# ---------------------------------------------------------------- the supervisor


class Supervisor:
    def __init__(self, cfg: dict) -> None:
        self.base_dir = cfg["base_dir"]
        self.guard = bool(cfg.get("audit_guard", True))
        self.uid = None
        self.isolation = {
            "kernel": False,
            "network": "audit hook only",
            "filesystem": "audit hook only",
            "signals": "own session + process-group kill only",
            "uid": os.getuid(),
        }
        os.umask(0o022)  # the jail's directories must be traversable by the run's uid
        if not cfg.get("kernel_isolation", True):
            self.isolation["kernel_error"] = "kernel isolation was switched off (kernel_isolation=False)"
        elif os.geteuid() != 0:
            self.isolation["kernel_error"] = f"the process runs as uid {os.geteuid()}, not root"
        else:
            try:
                self.base_dir = _enter_jail(self.base_dir)
                self.uid = UID_BASE + os.getpid()
                self.isolation = {
                    "kernel": True,
                    "network": "new network namespace (no interfaces up)",
                    "filesystem": "own root: Python install and libraries read-only, "
                    "private tmpfs working directory",
                    "signals": "separate uid per supervisor",
                    "uid": self.uid,
                }
            except OSError as e:
                self.isolation["kernel_error"] = f"the kernel refused the jail ({e})"
        _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.runs = 0

    def _sweep(self, pid: int) -> None:
        """Kill the child, its process group and (with a uid) every process of the run's uid."""
        for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
            try:
                target()
            except ProcessLookupError:
                pass
        if self.uid is None:
            return
        reaper = os.fork()
        if reaper == 0:
            try:
                os.setgid(self.uid)
                os.setuid(self.uid)
                os.kill(-1, signal.SIGKILL)  # every process this uid may signal: the run's own
            finally:
                os._exit(0)
        os.waitpid(reaper, 0)

    def _kill_and_reap(self, pid: int, wait_status: int | None) -> int:
        """Sweep until every descendant is dead and reaped; returns the child's wait status.

        As a child subreaper the supervisor inherits orphaned grandchildren, so "no children
        left" means the run left nothing behind. Sweeps repeat because a fork bomb may add
        processes while one is under way.
        """
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            self._sweep(pid)
            try:
                while True:
                    done, status = os.waitpid(-1, os.WNOHANG)
                    if done == 0:
                        break
                    if done == pid:
                        wait_status = status
            except ChildProcessError:
                break
            time.sleep(0.002)
        return wait_status if wait_status is not None else signal.SIGKILL  # as if killed

    def run(self, req: dict) -> dict:
        self.runs += 1
        workdir = os.path.join(self.base_dir, f"run-{self.runs}")
        os.mkdir(workdir, 0o700)
        if self.uid is not None:
            os.chown(workdir, self.uid, self.uid)
        out_r, out_w = os.pipe()
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.close(out_r)
            _child(req, out_w, workdir, self.uid, self.guard)
        os.close(out_w)
        try:
            return self._collect(req, pid, out_r, start)
        finally:
            os.close(out_r)
            shutil.rmtree(workdir, ignore_errors=True)

    def _collect(self, req: dict, pid: int, out_r: int, start: float) -> dict:
        deadline = start + float(req["timeout_s"])
        cap = int(req["max_output_bytes"])
        pidfd = os.pidfd_open(pid)
        poller = select.poll()
        poller.register(out_r, select.POLLIN | select.POLLHUP)
        poller.register(pidfd, select.POLLIN)
        out = bytearray()
        status, wait_status, eof = None, None, False
        try:
            while wait_status is None or not eof:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if wait_status is None:
                        status = "timeout"
                    break  # else: the child exited; what it left running is killed below
                for fd, _ in poller.poll(remaining * 1000):
                    if fd == out_r:
                        chunk = os.read(out_r, 65536)
                        if not chunk:
                            eof = True
                            poller.unregister(out_r)
                        out += chunk
                    elif wait_status is None:
                        wait_status = os.waitpid(pid, 0)[1]
                        poller.unregister(pidfd)
                        deadline = min(deadline, time.monotonic() + 0.2)  # grace to drain the pipe
                if len(out) > cap:
                    status = "output_limit"
                    break
        finally:
            os.close(pidfd)
        wait_status = self._kill_and_reap(pid, wait_status)
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


def main() -> None:
    cfg = json.loads(sys.argv[1])
    # The protocol gets its own descriptors; fd 0/1 then point at /dev/null so that nothing
    # printed by accident can corrupt a frame.
    req_fd, resp_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    supervisor = Supervisor(cfg)
    _write_frame(resp_fd, {"ready": True, "isolation": supervisor.isolation})
    while (req := _read_frame(req_fd)) is not None:
        try:
            resp = supervisor.run(req)
        except Exception as e:  # noqa: BLE001 - report, keep serving
            resp = {
                "status": "internal",
                "output": f"{type(e).__name__}: {e}",
                "exit_code": None,
                "signal": None,
                "elapsed_s": 0.0,
            }
        _write_frame(resp_fd, resp)


if __name__ == "__main__":
    main()
