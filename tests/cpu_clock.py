"""CPU seconds of one call, for the tests that prove a reader is linear in its input.

Process CPU time, not wall time: other processes on a busy machine (CI's 2 cores, parallel test
workers) stretch the wall clock of a call but not the CPU time it spends, so a bound that separates
linear from quadratic stays meaningful under load.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable


def cpu_seconds(fn: Callable[..., object], *args: object) -> float:
    """CPU seconds of `fn(*args)`, with the cyclic GC paused (its passes grow with the whole heap)."""
    gc.collect()
    gc.disable()
    try:
        start = time.process_time()
        fn(*args)
        return time.process_time() - start
    finally:
        gc.enable()
