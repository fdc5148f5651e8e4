"""Per-batch HiMAP figures from finished episodes and their records: what the trainer logs every
step, launch/eval.py and the notebook print, and benchmarks/bench_himap.py reports.

Counts are per episode (means), so steps with different numbers of episodes compare. Keys:
`rounds`, `streams`, `fallback_days` (open days the coordinator's fallback planned),
`rejections/<code>` (executors' and the session's reject codes),
`sigma_rejections/<code>` (Σ's non-ok verdicts), `tokens/<role>` (sampled tokens),
`context/<role>` (prompt and environment tokens), `phase_s/<phase>` (coordinator / executors /
bargaining wall time, the paper's Table 15).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Sequence
from typing import Any

from rollout.record import EpisodeRecord
from sandbox.himap.kinds import DayStatus, Role
from sandbox.himap.summary import figures_of


def local_day_rewards(episodes: Sequence[Any], records: Sequence[EpisodeRecord]) -> list[float | None]:
    """Per record: a day executor's own outcome, 1.0 when its day was accepted into the plan and 0.0
    when it was rejected, cut or never ended; None for the coordinator (team reward only). The only
    per-day judgement the protocol makes (Σ and the domain's day check), so it needs no evaluator."""
    out: list[float | None] = []
    for record in records:
        if record.role != Role.EXECUTOR:
            out.append(None)
            continue
        session = episodes[record.episode].session
        status = next((o.status for o in session.outcomes if o.stream == record.stream), None)
        out.append(1.0 if status == DayStatus.ACCEPTED else 0.0)
    return out


def himap_metrics(episodes: Sequence[Any], records: Sequence[EpisodeRecord]) -> dict[str, float]:
    """Means over `episodes` (rollout.agents.himap.HimapEpisode after the run) of the session's figures
    and the records' tokens per role; see the module docstring for the keys."""
    n = max(len(episodes), 1)
    sums: collections.Counter[str] = collections.Counter()
    for episode in episodes:
        f = figures_of(episode.session)
        sums["rounds"] += f.rounds
        sums["fallback_days"] += f.fallback_days
        for code, count in f.rejections.items():
            sums[f"rejections/{code}"] += count
        for code, count in f.sigma_rejections.items():
            sums[f"sigma_rejections/{code}"] += count
        for phase, seconds in dataclasses.asdict(f.phase_s).items():
            sums[f"phase_s/{phase}"] += seconds
    for record in records:
        sums["streams"] += 1
        sums[f"tokens/{record.role}"] += record.num_sampled
        sums[f"context/{record.role}"] += len(record.ids) - record.num_sampled
    return {key: value / n for key, value in sorted(sums.items())}
