"""Which process drives which episode, and the per-process counts a rollout reports.

Tasks only compute their own process' values; the orchestrator (b2tjax.run.agreement.pool) shows
them to every process. These helpers turn what it returns into the logged `rollout/*` and
`hosts/*` metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from rollout.hosts import episode_owner


def episode_owners(count: int, group_size: int, step: int) -> tuple[list[int] | None, list[bool] | None]:
    """Each episode's owning process and whether it is this one's (both None on one process)."""

    processes = jax.process_count()
    if processes == 1:
        return None, None
    owners = [episode_owner(i, group_size, processes, step) for i in range(count)]
    return owners, [owner == jax.process_index() for owner in owners]


ENGINE_COUNTS = (
    "generated_tokens",
    "prefill_tokens",
    "reused_tokens",
    "reprefill_tokens",
    "parks",
    "folds",
    "folded_tokens",
)


def engine_counts(executed: Sequence[int], stats: Any) -> list[int]:
    """This process' counts of a rollout: `executed` (sandbox.env.EXECUTED's (tools, answered)
    during it), the engine's ENGINE_COUNTS, its decode steps and rows (rollout.stats.EngineStats)."""
    return [*executed, *(getattr(stats, name) for name in ENGINE_COUNTS), stats.decode_steps, stats.rows]


def host_counts(records: Sequence[Any], everyone: np.ndarray) -> dict[str, float]:
    """The rollout's engine counts (`rollout/...`, summed over processes; `rollout/row_occupancy`,
    the share of row-steps that generated a token) from every process' `engine_counts` (`everyone`,
    [processes, k]) and, on several processes, what each one drove: from the records
    (`record.process` is set by the process that ran the stream) its episodes and answered calls,
    and, counted apart where the environments ran, its tool runs and answered calls."""

    out = {f"rollout/{name}": float(everyone[:, 2 + i].sum()) for i, name in enumerate(ENGINE_COUNTS)}
    # generated tokens / (decode steps x rows) over every process' rows. The processes'
    # decode calls are common (rollout/lockstep.py); each counts the steps its own rows needed, so
    # the most any process counted is the run's (exact when every segment's longest row is there).
    row_steps = float(everyone[:, -2].max() * everyone[:, -1].sum())
    out["rollout/row_occupancy"] = out["rollout/generated_tokens"] / max(row_steps, 1.0)
    if len(everyone) == 1:
        return out
    for p in range(len(everyone)):
        mine = [r for r in records if r.process == p]
        out[f"hosts/episodes_p{p}"] = float(len({r.episode for r in mine}))
        out[f"hosts/tool_calls_p{p}"] = float(sum(len(r.calls) for r in mine))
        out[f"hosts/tool_runs_p{p}"] = float(everyone[p, 0])
        out[f"hosts/answered_p{p}"] = float(everyone[p, 1])
    return out
