"""The Python tool's calls share nothing and leave nothing behind; one episode cannot starve others.

Calls run without the audit hook (`audit_guard=False`) so that what is shown is the kernel layer:
IPC and PID namespaces per call, a cgroup per call, the keyring denied by seccomp.
"""

import concurrent.futures as cf
import os
import threading
import time

import pytest

from sandbox.env import EpisodeEnv
from sandbox.python_budget import PythonBudget
from sandbox.python_tool import PythonLimits, PythonSandbox
from sandbox.types import ToolResult

LIMITS = PythonLimits(timeout_s=4.0, memory_mb=256)

# Each IPC mechanism: code that creates an object holding data, and code that tries to find it.
_C = "import ctypes\nl = ctypes.CDLL(None, use_errno=True)\n"
WRITERS = {
    "sysv_shm": _C + "sid = l.shmget(0x5EED01, 4096, 0o1666)\nl.shmat.restype = ctypes.c_void_p\n"
    "ctypes.memmove(l.shmat(sid, None, 0), b'secret', 6)\nprint(sid >= 0)",
    "sysv_msg": _C
    + "q = l.msgget(0x5EED02, 0o1666)\n"
    + "buf = ctypes.create_string_buffer(b'\\x01\\0\\0\\0\\0\\0\\0\\0secret')\n"
    "print(q >= 0 and l.msgsnd(q, buf, 6, 0) == 0)",
    "sysv_sem": _C + "s = l.semget(0x5EED03, 1, 0o1666)\nprint(s >= 0 and l.semctl(s, 0, 16, 42) == 0)",
    "posix_mq": _C
    + "q = l.mq_open(b'/b2t-secret', 0o102, 0o666, None)\n"
    + "print(q >= 0 and l.mq_send(q, b'secret', 6, 0) == 0)",
}
READERS = {
    "sysv_shm": _C + "print(l.shmget(0x5EED01, 0, 0) >= 0)",
    "sysv_msg": _C + "print(l.msgget(0x5EED02, 0) >= 0)",
    "sysv_sem": _C + "print(l.semget(0x5EED03, 0, 0) >= 0)",
    "posix_mq": _C + "print(l.mq_open(b'/b2t-secret', 0) >= 0)",
}
KEYRING = _C + (
    "kid = l.syscall(248, b'user', b'b2t-secret', b'secret', 6, -4)\n"  # add_key into @u (x86_64 number)
    "print(kid, ctypes.get_errno())"
)


@pytest.fixture(scope="module")
def pools():
    first = PythonSandbox(num_workers=2, limits=LIMITS, isolation="unsafe-ok", audit_guard=False)
    if not first.isolation["kernel"]:
        first.close()
        pytest.skip(f"kernel isolation unavailable here: {first.isolation.get('kernel_error')}")
    second = PythonSandbox(num_workers=1, limits=LIMITS, isolation="unsafe-ok", audit_guard=False)
    yield first, second
    first.close()
    second.close()


def _sysvipc() -> dict[str, set[str]]:
    found = {}
    for kind in ("shm", "msg", "sem"):
        with open(f"/proc/sysvipc/{kind}") as f:
            found[kind] = {line.split()[0] for line in f.readlines()[1:]}
    return found


def _processes_of_uid(uid: int) -> list[int]:
    pids = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/status") as f:
                if int(next(x for x in f if x.startswith("Uid:")).split()[1]) == uid:
                    pids.append(int(entry))
        except (OSError, StopIteration):
            continue
    return pids


def test_no_ipc_mechanism_passes_data_between_calls_in_one_pool_or_two(pools):
    first, second = pools
    host_before = _sysvipc()
    for name, writer in WRITERS.items():
        created = first.run(writer)
        assert created.text == "True", (name, created.text)  # the mechanism works inside a call
        for pool in (first, second):
            found = pool.run(READERS[name])
            assert (found.text, found.is_error) == ("False", False), (name, found.text)
    assert _sysvipc() == host_before  # nothing created on the host's IPC namespace


def test_the_kernel_keyring_is_denied(pools):
    res = pools[0].run(KEYRING)
    if os.uname().machine != "x86_64":
        pytest.skip("the probe uses the x86_64 system call number")
    assert res.text == "-1 1"  # EPERM: no key can be stored, so none outlives a call


def test_no_host_process_is_visible(pools):
    host = os.getpid()
    code = _C + f"import os\nl.kill({host}, 0)\nprint(os.getpid(), ctypes.get_errno())"
    assert pools[0].run(code).text == "2 3"  # pid 2 of its own namespace; the host pid: ESRCH


def test_a_calls_memory_is_bounded_over_all_its_processes(pools):
    sb = pools[0]
    if not sb.isolation["cgroup"].startswith("cgroup"):
        pytest.skip(f"no per-call cgroup here: {sb.isolation['cgroup']}")
    # Three children of 150 MB each against a 256 MB limit: rlimits alone allow all three.
    code = (
        "import os, time\nkids = []\nfor i in range(3):\n    pid = os.fork()\n    if pid == 0:\n"
        "        b = bytearray(150 * 2**20)\n        time.sleep(1.0)\n        os._exit(0)\n"
        "    kids.append(pid)\nprint(sum(os.waitpid(k, 0)[1] == 0 for k in kids))"
    )
    res = sb.run(code)
    assert not res.is_error, res.text
    assert int(res.text) <= 1  # at most one 150 MB child fits in the call's 256 MB


