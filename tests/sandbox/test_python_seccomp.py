"""The jail's kernel surface: an allow-list seccomp filter; each escape route fails, Python still runs.

The probe found `unshare(CLONE_NEWUSER|CLONE_NEWNET|CLONE_NEWNS)` (and a tmpfs mount inside
it), `NETLINK_NETFILTER` sockets and `io_uring_setup` allowed inside a call: only the keyring was
filtered. Calls run without the audit hook, so what is shown is the kernel layer alone.
"""

import os
import re

import pytest

from sandbox import _python_seccomp as seccomp
from sandbox.python_tool import PythonLimits, PythonSandbox

_C = "import ctypes, os\nl = ctypes.CDLL(None, use_errno=True)\nl.syscall.restype = ctypes.c_long\n"
# name -> (x86_64 call, expected errno). A call that succeeded in a child exits that child at once.
DENIED = {
    "unshare(NEWUSER|NEWNET|NEWNS)": ("l.syscall(272, 0x10000000 | 0x40000000 | 0x00020000)", 1),
    "unshare(NEWUSER) then mount tmpfs": (
        "l.syscall(272, 0x10000000) or l.mount(b'none', b'.', b'tmpfs', 0, None)",
        1,
    ),
    "mount tmpfs": ("l.mount(b'none', b'.', b'tmpfs', 0, None)", 1),
    "clone(NEWUSER)": (
        "(lambda r: os._exit(0) if r == 0 else r)(l.syscall(56, 0x10000000 | 17, 0, 0, 0, 0))",
        1,
    ),
    "clone3": ("l.syscall(435, 0, 0)", 38),
    "setns": ("l.syscall(308, 0, 0)", 1),
    "socket(NETLINK, NETLINK_NETFILTER)": ("l.syscall(41, 16, 3, 12)", 1),
    "socket(PACKET)": ("l.syscall(41, 17, 3, 0)", 1),
    "io_uring_setup": ("l.syscall(425, 8, ctypes.create_string_buffer(120))", 1),
    "keyctl": ("l.syscall(250, 0, -4, 0, 0, 0)", 1),
    "add_key": ("l.syscall(248, b'user', b'k', b'v', 1, -4)", 1),
    "bpf": ("l.syscall(321, 0, 0, 0)", 1),
    "perf_event_open": ("l.syscall(298, ctypes.create_string_buffer(128), 0, -1, -1, 0)", 1),
    "userfaultfd": ("l.syscall(323, 0)", 1),
    "ptrace": ("l.syscall(101, 16, 1, 0, 0)", 1),
    "pivot_root": ("l.syscall(155, b'.', b'.')", 1),
    "chroot": ("l.syscall(161, b'.')", 1),
}
# Ordinary Python the tool offers: standard library number crunching, text, files, threads, forks.
ORDINARY = """
import json, math, re, statistics, fractions, decimal, itertools, random, heapq, datetime
import hashlib, threading, tempfile, os, collections
import numpy as np
out = []
t = threading.Thread(target=lambda: out.append(sum(math.sqrt(i) for i in range(1000))))
t.start(); t.join()
with tempfile.NamedTemporaryFile("w", dir=".", delete=False) as f:
    json.dump({"x": [1, 2, 3]}, f)
pid = os.fork()
if pid == 0:
    os._exit(7)
print(
    round(out[0], 3), json.load(open(f.name))["x"], re.findall(r"\\d+", "a1b22"),
    statistics.median([3, 1, 2]), fractions.Fraction(1, 3) + fractions.Fraction(1, 6),
    decimal.Decimal("1.1") + decimal.Decimal("2.2"), random.Random(0).randint(1, 6),
    heapq.nsmallest(2, [5, 1, 4]), hashlib.sha256(b"x").hexdigest()[:8],
    datetime.date(2024, 1, 31).isoformat(), int(np.arange(5).sum()), os.waitpid(pid, 0)[1] >> 8,
)
"""
EXPECTED = "21065.833 [1, 2, 3] ['1', '22'] 2 1/2 3.3 4 [1, 4] 2d711642 2024-01-31 10 7"


@pytest.fixture(scope="module")
def kernel_only():
    sb = PythonSandbox(
        num_workers=1, limits=PythonLimits(timeout_s=5.0), isolation="unsafe-ok", audit_guard=False
    )
    if not sb.isolation["kernel"]:
        sb.close()
        pytest.skip(f"kernel isolation unavailable here: {sb.isolation.get('kernel_error')}")
    yield sb
    sb.close()


def test_each_escape_route_fails_inside_a_call(kernel_only):
    if os.uname().machine != "x86_64":
        pytest.skip("the probes use x86_64 system call numbers")
    probe = _C + "r = {}\n"
    for name, (call, _) in DENIED.items():
        probe += f"ctypes.set_errno(0)\nr[{name!r}] = ({call}, ctypes.get_errno())\n"
    probe += "print(repr(r))"
    res = kernel_only.run(probe)
    assert not res.is_error, res.text
    got = eval(res.text)  # a dict literal printed by the call
    assert got == {name: (-1, errno) for name, (_, errno) in DENIED.items()}


def test_ordinary_numeric_python_still_runs(kernel_only):
    assert kernel_only.run(ORDINARY).text == EXPECTED
    # ... and with the audit hook on, as the pool runs by default (it refuses os.fork itself).
    guarded = ORDINARY.replace("pid = os.fork()", "pid = 0 and os.fork()").replace("os._exit(7)", "pass")
    with PythonSandbox(num_workers=1, limits=PythonLimits(timeout_s=5.0), isolation="unsafe-ok") as sb:
        text = sb.run(guarded.replace("os.waitpid(pid, 0)[1] >> 8", "7")).text
    assert text == EXPECTED


def _header_numbers(path: str) -> dict[str, int]:
    numbers = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"#define __NR(?:3264)?_(\w+)\s+(\d+)\s*$", line)
            if m:
                numbers[m.group(1)] = int(m.group(2))
    return numbers


@pytest.mark.parametrize(
    "machine, header",
    [
        ("x86_64", "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
        ("aarch64", "/usr/include/asm-generic/unistd.h"),
    ],
)
def test_the_allowed_numbers_are_the_kernel_headers_numbers_of_the_allowed_names(machine, header):
    if not os.path.exists(header):
        pytest.skip(f"{header} is not installed")
    numbers = _header_numbers(header)
    numbers.setdefault("newfstatat", numbers.get("fstatat"))  # the generic table's 64-bit name
    _, allowed, clone, socket, socketpair, clone3 = seccomp.TABLES[machine]
    expected = {numbers[n] for n in seccomp.ALLOWED if numbers.get(n) is not None}
    assert set(allowed) == expected
    assert (clone, socket, socketpair, clone3) == tuple(
        numbers[n] for n in ("clone", "socket", "socketpair", "clone3")
    )
    assert not {numbers[n] for n in ("unshare", "mount", "setns", "bpf", "io_uring_setup", "keyctl")} & set(
        allowed
    )


def _run_filter(prog: list[tuple[int, int, int, int]], arch: int, nr: int, arg0: int = 0) -> int:
    """What classic BPF `prog` returns for one system call (the subset of BPF the filter uses)."""
    data = {0: nr, 4: arch, 16: arg0}  # struct seccomp_data: nr, arch, then args (low words)
    acc, pc = 0, 0
    while True:
        code, jt, jf, k = prog[pc]
        if code == 0x06:  # RET K
            return k
        if code == 0x20:  # LD W ABS
            acc, pc = data[k], pc + 1
            continue
        taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
        pc += 1 + (jt if taken else jf)


@pytest.mark.parametrize("machine", sorted(seccomp.TABLES))
def test_the_filter_allows_exactly_the_listed_numbers(machine):
    # Checked instruction by instruction against the list itself, the independent expectation.
    arch, allowed, clone, socket, socketpair, clone3 = seccomp.TABLES[machine]
    prog = seccomp.program(machine)
    assert len(prog) < 4 * len(allowed) // 3  # runs, not one comparison per number
    allow, eperm, enosys = 0x7FFF0000, 0x00050001, 0x00050026
    special = {clone, socket, socketpair, clone3}
    for nr in range(1100):
        want = enosys if nr == clone3 else allow if nr in set(allowed) - special else eperm
        if nr not in (clone, socket, socketpair):
            assert _run_filter(prog, arch, nr) == want, nr
    assert _run_filter(prog, arch, 0x40000000 + 1) == eperm  # x32 ABI
    assert _run_filter(prog, arch ^ 1, 1) == eperm  # another architecture
    assert _run_filter(prog, arch, clone, 17) == allow  # SIGCHLD: a plain fork
    assert _run_filter(prog, arch, clone, 0x10000000 | 17) == eperm  # CLONE_NEWUSER
    assert [_run_filter(prog, arch, socket, f) for f in (1, 2, 10, 16, 17)] == [allow] * 3 + [eperm] * 2
    assert [_run_filter(prog, arch, socketpair, f) for f in (1, 2)] == [allow, eperm]
