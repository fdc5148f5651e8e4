"""Multi-stream episodes (HiMAP shape) in the rollout engine: parking waiting streams when rows run
out, one episode's turn-ends handed over one at a time in stream order, per-stream limits and
record tags, and sampling keys that never collide across episodes."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from rollout import Continue, Episode, RolloutEngine, Stop, StreamLimits, TurnOutcome
from rollout.record import StreamTag
from rollout.render import render_env_reply
from sandbox.types import StopReason
from tests.rollout_fixtures import engine_config, rollout_setup, user_prompt  # noqa: F401

pytestmark = pytest.mark.slow  # team episodes rolled out through the engine, parked and not


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
                return TurnOutcome([Stop(stream, StopReason.ANSWER, text)])
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
        actions = [Stop(stream, StopReason.ANSWER, text)]
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
    roomy = _run(rollout_setup, _team_episodes(rollout_setup.tokenizer), temperature=1.0, batch_rows=16)
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


class OrderedEpisode(Episode):
    """A coordinator whose scripted turn starts three days in the order day3, day1, day2; every turn
    is fully forced, so the three days end their turns in the same host phase. on_turn_end sleeps,
    and logs (stream, thread, start, end), so concurrent or out-of-order calls would show."""

    def __init__(self, tokenizer, index: int, log: list):
        self.tok, self.log = tokenizer, log
        self.instance_id = f"ordered{index}"
        self.days_done = 0

    def _turn(self, name: str, text: str) -> Continue:
        return Continue(name, user_prompt(self.tok, text)[1], forced=self.tok.encode(f"{text}<|im_end|>"))

    def start(self):
        return [self._turn("coordinator", "Split the trip.")]

    def on_turn_end(self, stream, text, eos):
        import threading
        import time

        begin = time.perf_counter()
        time.sleep(0.05)
        self.log.append((self.instance_id, stream, threading.get_ident(), begin, time.perf_counter()))
        if stream == "coordinator":
            if self.days_done:
                return TurnOutcome([Stop(stream, StopReason.ANSWER, text)])
            return TurnOutcome([self._turn(f"day{d}", f"Plan day {d}.") for d in (3, 1, 2)])
        self.days_done += 1
        actions = [Stop(stream, StopReason.ANSWER, text)]
        if self.days_done == 3:
            reply = render_env_reply(self.tok, "all days done")
            actions.append(Continue("coordinator", reply, forced=self.tok.encode("answer<|im_end|>")))
        return TurnOutcome(actions)


def test_one_episode_hands_its_turns_over_one_at_a_time_in_stream_order(rollout_setup):
    """Streams of one episode share its state, so their turn-ends must not race: never two calls of
    one episode at once, and the days of one phase in creation order (day3, day1, day2). Two
    episodes still run side by side in the pool."""
    log: list = []
    episodes = [OrderedEpisode(rollout_setup.tokenizer, i, log) for i in range(2)]
    records, _ = _run(rollout_setup, episodes)
    assert all(r.stop_reason == "answer" for r in records), [r.error_message for r in records]
    for name in ("ordered0", "ordered1"):
        calls = [entry for entry in log if entry[0] == name]
        assert [c[1] for c in calls] == ["coordinator", "day3", "day1", "day2", "coordinator"]
        for earlier, later in zip(calls, calls[1:]):
            assert earlier[4] <= later[3], f"{name}: {earlier[1]} and {later[1]} overlapped"
    first, second = ([e for e in log if e[0] == name] for name in ("ordered0", "ordered1"))
    assert any(a[3] < b[4] and b[3] < a[4] for a in first for b in second), "episodes ran serially"


def _executor(day: int) -> StreamTag:
    return StreamTag("executor", (("day", day), ("round", 1)))


class TaggedEpisode(Episode):
    """A coordinator starts three executors with role/day/round tags and its own limits: day1 may
    take one turn, day2 the config's six, day3 only a few tokens beyond its prompt. Every executor
    turn is answered with a reply, so each runs until its limit or its third turn."""

    def __init__(self, tokenizer, day3_total: int, day1_limits=None):
        self.tok, self.day3_total = tokenizer, day3_total
        self.day1_limits = day1_limits or StreamLimits(max_turns=1)
        self.instance_id = "tagged"
        self.turns: dict[str, int] = {}

    def start(self):
        return [Continue("coordinator", user_prompt(self.tok, "Split.")[1], tag=StreamTag("coordinator"))]

    def on_turn_end(self, stream, text, eos):
        if stream == "coordinator":
            limits = {1: self.day1_limits, 2: None, 3: StreamLimits(max_total_tokens=self.day3_total)}
            prompt = user_prompt(self.tok, "Plan a day.")[1]
            starts = [Continue(f"day{d}", prompt, tag=_executor(d), limits=limits[d]) for d in limits]
            return TurnOutcome([*starts, Stop(stream, StopReason.ANSWER, text)])
        self.turns[stream] = self.turns.get(stream, 0) + 1
        if self.turns[stream] == 3:
            return TurnOutcome([Stop(stream, StopReason.ANSWER, text)])
        return TurnOutcome([Continue(stream, render_env_reply(self.tok, "checked"))])


def test_records_carry_their_tag_and_episode(rollout_setup):
    """The tag the starting Continue gave lands on the record as given; the JSONL form the trainer
    reads keeps it (the agent's details as the top-level keys `day` and `round`), typed: a
    StreamTag, a StopReason."""
    from rollout import EpisodeRecord

    tok = rollout_setup.tokenizer
    episodes = [_team_episodes(tok, days=(2,))[0], TaggedEpisode(tok, 999)]
    records, _ = _run(rollout_setup, episodes)
    tags = [(r.episode, r.stream, r.role, r.tag.detail("day"), r.tag.detail("round")) for r in records]
    assert tags == [
        (0, "coordinator", "agent", None, None),
        (0, "day1", "agent", None, None),
        (0, "day2", "agent", None, None),
        (1, "coordinator", "coordinator", None, None),
        (1, "day1", "executor", 1, 1),
        (1, "day2", "executor", 2, 1),
        (1, "day3", "executor", 3, 1),
    ]
    for record in records:
        written = json.loads(json.dumps(record.to_json()))
        assert (written["role"], written.get("day"), written.get("round")) == tags[records.index(record)][2:]
        again = EpisodeRecord.from_json(written)
        assert again == record and isinstance(again.stop_reason, StopReason)
    # records an older writer wrote (day and round null on every stream, "" while running) read back
    old = dict(records[0].to_json(), day=None, round=None, stop_reason="")
    assert EpisodeRecord.from_json(old) == dataclasses.replace(records[0], stop_reason=None)


def test_stream_limits_cap_one_stream_while_its_siblings_go_on(rollout_setup):
    prompt_len = len(user_prompt(rollout_setup.tokenizer, "Plan a day.")[1])
    records, _ = _run(rollout_setup, [TaggedEpisode(rollout_setup.tokenizer, day3_total=prompt_len + 4)])
    by_stream = {r.stream: r for r in records}
    day1, day2, day3 = by_stream["day1"], by_stream["day2"], by_stream["day3"]
    assert day1.stop_reason == "max_turns" and len(day1.turns) == 1 and day1.truncated
    assert day2.stop_reason == "answer" and len(day2.turns) == 3  # the config allows 6 turns
    assert day3.stop_reason == "max_total_tokens" and len(day3.ids) <= prompt_len + 4
    assert day3.num_sampled > 0  # it did sample, up to its own cap (the config's is 1024)


def test_stream_limits_above_the_config_fail_the_episode_with_a_clear_message(rollout_setup):
    with pytest.raises(ValueError, match="max_turns must be positive"):
        StreamLimits(max_turns=0)
    episode = TaggedEpisode(rollout_setup.tokenizer, 999, day1_limits=StreamLimits(max_turns=7))
    records, _ = _run(rollout_setup, [episode])  # the config allows 6 turns
    (coordinator,) = records  # day1 was refused before it existed; the others never started
    assert coordinator.stop_reason == "error"
    message = "stream 'day1': stream limit max_turns=7 exceeds the engine's max_turns=6"
    assert message in coordinator.error_message


class FanOutEpisode(Episode):
    """`n` streams with the same prompt, one sampled turn each."""

    def __init__(self, tokenizer, index: int, n: int):
        self.instance_id, self.n = f"fan{index}", n
        self.prompt = user_prompt(tokenizer, "Pick a city.")[1]

    def start(self):
        return [Continue(f"s{k}", self.prompt) for k in range(self.n)]

    def on_turn_end(self, stream, text, eos):
        return TurnOutcome([Stop(stream, StopReason.ANSWER, text)])


def test_streams_of_different_episodes_never_share_sampling_keys(rollout_setup):
    """With one combined seed (episode * 64 + stream), stream 64 of episode 0 drew the same samples
    as stream 0 of episode 1 (same prompt, T=1); with both folded in separately no two
    (episode, stream) pairs share a key."""
    import jax

    from rollout.device import episode_seed
    from rollout.sampling import row_keys

    episodes, streams = np.meshgrid(np.arange(3), np.arange(130), indexing="ij")
    seeds = [episode_seed(int(e)) for e in episodes.ravel()]
    keys = row_keys(jax.random.key(0), np.asarray(seeds), streams.ravel(), np.full(episodes.size, 17))
    assert len({tuple(k) for k in np.asarray(jax.random.key_data(keys)).tolist()}) == episodes.size
    # stream 0 keeps the key single-agent runs always had: fold_in(fold_in(rng, episode * 64), position)
    legacy = jax.random.fold_in(jax.random.fold_in(jax.random.key(0), 2 * 64), 17)
    first_of_episode_2 = keys[2 * 130]
    assert (jax.random.key_data(first_of_episode_2) == jax.random.key_data(legacy)).all()

    fans = [FanOutEpisode(rollout_setup.tokenizer, 0, 66), FanOutEpisode(rollout_setup.tokenizer, 1, 2)]
    records, _ = _run(rollout_setup, fans, temperature=1.0, batch_rows=16)
    sampled = [tuple(t for t, m in zip(r.ids, r.loss_mask) if m) for r in records]
    assert len(records) == 68 and all(sampled)
    # episode 0's streams 64, 65 against episode 1's streams 0, 1 (equal under the combined seed)
    assert sampled[64] != sampled[66] and sampled[65] != sampled[67]


class CutSiblingEpisode(Episode):
    """Two day streams decode in the same segment; day1's turn cap (max_turn_tokens=1) makes the
    episode stop day2 from `on_limit` while the engine is still applying that segment's results."""

    instance_id = "cut-sibling"

    def __init__(self, tokenizer):
        self.tok = tokenizer

    def start(self):
        return [
            Continue("day1", user_prompt(self.tok, "Plan day 1.")[1], limits=StreamLimits(max_turn_tokens=1)),
            Continue("day2", user_prompt(self.tok, "Plan day 2.")[1]),
        ]

    def on_turn_end(self, stream, text, eos):
        return TurnOutcome([Stop(stream, StopReason.ANSWER, text)])

    def on_limit(self, stream, reason):
        return [Stop("day2", StopReason.DONE)] if stream == "day1" else []


@pytest.mark.parametrize("share", [1.0, 0.5])
def test_a_sibling_stopped_by_on_limit_mid_segment_keeps_its_record(rollout_setup, share):  # noqa: F811
    """A stream stopped by its sibling's on_limit while the segment's results are being applied
    keeps the record it had (the segment's tokens for it are dropped with its row); nothing crashes."""
    records, _ = _run(
        rollout_setup,
        [CutSiblingEpisode(rollout_setup.tokenizer)],
        segment_return_share=share,
        max_turn_tokens=8,
        turn_cap="stop",
    )
    day1, day2 = records
    assert day1.stop_reason == StopReason.MAX_TURN_TOKENS, day1.error_message
    # Drained (share 1.0) the notice stops day2 before its row is applied; overlapped the notice is
    # queued behind the segment, so day2 may first end at its own cap.
    expected = StopReason.MAX_TURN_TOKENS if share < 1 else StopReason.DONE
    assert day2.stop_reason in (StopReason.DONE, expected), day2.error_message
    assert day2.error_message is None
    assert len(day2.ids) == len(day2.loss_mask) == len(day2.logprobs)
