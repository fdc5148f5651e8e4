"""The Python tool's zygote: a quiescent, jailed process that forks every call of one supervisor.

Why: a forked process shares its parent's pages until one side writes them, and then the
writer copies the page. When the supervisor forked each call itself, it kept running Python
(reading output, framing, cleaning up) while the call lived, so both sides copied pages; it was
about a third of the supervisor's CPU per call. The zygote is forked from the supervisor once,
right after the jail is entered, and then only loops: receive a call's descriptors, fork its
init into new IPC and PID namespaces, answer the init's pid. It never runs user code, writes
almost no pages between forks, and is itself as jailed as the supervisor (same network and
mount namespaces, root file system and cgroups; it dies with the supervisor).

A call's init (`_python_child.init`) is then the zygote's child, not the supervisor's: the
supervisor follows it through a pidfd, and when that pidfd reports the init gone, its whole PID
namespace is gone too (the kernel kills and reaps every process of a namespace before its pid 1
counts as exited). The zygote reaps its dead inits only when asked for the next call, so an
init's pid cannot be reused while the supervisor still acts on the call (it opens the pidfd at
once, and asks for the next call only after the previous one is cleaned up). Loaded by path by
`_python_worker.py`; imports nothing from the project.
"""

import gc
import os
import signal
import socket
import struct

try:  # registered by the worker, which loads these modules by path
    import _python_child as child
    import _python_jail as jail
except ImportError:  # imported as part of the package (tests, tooling)
    from sandbox import _python_child as child
    from sandbox import _python_jail as jail

_MAX_FDS = 8  # a call's pipes (3) and its cgroup joins (one per hierarchy, at most 3)


class Zygote:
    """The supervisor's handle on its zygote: `fork_call` asks it for a call's init."""

    def __init__(self, namespaces: tuple[int, int], base_dir: str, call: dict, close: tuple[int, ...]):
        """Fork the zygote; `call` is the template `_python_child.init` gets (its `joins` come per
        call) and `close` the supervisor's descriptors the zygote must not hold."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        gc.collect()
        gc.freeze()  # the zygote's heap, as its calls inherit it, is never traversed by a collector
        self.pid = os.fork()
        if self.pid == 0:
            mine.close()
            _serve(theirs, namespaces, base_dir, call, close)
        theirs.close()
        self.sock = mine
        self.pidfd = os.pidfd_open(self.pid)

    def fork_call(self, n: int, fds: list[int], timeout_s: float) -> int:
        """The pid of call `n`'s new init, which got `fds` (out_w, req_r, status_w, *joins).

        OSError when the zygote is gone or does not answer within `timeout_s`: the supervisor
        then asks to be replaced.
        """
        self.sock.settimeout(timeout_s)
        socket.send_fds(self.sock, [struct.pack("i", n)], fds)
        reply = self.sock.recv(4)
        if len(reply) != 4:
            raise OSError("the zygote is gone")
        pid = struct.unpack("i", reply)[0]
        if pid <= 0:
            raise OSError(-pid, f"the zygote could not fork call {n}: {os.strerror(-pid)}")
        return pid

    def close(self) -> None:
        self.sock.close()  # the zygote reads end of file and exits
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.close(self.pidfd)


def fork_here(fds: list[int], workdir: str, call: dict, theirs: tuple[int, ...]) -> int:
    """Without the jail there is no zygote: fork the call's init (given `fds`) from this process.

    `theirs`: this process's ends of the call's pipes, which the init must not hold.
    """
    gc.collect()  # see the module docstring: fewer copy-on-write faults on both sides of the fork
    gc.freeze()
    pid = os.fork()
    if pid == 0:
        for fd in theirs:
            os.close(fd)
        child.init(fds[0], fds[1], fds[2], workdir, call)
    return pid


def _serve(sock: socket.socket, namespaces: tuple[int, int], base_dir: str, call: dict, close) -> None:
    """The zygote's loop (never returns): one request, one forked init, its pid as the answer."""
    try:
        jail.libc.prctl(jail.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        parent = os.getppid()
        for fd in close:
            os.close(fd)
        if os.getppid() != parent:
            os._exit(0)
        while True:
            msg, fds, _, _ = socket.recv_fds(sock, 4, _MAX_FDS)
            if len(msg) != 4 or len(fds) < 3:
                os._exit(0)  # the supervisor closed its end (or broke the protocol)
            _reap()
            n = struct.unpack("i", msg)[0]
            try:
                pid = jail.fork_into_call_namespaces(namespaces)
            except OSError as e:
                pid = -(e.errno or 1)
            if pid == 0:
                sock.close()
                workdir = os.path.join(base_dir, f"run-{n}")
                child.init(fds[0], fds[1], fds[2], workdir, {**call, "joins": fds[3:]})
            for fd in fds:
                os.close(fd)
            sock.send(struct.pack("i", pid))
    except BaseException:  # noqa: BLE001 - the supervisor sees end of file and is replaced
        os._exit(1)


def _reap() -> None:
    """Reap the inits that exited (each was already followed to its end through a pidfd)."""
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass
