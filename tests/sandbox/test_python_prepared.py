"""Pre-created calls: each slot prepares its next call's cgroup, namespaces and processes before
any code exists (creation off the call's path), and the prepared call is as isolated as ever.

Throughput itself is measured by benchmarks/bench_python_tool.py, not here.
"""

import concurrent.futures as cf
import os
import time

import pytest

from sandbox.python_tool import PythonLimits, PythonSandbox

# Signal every process this uid may reach and every pid it might guess, then report its own pid.
REACH = (
    "import os, signal\nhit = 0\nfor pid in [-1, *range(1, 65)]:\n    try:\n        if pid != os.getpid():\n"
    "            os.kill(pid, signal.SIGKILL)\n            hit += 1\n    except OSError:\n        pass\n"
    "print(os.getpid(), hit)"
)


def _prepared(isolation: dict) -> dict[str, list[int]]:
    """Call cgroup name -> the pids in it, for one slot (the memory hierarchy shows them all)."""
    prefix = isolation["cgroup_prefix"] + "-"
    path = next(p for p in isolation["cgroup_paths"] if "memory" in p or len(isolation["cgroup_paths"]) == 1)
    found = {}
    for name in os.listdir(path):
        if name.startswith(prefix):
            try:
                with open(os.path.join(path, name, "cgroup.procs")) as f:
                    found[name] = [int(x) for x in f.read().split()]
            except (FileNotFoundError, OSError):
                pass  # a used call's cgroup, removed between the listing and the read (ENOENT, ENODEV)
    return found


def _owner_uid(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line for line in f if line.startswith("Uid:")).split()[1])


def _wait_prepared(sb: PythonSandbox) -> list[dict[str, list[int]]]:
    """Every slot's prepared call, once each holds its init and its waiting user process."""
    deadline = time.monotonic() + 5
    while True:
        state = [_prepared(slot.isolation) for slot in sb._slots]
        if (
            all(len(s) == 1 and len(next(iter(s.values()))) == 2 for s in state)
            or time.monotonic() > deadline
        ):
            return state


def test_each_slot_holds_a_prepared_isolated_call_that_no_running_call_can_reach():
    with PythonSandbox(
        num_workers=1, limits=PythonLimits(timeout_s=4.0), isolation="unsafe-ok", audit_guard=False
    ) as sb:
        if not sb.isolation["kernel"] or not sb.isolation["cgroup"].startswith("cgroup"):
            pytest.skip(f"no kernel jail with per-call cgroups here: {sb.isolation}")
        assert len(sb._slots) == 2  # one worker and one spare
        before = _wait_prepared(sb)
        for slot, state in zip(sb._slots, before):
            # Before any call: call 1's cgroup exists with its two processes, both still root
            # (the run's uid appears only once code arrives).
            assert list(state) == [slot.isolation["cgroup_prefix"] + "-1"], state
            assert all(_owner_uid(pid) == 0 for pid in next(iter(state.values())))
        # A running call reaches nothing: its own PID namespace holds only its init and itself.
        assert sb.run(REACH).text == "2 0"
        after = _wait_prepared(sb)
        numbers = sorted(int(next(iter(s)).rsplit("-", 1)[1]) for s in after)
        assert numbers == [1, 2], after  # the slot that served prepared call 2; the spare's 1 is intact
        with cf.ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(lambda i: sb.run(f"print({i} * 7)").text, range(8)))
        assert results == [str(i * 7) for i in range(8)]
