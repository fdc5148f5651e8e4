"""Speed benchmark: isolated Python tool calls/s, today's path beside the pre-created workers, one run.

    python benchmarks/bench_python_tool.py [--calls 200] [--callers 4] [--baseline-ref 2b2da15]

The reference is the Python tool as it was at `--baseline-ref` (the commit before the prepared
calls: each call created its cgroup, namespaces and processes on its path), loaded from git into
a temporary package and measured in the same run, on the same machine, with the same jail. Prints
calls/s and p50/p99 latency for 1 caller (1 worker) and N callers (2 workers), the CPU time per
call (this process, the supervisors and every call's processes) with the calls/s it allows on
this machine's idle CPUs (`ceiling`), the ratio of the new path to the reference, and the load
average: on a shared machine calls/s measure the share it got, the CPU time per call much less so.
"""

import argparse
import concurrent.futures as cf
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time

from sandbox.python_tool import PythonLimits, PythonSandbox

CODE = "import math\nprint(sum(math.sqrt(i) for i in range(1000)))"
_MODULES = ("python_tool", "_python_worker", "_python_jail", "_python_cgroup", "_python_child")
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _baseline(ref: str, into: str):
    """`sandbox.python_tool` as of `ref`, importable as `b2t_baseline.python_tool`."""
    package = os.path.join(into, "b2t_baseline")
    os.makedirs(package)
    open(os.path.join(package, "__init__.py"), "w").close()
    for name in _MODULES:
        text = subprocess.run(
            ["git", "-C", _REPO, "show", f"{ref}:sandbox/{name}.py"], capture_output=True, text=True
        )
        if text.returncode != 0:
            raise SystemExit(f"error: cannot read sandbox/{name}.py at {ref}: {text.stderr.strip()}")
        with open(os.path.join(package, f"{name}.py"), "w") as f:
            f.write(text.stdout.replace("from sandbox._python_cgroup", "from b2t_baseline._python_cgroup"))
    sys.path.insert(0, into)
    return importlib.import_module("b2t_baseline.python_tool")


def _cpu_s(sb) -> float:
    """CPU seconds so far of this process and of the pool's supervisors with their reaped children."""
    total = sum(os.times()[:2])
    for slot in list(sb._slots):
        try:
            with open(f"/proc/{slot.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # a slot replaced meanwhile: its share is lost (rare)
        total += sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    return total


def _timed(sb, calls: int, callers: int) -> tuple[float, list[float], float]:
    def one(_):
        t = time.perf_counter()
        res = sb.run(CODE)
        assert not res.is_error, res.text
        return time.perf_counter() - t

    with cf.ThreadPoolExecutor(max_workers=callers) as pool:
        list(pool.map(one, range(2 * callers)))  # warm-up: imports cached, slots all used once
        cpu, start = _cpu_s(sb), time.perf_counter()
        latencies = list(pool.map(one, range(calls)))
        wall = time.perf_counter() - start
    return calls / wall, latencies, (_cpu_s(sb) - cpu) / calls


def _row(name: str, rate: float, lat: list[float], cpu: float, ref: float | None) -> str:
    ms = sorted(x * 1000 for x in lat)
    p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
    ratio = f"{rate / ref:7.1f}x" if ref else "     ref"
    ceiling = (os.cpu_count() or 1) / cpu
    times = f"{statistics.median(ms):8.2f} {p99:8.2f} {cpu * 1000:8.2f}"
    return f"{name:<44} {rate:8.1f} {times} {ceiling:8.0f} {ratio}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--callers", type=int, default=4)
    parser.add_argument("--baseline-ref", default="2b2da15")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = _baseline(args.baseline_ref, tmp)
        load_before = os.getloadavg()
        lines = []
        for workers, callers in ((1, 1), (2, args.callers)):
            rates = {}
            for label, module in ((f"today ({args.baseline_ref})", old), ("prepared workers", None)):
                cls = PythonSandbox if module is None else module.PythonSandbox
                limits = (PythonLimits if module is None else module.PythonLimits)(timeout_s=5)
                with cls(num_workers=workers, limits=limits) as sb:  # isolation="full": jailed or refused
                    rate, lat, cpu = _timed(sb, args.calls, callers)
                ref = rates.get("today")
                rates.setdefault("today", rate)
                lines.append(_row(f"{label}, {workers} worker(s), {callers} caller(s)", rate, lat, cpu, ref))
        load_after = os.getloadavg()
    load = " / ".join(f"{a:.2f}-{b:.2f}" for a, b in zip(load_before, load_after))
    print(f"{os.cpu_count()} CPUs; load average 1/5/15 min (before-after): {load}\n")
    heads = ("calls/s", "p50 ms", "p99 ms", "CPU ms", "ceiling", "vs today")
    print(f"{'path':<44} " + " ".join(f"{h:>8}" for h in heads))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
