"""Rollouts -> plans: `launch/eval.py --records rollouts.jsonl` scores the episodes'
answers of a rollouts file as launch/rollouts.py writes it (EpisodeRecord.to_json lines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from b2tjax.cli.rollout_plans import plans_from_rollouts
from b2tjax.errors import UserError
from rollout.record import EpisodeRecord, StreamTag
from sandbox.benchmarks import get_benchmark
from sandbox.types import StopReason
from tests.launch_scripts import load_script
from tests.tp_fixtures import tp_data  # noqa: F401 - fixture


def _write(path: Path, records: list[EpisodeRecord]) -> Path:
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in records))
    return path


def test_agent_answers_and_a_himap_teams_coordinator_answer(tmp_path):
    records = [
        EpisodeRecord("a", answer="plan A", stop_reason=StopReason.ANSWER, episode=0),
        EpisodeRecord("b", answer=None, stop_reason=StopReason.MAX_TURN_TOKENS, episode=1),
        # a HiMAP team: executors answer their days; the coordinator's answer is the merged plan
        EpisodeRecord(
            "c", answer="day 1", stream="day1.r0", tag=StreamTag("executor", (("day", 1),)), episode=2
        ),
        EpisodeRecord(
            "c",
            answer="day 1",
            stream="day1.r1",
            tag=StreamTag("executor", (("day", 1), ("round", 1))),
            episode=2,
        ),
        EpisodeRecord(
            "c", answer="merged plan", stream="coordinator", tag=StreamTag("coordinator"), episode=2
        ),
        EpisodeRecord(
            "d", answer="day 1", stream="day1.r0", tag=StreamTag("executor", (("day", 1),)), episode=3
        ),
    ]
    plans = plans_from_rollouts(_write(tmp_path / "r.jsonl", records))
    assert plans == {"a": "plan A", "b": None, "c": "merged plan", "d": None}


def test_bad_rollouts_files_are_one_line_errors(tmp_path):
    plans_file = tmp_path / "plans.jsonl"
    plans_file.write_text(json.dumps({"id": "a", "plan": []}) + "\n")
    with pytest.raises(
        UserError, match=r"plans.jsonl:1: not a rollout record .* a plans file goes to --plans"
    ):
        plans_from_rollouts(plans_file)
    twice = [EpisodeRecord("a", answer="x", episode=0), EpisodeRecord("a", answer="y", episode=1)]
    with pytest.raises(UserError, match="instance 'a' has more than one episode"):
        plans_from_rollouts(_write(tmp_path / "twice.jsonl", twice))
    # two streams of one episode: never last-wins, whatever the stream names
    agents = [EpisodeRecord("a", answer="x"), EpisodeRecord("a", answer="y", stream="other")]
    with pytest.raises(
        UserError, match=r"two_agents.jsonl:2: instance 'a' has a second agent stream .*line 1"
    ):
        plans_from_rollouts(_write(tmp_path / "two_agents.jsonl", agents))
    team = [
        EpisodeRecord("c", answer="plan 1", stream="coordinator", tag=StreamTag("coordinator")),
        EpisodeRecord("c", answer="d", stream="day1.r0", tag=StreamTag("executor", (("day", 1),))),
        EpisodeRecord("c", answer="plan 2", stream="coordinator.b", tag=StreamTag("coordinator")),
    ]
    with pytest.raises(UserError, match=r"team.jsonl:3: instance 'c' has a second coordinator stream"):
        plans_from_rollouts(_write(tmp_path / "team.jsonl", team))
    same = [team[1], team[1]]
    with pytest.raises(UserError, match=r"same.jsonl:2: instance 'c' has a second stream 'day1.r0'"):
        plans_from_rollouts(_write(tmp_path / "same.jsonl", same))


def test_eval_scores_a_rollouts_file_by_its_answers(tp_data, tmp_path):
    bench = get_benchmark("travelplanner", tp_data)
    pairs = bench.load_split("train")
    answers = dict(bench.expert_answers(pairs[:3]))  # correct plans, as answer text
    records = [
        EpisodeRecord(i, answer=a, stop_reason=StopReason.ANSWER, episode=k)
        for k, (i, a) in enumerate(answers.items())
    ]
    records.append(EpisodeRecord(pairs[3][0]["id"], answer=None, stop_reason=StopReason.MAX_TURNS, episode=3))
    rollouts = _write(tmp_path / "rollouts.jsonl", records)
    out = tmp_path / "m.json"
    main = load_script("launch/eval.py").main
    argv = ["--data", str(tp_data), "--records", str(rollouts), "--split", "train"]
    assert main([*argv, "--json", str(out)]) == 0
    metrics = json.loads(out.read_text())
    # by default the 4 instances the file holds: 3 correct plans, the 4th episode answered nothing
    assert metrics["n"] == 4
    assert metrics["delivery_rate"] == pytest.approx(3 / 4)
    assert metrics["final_pass_rate"] == pytest.approx(3 / 4)
    # --all-instances: the split's 45, the 41 absent ones undelivered
    assert main([*argv, "--all-instances", "--json", str(out)]) == 0
    metrics = json.loads(out.read_text())
    assert metrics["n"] == 45
    assert metrics["delivery_rate"] == pytest.approx(3 / 45)
    assert metrics["final_pass_rate"] == pytest.approx(3 / 45)
    with pytest.raises(
        UserError, match=r"rollouts.jsonl:1: expected an object with a string 'id' \(a rollouts file"
    ):
        main(["--data", str(tp_data), "--plans", str(rollouts), "--split", "train"])
