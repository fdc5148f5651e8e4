"""Multi-stream episodes (HiMAP shape) in the rollout engine: parking waiting streams when rows run
out, one episode's turn-ends handed over one at a time in stream order, per-stream limits and
record tags, and sampling keys that never collide across episodes."""

from __future__ import annotations

import pytest

from rollout import Continue, Episode, RolloutEngine, Stop, TurnOutcome
from rollout.render import render_env_reply
from tests.rollout_fixtures import engine_config, rollout_setup, user_prompt  # noqa: F401


class TeamEpisode(Episode):
    """A coordinator samples one turn, then starts `days` executor streams and waits. Each executor
    samples a turn, gets a "checked" reply, samples a second turn and reports. When every day has
    reported, the coordinator is continued with the reports (in day order, so the reply does not
    depend on which day finished first) and its next turn is the answer."""

    def __init__(self, tokenizer, index: int, days: int):
        self.tok, self.index, self.days = tokenizer, index, days
        self.instance_id = f"team{index}"
        self.reports: dict[str, str] = {}
        self.executor_turns: dict[str, int] = {}
        self.distributed = False

    def start(self):
        prompt = user_prompt(self.tok, f"Plan trip {self.index} in {self.days} days.")[1]
        return [Continue("coordinator", prompt)]

    def on_turn_end(self, stream, text, eos):
        if stream == "coordinator":
            if self.distributed:
                return TurnOutcome([Stop(stream, "answer", text)])
            self.distributed = True
            return TurnOutcome(
                [
                    Continue(f"day{d}", user_prompt(self.tok, f"Plan day {d} of trip {self.index}.")[1])
                    for d in range(1, self.days + 1)
                ]
            )
        self.executor_turns[stream] = self.executor_turns.get(stream, 0) + 1
        if self.executor_turns[stream] == 1:
            return TurnOutcome([Continue(stream, render_env_reply(self.tok, "checked"))])
        self.reports[stream] = text
        actions = [Stop(stream, "answer", text)]
        if len(self.reports) == self.days:
            report = "\n".join(f"{name}: {self.reports[name]}" for name in sorted(self.reports))
            actions.append(Continue("coordinator", render_env_reply(self.tok, report)))
        return TurnOutcome(actions)


def _team_episodes(tokenizer, days=(2, 3, 2, 3)):
    return [TeamEpisode(tokenizer, index, n) for index, n in enumerate(days)]


def _run(setup, episodes, **overrides):
    engine = RolloutEngine(setup.model, setup.tokenizer, engine_config(**overrides))
    return engine.run(episodes, rng=3), engine.stats


@pytest.fixture(scope="module")
def team_runs(rollout_setup):
    """4 team episodes (14 streams) sampled at T=1 on 3 rows and on 16 rows."""
    tight = _run(rollout_setup, _team_episodes(rollout_setup.tokenizer), temperature=1.0)
    roomy = _run(rollout_setup, _team_episodes(rollout_setup.tokenizer), temperature=1.0, batch_size=16)
    return tight, roomy


def test_waiting_streams_give_their_rows_up(team_runs):
    """On 3 rows, 3 waiting coordinators would hold every row while their executors are queued;
    parking frees the rows, and the parked coordinators are re-prefilled when continued."""
    (records, stats), _ = team_runs
    assert [r.stream for r in records[:3]] == ["coordinator", "day1", "day2"]
    assert len(records) == 14
    assert all(r.stop_reason == "answer" for r in records), [r.error_message for r in records]
    coordinators = [r for r in records if r.stream == "coordinator"]
    assert all(len(r.turns) == 2 for r in coordinators)
    assert stats.reprefill_tokens > 0
    assert stats.reprefill_tokens <= stats.prefill_tokens


def test_parking_does_not_change_records(team_runs):
    """Sampling keys depend on (episode, stream, position) only: a run that never parks (16 rows)
    gives the same records as the 3-row run that parks and re-prefills."""
    (tight, tight_stats), (roomy, roomy_stats) = team_runs
    assert roomy_stats.reprefill_tokens == 0
    assert [(r.instance_id, r.stream) for r in tight] == [(r.instance_id, r.stream) for r in roomy]
    for a, b in zip(tight, roomy):
        assert a.ids == b.ids and a.loss_mask == b.loss_mask and a.turns == b.turns
        assert a.stop_reason == b.stop_reason and a.answer == b.answer
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
