"""The zygote: every call of a slot is forked from one quiescent process, and still shares nothing.

Calls run without the audit hook, so only the kernel layer and the supervisor stand between one
call and the next. Throughput itself is measured by benchmarks/bench_python_tool.py, not here.
"""

import os
import signal
import time

import pytest

from sandbox.python_tool import PythonLimits, PythonSandbox

# Leave everything a call can leave: a file, an environment variable, module state, open
# descriptors, a detached process, a marked block of memory (its address printed), a random draw.
LEAVE = """
import builtins, os, random, sys, ctypes
open("left.txt", "w").write("x")
os.environ["LEFT"] = "1"
builtins.LEFT = sys.LEFT = 1
fds = [os.open("left.txt", os.O_RDONLY), *os.pipe()]
if os.fork() == 0:
    os.setsid()
    import time
    time.sleep(60)
block = ctypes.create_string_buffer(b"MARK-" * 200000)
print(ctypes.addressof(block), random.random())
"""
# Look for all of it from the next call on the same slot (forked by the same zygote).
LOOK = """
import builtins, ctypes, os, random, sys
open_fds = []
for fd in range(3, 64):
    try:
        os.fstat(fd)
        open_fds.append(fd)
    except OSError:
        pass
seen = []
for pid in range(3, 40):
    try:
        os.kill(pid, 0)
        seen.append(pid)
    except OSError:
        pass
r, w = os.pipe()
if os.fork() == 0:  # the previous call's address: unmapped here (a crash) or anything but the mark
    os.write(w, ctypes.string_at(ADDRESS, 5))
    os._exit(0)
os.close(w)
os.wait()
print(os.listdir("."), "LEFT" in os.environ, hasattr(builtins, "LEFT"), hasattr(sys, "LEFT"),
      open_fds, seen, os.read(r, 5) == b"MARK-", random.random() == DRAW)
"""


def _children(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def _zygote(sb: PythonSandbox) -> int:
    """The pid of the one slot's zygote: the supervisor's only child (the calls are the zygote's)."""
    (slot,) = sb._slots
    children = _children(slot.proc.pid)
    assert len(children) == 1, children
    return children[0]


def _processes_of_uid(uid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/status") as f:
                if next(line for line in f if line.startswith("Uid:")).split()[1] == str(uid):
                    found.append(int(entry))
        except (OSError, ValueError, StopIteration):
            continue
    return found


@pytest.fixture
def one_slot():
    sb = PythonSandbox(
        num_workers=1,
        limits=PythonLimits(timeout_s=3.0),
        isolation="unsafe-ok",
        audit_guard=False,
        spare_workers=0,
    )
    if not sb.isolation["kernel"]:
        sb.close()
        pytest.skip(f"kernel isolation unavailable here: {sb.isolation.get('kernel_error')}")
    yield sb
    sb.close()


def test_two_calls_forked_from_one_zygote_share_nothing(one_slot):
    zygote = _zygote(one_slot)
    left = one_slot.run(LEAVE)
    assert not left.is_error, left.text
    address, draw = left.text.split()
    looked = one_slot.run(LOOK.replace("ADDRESS", address).replace("DRAW", draw))
    assert not looked.is_error, looked.text
    # An empty directory, a clean environment and modules, only fds 0-2, no process but its own
    # (pids 1 and 2), not the previous call's memory, and a random state of its own.
    assert looked.text == "[] False False False [] [] False False"
    assert _zygote(one_slot) == zygote  # both calls did come from the same zygote
    assert _processes_of_uid(one_slot.isolation["uid"]) == []  # the detached sleeper is gone


@pytest.mark.parametrize(
    "hostile",
    [
        "import os, signal\nfor pid in [-1, *range(1, 100)]:\n    try:\n"
        "        os.kill(pid, signal.SIGKILL)\n    except OSError:\n        pass",
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
        "import os\nfor _ in range(8):\n    if os.fork() == 0:\n        os.setsid()\nwhile True:\n    pass",
        "import ctypes\nctypes.string_at(1)",  # a crash
    ],
    ids=["kill-everything", "fork-bomb", "detached-busy-timeout", "segfault"],
)
def test_the_zygote_survives_a_hostile_call_and_the_call_leaves_nothing(one_slot, hostile):
    zygote = _zygote(one_slot)
    prefix = one_slot.isolation["cgroup_prefix"] + "-"
    assert one_slot.run(hostile).is_error or "kill" in hostile
    assert _processes_of_uid(one_slot.isolation["uid"]) == []  # dead before the answer
    assert one_slot.run("print(6 * 7)").text == "42"  # same slot (no spare), so it was cleaned
    assert _zygote(one_slot) == zygote
    time.sleep(0.3)  # the second call's clean-up follows its answer
    # What is left: the prepared call's init under the zygote, and that call's cgroup alone.
    assert len(_children(zygote)) == 1
    if one_slot.isolation["cgroup"].startswith("cgroup"):
        cgroups = {
            d for p in one_slot.isolation["cgroup_paths"] for d in os.listdir(p) if d.startswith(prefix)
        }
        assert cgroups == {f"{prefix}3"}


def test_a_dead_zygote_takes_its_slot_with_it_and_the_slot_is_replaced(one_slot):
    first = one_slot._slots[0]
    uid = one_slot.isolation["uid"]
    os.kill(_zygote(one_slot), signal.SIGKILL)  # as nothing inside a call can
    deadline = time.monotonic() + 10
    texts = []
    while time.monotonic() < deadline:
        res = one_slot.run("print(42)")
        texts.append(res.text)
        if first not in one_slot._slots and res.text == "42":
            break
    assert texts[-1] == "42" and first not in one_slot._slots and not first.alive(), texts
    assert len(texts) <= 2, texts  # at most the one call prepared by the dead zygote fails
    assert _processes_of_uid(uid) == []
    _zygote(one_slot)  # the replacement has a zygote of its own
