"""Speed benchmark: Python tool throughput: the jailed fork-server pool against a fresh interpreter per call.

    python benchmarks/bench_python_tool.py [--calls 100]

The reference, measured in the same run, is the naive way to isolate a call: start a new
`python -I -c CODE` subprocess (without any jail). Prints calls/s, p50/p99 latency and the ratio.
"""

import argparse
import concurrent.futures as cf
import statistics
import subprocess
import sys
import time

from sandbox.python_tool import PythonLimits, PythonSandbox

CODE = "import math\nprint(sum(math.sqrt(i) for i in range(1000)))"


def _timed(fn, calls: int, threads: int) -> tuple[float, list[float]]:
    def one(_):
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    start = time.perf_counter()
    with cf.ThreadPoolExecutor(max_workers=threads) as pool:
        latencies = list(pool.map(one, range(calls)))
    return calls / (time.perf_counter() - start), latencies


def _fresh_interpreter() -> None:
    out = subprocess.run([sys.executable, "-I", "-c", CODE], capture_output=True, text=True, timeout=10)
    assert out.returncode == 0, out.stderr


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    rows = []
    ref_rate, ref_lat = _timed(_fresh_interpreter, args.calls, 1)
    rows.append(("fresh `python -I` per call (reference)", 1, ref_rate, ref_lat))
    for workers, threads in ((1, 1), (2, 4)):
        with PythonSandbox(num_workers=workers, limits=PythonLimits(timeout_s=5)) as sb:
            check = sb.run(CODE)
            assert not check.is_error, check.text
            rate, lat = _timed(lambda: sb.run(CODE), args.calls, threads)
            isolation = sb.isolation["network"]
        rows.append((f"jailed pool, {workers} worker(s), {threads} thread(s)", threads, rate, lat))
    print(f"isolation: {isolation}\n")
    print(f"{'runner':<46} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'vs ref':>7}")
    for name, _, rate, lat in rows:
        lat_ms = sorted(x * 1000 for x in lat)
        p99 = lat_ms[min(len(lat_ms) - 1, int(0.99 * len(lat_ms)))]
        print(f"{name:<46} {rate:8.1f} {statistics.median(lat_ms):8.2f} {p99:8.2f} {rate / ref_rate:6.1f}x")


if __name__ == "__main__":
    main()