def _call_cgroups(isolation: dict) -> set[str]:
    prefix = isolation["cgroup_prefix"] + "-"
    return {d for p in isolation["cgroup_paths"] for d in os.listdir(p) if d.startswith(prefix)}


def test_a_call_leaves_no_process_cgroup_or_ipc_object_on_the_host(pools):
    sb = pools[0]
    before = _sysvipc()
    code = (
        _C + "import os\nl.shmget(0x5EED04, 1 << 20, 0o1666)\n"
        "for _ in range(3):\n    if os.fork() == 0:\n        os.setsid()\n        import time\n"
        "        time.sleep(60)\nprint('left children behind')"
    )
    assert sb.run(code).text == "left children behind"
    uid = sb.isolation["uid"]
    assert _processes_of_uid(uid) == []
    # Each slot keeps exactly one cgroup: that of the call it has prepared next (created before
    # any code exists); the call that ran has none left once its slot is back. Clean-up and the
    # next call's preparation follow the result (a loaded machine may see 2 or 0 for a moment).
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(len(_call_cgroups(slot.isolation)) != 1 for slot in sb._slots):
        time.sleep(0.05)
    for slot in sb._slots:
        assert len(_call_cgroups(slot.isolation)) == 1, _call_cgroups(slot.isolation)
    assert _sysvipc() == before


def test_system_exit_codes_the_os_would_truncate_are_errors(pools):
    sb = pools[0]
    for code in (256, 512, -1):
        res = sb.run(f"raise SystemExit({code})")
        assert res.is_error, (code, res.text)
    res = sb.run("import sys\nsys.exit(3)")
    assert res.is_error and "exit code 3" in res.text
    assert not sb.run("raise SystemExit(0)").is_error


def test_without_the_jail_the_pool_says_what_it_cannot_bound():
    with PythonSandbox(num_workers=1, isolation="unsafe-ok", kernel_isolation=False) as sb:
        assert sb.isolation["cgroup"].startswith("none:")
        assert sb.run("print(1)").text == "1"


# ---------------------------------------------------------------- the per-episode budget


class _NoWorld:
    """The environment answers Python calls itself; these turns make no other tool call."""

    def call_tool(self, name, arguments):
        raise AssertionError(f"unexpected tool call {name}")


NO_WORLD = _NoWorld()


def test_budget_grants_in_order_and_refuses_beyond_its_limits():
    budget = PythonBudget(calls_per_turn=3, turn_s=5.0, episode_s=6.0)
    grants = budget.grant(5, per_call_s=2.0)
    assert grants[:2] == [2.0, 2.0] and grants[2] == pytest.approx(1.0)
    assert all("at most 3 Python calls per turn" in g for g in grants[3:])
    budget.charge(5.5)
    left = budget.grant(2, per_call_s=2.0)
    assert left[0] == pytest.approx(0.5) and "this episode (6 s) is used up" in left[1]
    with pytest.raises(ValueError, match="calls_per_turn"):
        PythonBudget(calls_per_turn=0)


def test_an_episode_over_its_budget_gets_errors_without_reaching_the_pool():
    class Counting:
        limits = PythonLimits(timeout_s=2.0)
        calls = 0

        def run(self, code, timeout_s=None):
            Counting.calls += 1
            time.sleep(0.05)
            return ToolResult("ran")

    env = EpisodeEnv(NO_WORLD, python_tool=Counting(), python_budget=PythonBudget(episode_s=0.3))
    call = '<tool_call>{"name": "Python", "arguments": {"code": "1"}}</tool_call>'
    for _ in range(10):
        env.step(call * 2)
    assert Counting.calls < 10  # each call is charged at least its 50 ms; 0.3 s buys a few
    last = env.step(call)
    assert "used up" in last.responses[0].text and last.responses[0].is_error


@pytest.mark.slow
def test_a_turn_hogging_the_pool_delays_another_episode_by_at_most_one_call_limit():
    limit = 3.0
    with PythonSandbox(num_workers=2, limits=PythonLimits(timeout_s=limit), isolation="unsafe-ok") as sb:
        hog, other = EpisodeEnv(NO_WORLD, python_tool=sb), EpisodeEnv(NO_WORLD, python_tool=sb)
        loop = '<tool_call>{"name": "Python", "arguments": {"code": "while 1: pass"}}</tool_call>'
        with cf.ThreadPoolExecutor(max_workers=1) as runner:
            started = threading.Event()
            hogging = runner.submit(lambda: (started.set(), hog.step(loop * 20))[1])
            started.wait()
            time.sleep(0.5)  # the hog's first calls now hold both slots
            t0 = time.monotonic()
            quick = other.step('<tool_call>{"name": "Python", "arguments": {"code": "6 * 7"}}</tool_call>')
            waited = time.monotonic() - t0
            hogged = hogging.result()
    assert quick.responses[0].text == "42"
    assert waited < limit + 1.5, waited  # FIFO: it would wait for 4 of the hog's calls (>= 5.5 s)
    texts = [r.text for r in hogged.responses]
    # The 8 s turn budget grants 3 + 3 + 2 s, then refuses the fourth call; the rest are over the count.
    assert sum("time limit" in t for t in texts) == 3
    assert sum("budget of this turn (8 s) is used up" in t for t in texts) == 1
    assert sum("at most 4 Python calls per turn" in t for t in texts) == 16
