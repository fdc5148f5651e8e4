"""The loop of one rollout run on several processes (JAX multi-controller), in lock step.

Each process drives its own episodes in its own rows (rollout.run.Run with `local`): it admits,
parks and runs host work exactly as one process does. What changes is the device: every process
must call each jitted program in the same order with the same shapes, so each round begins with
one small collective -- (finished?, ready to decode?, asked to stop?) of every process -- and then:
  - all finished: the run ends everywhere;
  - any asked to stop (SIGTERM on any one host): the run stops everywhere, in the same round;
  - nobody ready: each process waits for its own host work (a finished one sleeps briefly);
  - someone ready: every process joins the prefill chunks (width agreed per chunk) and, when any
    process has rows to sample, one decode segment; a process that is not ready joins with no rows.
So a stop request costs no collective of its own and is honoured within one round however long
the rollout. Records do not depend on this schedule: sampling keys ignore rows and segments.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rollout.hosts import agree
from rollout.stats import overlap_length, union_length

IDLE_SLEEP_S = 0.002  # a finished process polls the others this often while they wait on tools


def loop_across_hosts(run, should_stop: Callable[[], bool] | None) -> bool:  # noqa: ANN001 (a Run)
    """`Run.loop` for several processes: True when every episode of every process has finished;
    False (on every process, in the same round) when any process' `should_stop` said so."""
    t0 = time.perf_counter()
    while True:
        run.schedule.host_phase(run)
        done = run.finished()
        ready = not done and not run.schedule.too_few_ready(run)
        asked = should_stop is not None and should_stop()
        flags = agree([done, ready, asked])
        if flags[:, 0].all():
            break
        if flags[:, 2].any():
            return False
        if not flags[:, 1].any():
            if run.host:
                run.collect(wait=True)
            else:
                time.sleep(IDLE_SLEEP_S)
            continue
        run.device.prefill(run.rows, feed=ready)
        batch, stopped = run._decode_batch() if ready else ([], False)
        total = int(agree([len(batch)]).sum())
        if total:
            run._apply_segment(batch, run.device.decode(batch, run.key, total_rows=total))
        if ready and not batch and not stopped and not run._wait_for_host():
            run._break_deadlock()
    run.stats.wall_s = time.perf_counter() - t0
    run.stats.env_s = union_length(run.host.spans)
    run.stats.hidden_s = overlap_length(run.host.spans, run.device.spans)
    return True
