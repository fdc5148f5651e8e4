"""Speed benchmark: isolated Python tool calls/s, the zygote path beside two references, one run.

    python benchmarks/bench_python_tool.py [--calls 1000] [--callers 4] [--before 2b2da15] [--main ae78dba]

The references are the Python tool as it was at `--before` (the commit before the prepared calls:
each call created its cgroup, namespaces and processes on its path) and at `--main` (prepared
calls forked by the supervisor itself, before the zygote), each loaded from git into a temporary
package and measured in the same run, on the same machine, with the same jail. Prints calls/s and
p50/p99 latency for 1 caller (1 worker) and N callers (2 workers), the CPU time per call (this
process, the supervisors and every process under them, live or reaped) with the calls/s it allows
on this machine's idle CPUs (`ceiling`), the ratio of each path to `--before`, and the load
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

import sandbox.python_tool as current

CODE = "import math\nprint(sum(math.sqrt(i) for i in range(1000)))"
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TICK = os.sysconf("SC_CLK_TCK")


def _reference(ref: str, into: str, package: str):
    """`sandbox.python_tool` as of `ref` (with its `_python_*` modules), as `package.python_tool`."""
    listed = subprocess.run(
        ["git", "-C", _REPO, "ls-tree", "--name-only", ref, "sandbox/"], capture_output=True, text=True
    )
    if listed.returncode != 0:
        raise SystemExit(f"error: cannot list sandbox/ at {ref}: {listed.stderr.strip()}")
    names = [os.path.basename(p) for p in listed.stdout.split()]
    names = [n for n in names if n.startswith("_python_") and n.endswith(".py")] + ["python_tool.py"]
    os.makedirs(os.path.join(into, package))
    open(os.path.join(into, package, "__init__.py"), "w").close()
    for name in names:
        text = subprocess.run(
            ["git", "-C", _REPO, "show", f"{ref}:sandbox/{name}"], capture_output=True, text=True
        )
        if text.returncode != 0:
            raise SystemExit(f"error: cannot read sandbox/{name} at {ref}: {text.stderr.strip()}")
        with open(os.path.join(into, package, name), "w") as f:
            f.write(text.stdout.replace("from sandbox._python_", f"from {package}._python_"))
    if into not in sys.path:
        sys.path.insert(0, into)
    return importlib.import_module(f"{package}.python_tool")


def _tree_cpu_s(pid: int) -> float:
    """CPU seconds of `pid` and every process under it, live or reaped (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except OSError:
        return 0.0  # replaced meanwhile: its share is lost (rare)
    own = sum(int(x) for x in fields[11:15]) / _TICK  # utime, stime, and its reaped children's
    return own + sum(_tree_cpu_s(c) for c in children)


def _cpu_s(sb) -> float:
    """CPU seconds so far of this process and of the pool's supervisors with everything under them."""
    return sum(os.times()[:2]) + sum(_tree_cpu_s(slot.proc.pid) for slot in list(sb._slots))


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
    return f"{name:<40} {rate:8.1f} {times} {ceiling:8.0f} {ratio}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--callers", type=int, default=4)
    parser.add_argument("--before", default="2b2da15")
    parser.add_argument("--main", default="ae78dba")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        paths = [
            (f"before ({args.before})", _reference(args.before, tmp, "b2t_before")),
            (f"main ({args.main})", _reference(args.main, tmp, "b2t_main")),
            ("zygote (this tree)", current),
        ]
        load_before = os.getloadavg()
        lines = []
        for workers, callers in ((1, 1), (2, args.callers)):
            ref = None
            for label, module in paths:
                limits = module.PythonLimits(timeout_s=5)
                with module.PythonSandbox(num_workers=workers, limits=limits) as sb:  # jailed or refused
                    rate, lat, cpu = _timed(sb, args.calls, callers)
                lines.append(_row(f"{label}, {workers}w {callers}c", rate, lat, cpu, ref))
                ref = ref or rate
        load_after = os.getloadavg()
    load = " / ".join(f"{a:.2f}-{b:.2f}" for a, b in zip(load_before, load_after))
    print(f"{os.cpu_count()} CPUs; load average 1/5/15 min (before-after): {load}\n")
    heads = ("calls/s", "p50 ms", "p99 ms", "CPU ms", "ceiling", "vs before")
    print(f"{'path, workers (w), callers (c)':<40} " + " ".join(f"{h:>8}" for h in heads))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
