"""Report episodes from what the callers hold: plans and their verdicts (launch/eval.py), rollout
records of single agents or HiMAP teams (launch/report.py, the trainer's final evaluation, the
notebook). Records are grouped into episodes by (instance id, episode index)."""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from b2tjax.report.conversation import from_record
from b2tjax.report.episode import build_episode
from b2tjax.report.himap import himap_view, streams_from_records
from b2tjax.report.page import ReportError, write_report
from b2tjax.run.resume import fresh_path
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
    results: Sequence[Any] | None = None,  # b2tjax.tasks.verdicts.EpisodeVerdict (tasks sit above)
) -> tuple[list[dict[str, Any]], list[Verdict]]:
    """(episodes, their verdicts) from rollout records (rollout.record.EpisodeRecord). A HiMAP team's
    streams share an episode index; `sessions` (episode index -> HimapSession) adds Σ's events and
    the rounds' outcomes when the caller still has them. `results` (episode index -> the verdict
    the caller's evaluation tallied, b2tjax.tasks.verdicts) are used as they are: the report shows
    the verdicts the metrics table counted. Without them (records read back from a file) each
    episode is judged here: a team's answer is its coordinator's, a single agent's its record's."""
    by_id = {inst.id: inst for inst in pairs}
    groups: dict[tuple[str, int], list[Any]] = collections.defaultdict(list)
    for record in records:
        if record.instance_id not in by_id:
            raise ReportError(f"a record is for instance {record.instance_id!r}, which is not in the split")
        groups[(record.instance_id, record.episode)].append(record)
    out, verdicts = [], []
    for (instance_id, index), streams in groups.items():
        visible, truth = by_id[instance_id]  # the benchmark's own dicts, for its judge and view
        # the stream holding the team's answer: the coordinator's, or (flat team) the one that ended it
        lead = next((r for r in streams if r.role == Role.COORDINATOR), None)
        team = any(r.role != "agent" for r in streams)  # else one agent, its segments in order
        lead = lead or next((r for r in streams if r.answer is not None), streams[0] if team else streams[-1])
        result = results[index] if results is not None else None
        if result is not None and result.instance_id != instance_id:
            raise ReportError(f"episode {index} is {instance_id!r}, its verdict {result.instance_id!r}")
        answer = result.answer if result is not None else lead.answer
        verdict = result.verdict if result is not None else bench.evaluate(answer, visible, truth)
        verdicts.append(verdict)
        common = {"agent": agent, "stop_reason": str(lead.stop_reason or "")}
        if team:
            view = himap_view((sessions or {}).get(index), streams_from_records(streams, tokenizer, shading))
            episode = build_episode(bench, visible, answer, verdict, **common, himap=view)
        else:
            # a folded context's segments in order, each showing the turns sampled in it
            turns = [t for record in streams for t in from_record(record, tokenizer, shading=shading)]
            episode = build_episode(bench, visible, answer, verdict, **common, turns=turns)
            episode["segments"] = len(streams)
        episode["tokens"] = sum(r.num_sampled for r in streams)
        episode["reward"] = result.reward.total if result is not None else lead.reward
        out.append(episode)
    return out, verdicts


def write_run_report(evaluated: Any, table: str, out: Path, resume: bool) -> str | None:
    """OUT/report.html of a run's final evaluation, with the run's curves; the line to log.
    `evaluated`: record_episodes' arguments as one value (b2tjax.tasks.base.EvalEpisodes, which the
    benchmark tasks keep), None for tasks that keep none. A report that cannot be written is that
    line, not a failure of the run; a resumed run never replaces the one already there."""
    if evaluated is None or not evaluated.records:
        return None
    episodes = record_episodes(**vars(evaluated), agent="final evaluation")[0]
    path = fresh_path(out / "report.html") if resume else out / "report.html"
    title = f"final evaluation of {out.name}"
    try:
        path = write_report(path, episodes, title=title, metrics_text=table, run_dirs=[out])
    except ReportError as err:
        return f"no report.html: {err}"
    return f"wrote {path}"
