"""The processes of one Python-tool call, forked by the zygote (`_python_zygote.py`).

A call is two processes, created before its code exists (the supervisor prepares the next call
while none runs). The *init* (forked by the zygote, or without the jail by the supervisor, into
the call's new IPC and PID namespaces, root, pid 1 there) joins the call's cgroup and forks the
*user* process: it sets the rlimits, installs the syscall filter and the audit hook, waits for
the request, then drops to the run's uid and runs the code. When the user process ends, the
init writes its wait status to the supervisor and exits, and the kernel kills every process
left in the namespace. Loaded by path; imports nothing from the project.
"""

import ast
import io
import json
import linecache
import os
import resource
import signal
import struct
import sys
import tempfile
import traceback

try:  # registered by the worker, which loads these modules by path
    import _python_jail as jail
    import _python_seccomp as seccomp
except ImportError:  # imported as part of the package (tests, tooling)
    from sandbox import _python_jail as jail
    from sandbox import _python_seccomp as seccomp

CODE_FILENAME = "<python>"
_HERE = os.path.dirname(os.path.abspath(__file__))
_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "PYTHONIOENCODING": "utf-8",
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


_PATH_EVENTS = frozenset(
    (
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
    )
)
_PROCESS_EVENTS = frozenset(
    (
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.exec",
        "os.spawn",
        "os.system",
        "subprocess.Popen",
        "pty.spawn",
        "os.startfile",
    )
)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def audit_guard(workdir: str):
    """Audit hook that refuses what the sandbox does not offer, with a message the agent can read."""
    real = os.path.realpath
    workdir = real(workdir)
    own_pid = os.getpid()

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
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing and path is not None and not inside(path):
                raise PermissionError(f"writing outside the working directory is not allowed: {path!r}")
        elif event in _PATH_EVENTS:
            for a in args:
                if isinstance(a, (str, bytes, os.PathLike)) and not inside(a):
                    raise PermissionError(f"{event} outside the working directory is not allowed: {a!r}")
        elif event.startswith("socket."):
            raise PermissionError("network access is disabled in the Python tool")
        elif event in _PROCESS_EVENTS:
            raise PermissionError("starting processes is disabled in the Python tool")
        elif event in ("os.kill", "os.killpg", "signal.pthread_kill"):
            if event != "os.kill" or args[0] != own_pid:
                raise PermissionError("sending signals to other processes is not allowed")

    return hook


def _print_user_traceback(exc: BaseException) -> None:
    """Traceback without the sandbox's own frames (they are noise to the agent)."""
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if os.path.dirname(os.path.abspath(f.filename)) != _HERE
    ]
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
        if not 0 < e.code < 256:  # the OS keeps the low byte only: 256 would read as success
            print(f"SystemExit: exit code {e.code} is outside 1..255", file=sys.stderr)
            return 1
        return e.code
    except BaseException as e:  # noqa: BLE001 - everything the user code raises is reported
        _print_user_traceback(e)
        return 1


def _limit(req: dict, kernel: bool) -> None:
    """The per-process rlimits but CPU (`_drop`); the call's cgroup bounds the processes together."""
    mem = int(req["memory_mb"]) * 2**20
    limits = {
        resource.RLIMIT_AS: mem,
        resource.RLIMIT_DATA: mem,
        resource.RLIMIT_FSIZE: int(req["max_file_mb"]) * 2**20,
        resource.RLIMIT_NOFILE: 64,
        resource.RLIMIT_CORE: 0,
    }
    if kernel:
        limits[resource.RLIMIT_NPROC] = int(req["max_procs"])
    for which, value in limits.items():
        resource.setrlimit(which, (value, value))


def _read_request(fd: int) -> dict:
    """The supervisor's one request frame (4-byte length, then JSON: `code`, `timeout_s`)."""
    buf, need, header = b"", 4, True
    while True:
        while len(buf) < need:
            chunk = os.read(fd, need - len(buf))
            if not chunk:
                raise EOFError("the supervisor closed the call before sending code")
            buf += chunk
        if not header:
            return json.loads(buf)
        need, buf, header = struct.unpack(">I", buf)[0], b"", False


def _confine(req: dict, workdir: str, call: dict) -> None:
    """Limits, syscall filter, working directory, scrubbed environment, audit hook (still as root).

    Done when the call is prepared; only the uid change waits for the request (`_drop`).
    """
    _limit(req, call["uid"] is not None)
    if call["uid"] is not None:
        seccomp.install(jail.libc)  # allows set*id, which `_drop` needs (harmless once unprivileged)
    os.chdir(workdir)
    os.environ.clear()
    os.environ.update({**_ENV, "HOME": workdir, "TMPDIR": workdir})
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace"
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace", write_through=True
    )
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    tempfile.tempdir = workdir
    sys.dont_write_bytecode = True
    if call["guard"]:
        sys.addaudithook(audit_guard(workdir))


def _drop(timeout_s: float, call: dict, init_pid: int) -> None:
    """Once the code has arrived: its CPU limit, then the run's uid; die with the init."""
    cpu = int(timeout_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    if call["uid"] is not None:
        os.setgroups([])
        os.setgid(call["uid"])
        os.setuid(call["uid"])
    # After the uid change (which clears it): die with the init, even if it died already.
    jail.libc.prctl(jail.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != init_pid:
        os._exit(1)


def _user(out_w: int, req_r: int, workdir: str, call: dict, init_pid: int) -> None:
    """The user process: confine itself, wait (as root, idle) for the code, drop to the uid, run it.

    Everything up to the wait is done when the call is prepared, before any code exists; the
    uid is taken only once the request is read, so an idle prepared call holds no process of
    the run's uid (after a call, none is left). Never returns.
    """
    code = 1
    try:
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(req_r, 3)
        os.closerange(4, 65536)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGXCPU, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        _confine(call["limits"], workdir, call)
        request = _read_request(3)
        os.close(3)
        _drop(float(request["timeout_s"]), call, init_pid)
        code = _run_user_code(request["code"])
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - a broken child must still exit, never return
        _report_crash()
        code = 1
    os._exit(code & 0xFF)


def _report_crash() -> None:
    try:
        traceback.print_exc()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001
        pass


def init(out_w: int, req_r: int, status_w: int, workdir: str, call: dict) -> None:
    """The call's first process and pid 1 of its PID namespace (forked by the zygote when the
    supervisor prepares the call); never returns.

    It joins the call's cgroup before anything forks, forks the user process, reaps orphans,
    writes the user's wait status to `status_w` and exits, which (as pid 1) kills whatever the
    call left running. `call`: `uid` (None without the kernel jail), `guard` (audit hook),
    `limits` (the pool's PythonLimits fields the child needs), `joins` (descriptors of the call
    cgroup's `cgroup.procs`). The request (the code and its time limit) arrives later on
    `req_r`, read by the user process; if the supervisor dies first, that read ends the call.
    """
    try:
        jail.libc.prctl(jail.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        os.setsid()  # the whole call is one process group (user code may still leave it)
        os.dup2(out_w, 2)
        for fd in call["joins"]:
            os.write(fd, b"0")  # before anything forks, so every process of the call is counted
            os.close(fd)
        own = os.getpid()
        pid = os.fork()
        if pid == 0:
            os.close(status_w)
            _user(out_w, req_r, workdir, call, own)
        os.close(out_w)
        os.close(req_r)
        while True:
            done, status = os.waitpid(-1, 0)
            if done == pid:
                os.write(status_w, struct.pack("i", status))
                os._exit(0)
    except BaseException:  # noqa: BLE001
        _report_crash()
    os._exit(1)
