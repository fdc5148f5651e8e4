"""Several training jobs in one launch: tests/b2tjax/test_multihost.py runs its scenarios as jobs of
one process pair (launch/cluster.py) and one single process, so a pod's start, its imports and the
programs both processes already compiled are paid once per launch, not once per scenario.

    python tests/b2tjax/pod_jobs.py JOBS.json

JOBS.json lists {"name", "kind", "argv", "copy"?} in order. kind: "train" (launch/train.py's main),
"preempted" (the same, SIGTERM'd on process 1 in its second GRPO rollout: a pod's last job),
"export" (launch/export_hf.py's main) or "lookup" (the Trainer on the lookup task of
b2tjax/tasks/toy_tools.py, not a launch/train.py task: argv = OUT, overrides, "--resume"?). "copy": {src, dst,
drop}: a checkpoint directory copied first without the `drop` steps (a run resumed from mid-way).
"collectives": PATH records the cross-process calls of the job's GRPO steps (tests/b2tjax/collectives.py).
Each job's output starts with the line `=== job NAME`. The first job starts JAX's distributed
runtime (after a travel job's data build, which forks on process 0); the later jobs find it
started. Every process writes the persistent compilation cache (cache_on_every_process).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

from tests.b2tjax.collectives import record
from tests.launch_scripts import load_script

STARTED = time.monotonic()


def lookup(argv: list[str]) -> int:
    from b2tjax.config import TrainConfig, apply_overrides, validate
    from b2tjax.run.mesh import maybe_initialize_distributed, rollout_mesh

    maybe_initialize_distributed(False)  # the cluster's variables, when still set
    from b2tjax.run.trainer import Trainer, build_model
    from b2tjax.tasks.toy_tools import LookupConfig, LookupTask

    cfg = TrainConfig(task="toy", mode="sft_grpo", out=argv[0])
    validate(apply_overrides(cfg, [a for a in argv[1:] if a != "--resume"]))
    task = LookupTask(LookupConfig(), mesh=rollout_mesh(cfg.mesh))
    Trainer(cfg, task, build_model(cfg), resume="--resume" in argv, progress=False).run()
    return 0


def copy_checkpoints(src: str, dst: str, drop: list[int]) -> None:
    """Process 0 copies, every process waits for it (the copy is on the shared disk)."""
    import jax
    from jax.experimental import multihost_utils

    if jax.process_index() == 0:
        shutil.copytree(src, dst)
        for step in drop:
            shutil.rmtree(Path(dst) / str(step))
    multihost_utils.sync_global_devices(f"copied {dst}")


def cache_on_every_process() -> None:
    """JAX writes persistent-cache entries from process 0 only (against write contention on shared
    file systems). On CPU each process' programs have cache keys of their own, so process 1 writes
    its entries too: the later jobs and launches of the same programs load them on both processes."""
    from jax._src import compilation_cache, compiler, distributed

    write = compiler._cache_write

    def write_here(cache_key, compile_time_secs, module_name, backend, executable, host_callbacks):
        if distributed.global_state.process_id == 0 or host_callbacks:
            return write(cache_key, compile_time_secs, module_name, backend, executable, host_callbacks)
        seconds = int(compile_time_secs)
        return compilation_cache.put_executable_and_time(cache_key, module_name, executable, backend, seconds)

    compiler._cache_write = write_here


def count_compiles() -> Counter:
    """Seconds and counts of JAX's tracing, lowering, compiling and cache loads, summed as they
    happen: each job's line says where its minutes went."""
    from jax import monitoring

    seen: Counter = Counter()

    def duration(event: str, seconds: float, **_: object) -> None:
        seen[event.rsplit("/", 1)[-1]] += seconds

    def event(name: str, **_: object) -> None:
        seen[name.rsplit("/", 1)[-1]] += 1

    monitoring.register_event_duration_secs_listener(duration)
    monitoring.register_event_listener(event)
    return seen


def timing(name: str, start: float, seen: Counter | None, before: Counter) -> str:
    spent = Counter(seen) - before
    parts = " ".join(f"{k}={v:.1f}" for k, v in sorted(spent.items()) if k.endswith(("duration", "sec")))
    counts = f"cache_hits={spent['cache_hits']:.0f} cache_misses={spent['cache_misses']:.0f}"
    return f"--- job {name}: {time.monotonic() - start:.1f} s ({parts} {counts})"


def preempted(argv: list[str]) -> int:
    """launch/train.py with process 1 preempted as its second GRPO rollout starts (a SIGTERM it sends
    itself): a pod's last job, as the stop ends the processes (status 143)."""
    import signal

    from b2tjax.tasks.benchmark import BenchmarkTask

    rollout, calls = BenchmarkTask.rollout, []

    def preempted_in_rollout(self, *args, **kwargs):  # noqa: ANN001, ANN202
        calls.append(1)
        if len(calls) == 2 and os.environ["JAX_PROCESS_ID"] == "1":
            os.kill(os.getpid(), signal.SIGTERM)
        return rollout(self, *args, **kwargs)

    BenchmarkTask.rollout = preempted_in_rollout
    return RUNNERS["train"](argv)


RUNNERS = {
    "train": lambda argv: load_script("launch/train.py").main(argv),
    "preempted": preempted,
    "export": lambda argv: load_script("launch/export_hf.py").main(argv),
    "lookup": lookup,
}


def main(jobs_file: str) -> int:
    if os.environ.get("JAX_PROCESS_ID", "0") not in ("", "0"):  # never forks a data build: JAX may load now
        cache_on_every_process()
    seen = None
    for index, job in enumerate(json.loads(Path(jobs_file).read_text())):
        if seen is None and "jax" in sys.modules:  # counted once JAX is loaded (not before a data build)
            seen = count_compiles()
        print(f"=== job {job['name']}\n--- started at {time.monotonic() - STARTED:.1f} s", flush=True)
        start, before = time.monotonic(), Counter(seen)
        if "copy" in job:
            copy_checkpoints(**job["copy"])
        written = record(job["collectives"]) if "collectives" in job else None
        status = RUNNERS[job["kind"]](job["argv"])
        if written:
            written()
        print(timing(job["name"], start, seen, before), flush=True)
        if status:
            print(f"job {job['name']} exited {status}", flush=True)
            return status
        if index == 0:  # JAX is up (after the first job's data build): later jobs must not start it again
            os.environ.pop("JAX_COORDINATOR_ADDRESS", None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
