"""Report episodes from what the callers hold: plans and their verdicts (launch/eval.py), rollout
records of single agents or HiMAP teams (launch/report.py, the trainer's final evaluation, the
notebook). Records are grouped into episodes by (instance id, episode index)."""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from typing import Any

from b2tjax.report.conversation import from_record
from b2tjax.report.episode import build_episode
from b2tjax.report.himap import himap_view, streams_from_records
from b2tjax.report.page import ReportError
from sandbox.benchmarks import Benchmark, Instance, Verdict
from sandbox.himap.kinds import Role


def answer_episodes(
    bench: Benchmark,
    pairs: Sequence[Instance],
    answers: Mapping[str, Any],
    verdicts: Sequence[Verdict],
    *,
    agent: str = "",
    himap: Mapping[str, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One episode per instance from its answer (None: none given) and verdict; `himap` maps an
    instance id to its team's view (b2tjax.report.himap.himap_view)."""
    return [
        build_episode(
            bench,
            inst.visible,
            answers.get(inst.id),
            verdict,
            agent=agent,
            himap=(himap or {}).get(inst.id),
        )
        for inst, verdict in zip(pairs, verdicts)
    ]


def record_episodes(
    bench: Benchmark,
    pairs: Sequence[Instance],
    records: Sequence[Any],
    tokenizer: Any,
    *,
    agent: str = "",
    shading: bool = False,
    sessions: Mapping[int, Any] | None = None,
) -> tuple[list[dict[str, Any]], list[Verdict]]:
    """(episodes, their verdicts) from rollout records (rollout.record.EpisodeRecord), judged here.
    A HiMAP team's streams share an episode index; its answer is the coordinator's, and `sessions`
    (episode index -> HimapSession) adds Σ's events and the rounds' outcomes when the caller still
    has them."""
    by_id = {inst.id: inst for inst in pairs}
    groups: dict[tuple[str, int], list[Any]] = collections.defaultdict(list)
    for record in records:
        if record.instance_id not in by_id:
            raise ReportError(f"a record is for instance {record.instance_id!r}, which is not in the split")
        groups[(record.instance_id, record.episode)].append(record)
    out, verdicts = [], []
    for (instance_id, index), streams in groups.items():
        visible, truth = by_id[instance_id]  # the benchmark's own dicts, for its judge and view
        team = any(r.role != Role.AGENT for r in streams)
        lead = next((r for r in streams if r.role == Role.COORDINATOR), streams[0])
        verdict = bench.evaluate(lead.answer, visible, truth)
        verdicts.append(verdict)
        if team:
            session = (sessions or {}).get(index)
            view = himap_view(session, streams_from_records(streams, tokenizer, shading))
            episode = build_episode(bench, visible, lead.answer, verdict, agent=agent, himap=view)
        else:
            turns = from_record(lead, tokenizer, shading=shading)
            episode = build_episode(
                bench,
                visible,
                lead.answer,
                verdict,
                agent=agent,
                turns=turns,
                stop_reason=str(lead.stop_reason),
            )
        episode["tokens"] = sum(r.num_sampled for r in streams)
        episode["stop_reason"] = str(lead.stop_reason)
        out.append(episode)
    return out, verdicts
