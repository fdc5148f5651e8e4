"""The rollout engine on a tiny random Qwen3 with the real sandbox: record exactness, log-probs,
batching invariances and the chat-format equivalence."""

from __future__ import annotations

import numpy as np
import pytest

from tests.rollout_fixtures import (  # noqa: F401
    ANSWER,
    BATCH,
    MEMORY,
    SEARCH,
    engine_config,
    forced_episode,
    rollout_setup,
)


def _tracing_engine(setup, **overrides):
    from rollout import RolloutEngine

    engine = RolloutEngine(setup.model, setup.tokenizer, engine_config(**overrides))
    events: list = []
    engine.trace = lambda key, kind, ids, pos: events.append((key, kind, list(ids), pos))
    return engine, events


def _multi_turn_episodes(setup, n: int):
    """Episodes that search, write memory, sample a free turn and answer (at different turns)."""
    episodes = []
    for i in range(n):
        script = {0: SEARCH, 1: MEMORY, 2 + i % 2: ANSWER}  # turn 2 is fully sampled when i is odd
        episodes.append(
            forced_episode(setup, f"ep{i}", f"Plan trip {i} to Chengdu." + " Quickly." * i, script)
        )
    return episodes


@pytest.fixture(scope="module")
def sampled_run(rollout_setup):
    """Sampling at T=0.8 with top-p 0.9 (so the filtering path runs), 4 episodes on 3 rows."""
    episodes = _multi_turn_episodes(rollout_setup, 4)
    engine, events = _tracing_engine(rollout_setup, temperature=0.8, top_p=0.9)
    records = engine.run(episodes, rng=7)
    return episodes, records, events


@pytest.mark.slow
def test_records_are_complete_and_answered(sampled_run):
    episodes, records, _ = sampled_run
    assert [r.instance_id for r in records] == [e.instance_id for e in episodes]
    for episode, record in zip(episodes, records):
        assert record.stop_reason == "answer" and record.answer == "[]" and not record.truncated
        assert len(record.ids) == len(record.loss_mask) == len(record.logprobs)
        assert len(record.turns) == len(episode.steps)
        assert record.num_sampled > 0
        assert all(lp == 0.0 for lp, m in zip(record.logprobs, record.loss_mask) if m == 0)
        assert all(lp < 0.0 for lp, m in zip(record.logprobs, record.loss_mask) if m == 1)
        # the forced search really reached the sandbox and came back without error
        assert episode.steps[0].responses[0].name == "AttractionSearch"
        assert not episode.steps[0].responses[0].is_error
        assert record.errors == [r.is_error for s in episode.steps for r in s.responses]
        assert record.calls == [r.name for s in episode.steps for r in s.responses]


@pytest.mark.slow
def test_prefix_invariance(sampled_run):
    """Every token fed to the model is the record's next token: at each decode segment the model's
    input is exactly the record so far, and positions never skip or repeat."""
    _, records, events = sampled_run
    for index, record in enumerate(records):
        fed: list[int] = []
        sampled: list[int] = []
        for key, kind, ids, pos in events:
            if key != (index, "main"):
                continue
            if pos == 0:
                fed = []  # row (re)assigned: cache reset
            assert pos == len(fed), "model position must equal the number of tokens fed so far"
            if kind == "decode":
                assert fed == record.ids[:pos], "model input differs from the record prefix"
                sampled.extend(ids)
            fed.extend(ids)
        # everything fed is the record; an unfed tail can only be context the episode ended on
        assert fed == record.ids[: len(fed)]
        assert not any(record.loss_mask[len(fed) :])
        assert sampled == [t for t, m in zip(record.ids, record.loss_mask) if m == 1]


def test_masks_cover_exactly_sampled_and_rendered_tokens(sampled_run, rollout_setup):
    """Mask 1 == sampled ids; mask 0 == prompt + rendered environment replies + forced spans."""
    from rollout.render import render_env_reply

    tok = rollout_setup.tokenizer
    episodes, records, _ = sampled_run
    for episode, record in zip(episodes, records):
        expected_zero = [list(episode.prompt_ids)]
        for k, (start, end) in enumerate(record.turns):
            forced = [(a, b) for a, b in record.forced if start <= a < end]
            for a, b in forced:
                expected_zero.append(record.ids[a:b])
            if k < len(record.turns) - 1:
                expected_zero.append(render_env_reply(tok, episode.steps[k].rendered))
        zero_runs, run = [], []
        for t, m in zip(record.ids, record.loss_mask):
            if m == 0:
                run.append(t)
            elif run:
                zero_runs.append(run)
                run = []
        if run:
            zero_runs.append(run)
        assert sum(zero_runs, []) == sum(expected_zero, [])
        # forced spans decode to the scripted text or to the closing <|im_end|> after a turn cap
        scripts = set(episode.forced_turns.values())
        for a, b in record.forced:
            text = tok.decode(record.ids[a:b])
            assert text in scripts or record.ids[a:b] == [tok.im_end_id]


def test_sampler_logprobs_equal_teacher_forced(sampled_run, rollout_setup):
    from rollout.sampling import teacher_forced_logprobs

    _, records, _ = sampled_run
    for record in records:
        reference = teacher_forced_logprobs(rollout_setup.model, record.ids, 0.8)
        mask = np.asarray(record.loss_mask[1:], bool)
        got = np.asarray(record.logprobs[1:])[mask]
        assert np.max(np.abs(got - reference[mask])) <= 1e-3
        # and the temperature matters: T=1 log-probs are measurably different
        assert (
            np.max(np.abs(got - teacher_forced_logprobs(rollout_setup.model, record.ids, 1.0)[mask])) > 1e-2
        )


def test_record_text_equals_chat_template(sampled_run, rollout_setup):
    """decode(record) == Qwen3's official template on the same messages (replies as `tool`
    messages, a memory reply's content its <memory_response> block), except that the record ends
    at the final sampled <|im_end|> (the template adds "\\n"). Memory replies are tool results to
    the template, so it keeps every earlier turn's reasoning, as the record does."""
    from models.chat import render

    tok = rollout_setup.tokenizer
    episodes, records, _ = sampled_run
    memory_replies = 0
    for episode, record in zip(episodes, records):
        messages = list(episode.messages)
        for k, (start, end) in enumerate(record.turns):
            messages.append({"role": "assistant", "content": tok.decode(record.ids[start : end - 1])})
            if k < len(record.turns) - 1:
                responses = episode.steps[k].responses
                messages.extend({"role": "tool", "content": r.content} for r in responses)
                memory_replies += sum(r.kind == "memory" for r in responses)
        assert tok.decode(record.ids) + "\n" == render(messages)
    assert memory_replies > 0


def _greedy_ids(setup, episodes, **overrides):
    from rollout import RolloutEngine

    engine = RolloutEngine(setup.model, setup.tokenizer, engine_config(**overrides))
    return [r.ids for r in engine.run(episodes, rng=0)], engine


def test_greedy_batch_equals_each_alone(rollout_setup):
    batch_ids, _ = _greedy_ids(rollout_setup, _multi_turn_episodes(rollout_setup, 3))
    for i, episode in enumerate(_multi_turn_episodes(rollout_setup, 3)):
        alone, _ = _greedy_ids(rollout_setup, [episode])
        assert alone[0] == batch_ids[i]
    assert len({len(ids) for ids in batch_ids}) == 3  # really mixed lengths


def test_continuous_batching_equals_static(rollout_setup):
    """The drained host schedule (the default): the schedule (and so the decode-step count) does not
    depend on timing. Static batching is built here as waves of BATCH episodes, one run each
    (greedy: records do not depend on an episode's index in its run)."""
    events: list = []
    from rollout import RolloutEngine

    engine = RolloutEngine(rollout_setup.model, rollout_setup.tokenizer, engine_config())
    engine.trace = lambda key, kind, ids, pos: events.append((key[0], kind, pos))
    continuous = [r.ids for r in engine.run(_multi_turn_episodes(rollout_setup, 7), rng=0)]
    episodes, static, static_steps = _multi_turn_episodes(rollout_setup, 7), [], 0
    for start in range(0, len(episodes), BATCH):
        wave, static_engine = _greedy_ids(rollout_setup, episodes[start : start + BATCH])
        static, static_steps = static + wave, static_steps + static_engine.stats.decode_steps
    assert continuous == static
    # refill really happened: some episode's prompt was prefilled while an earlier one was mid-episode
    first_seen = {e: i for i, (e, _, _) in reversed(list(enumerate(events)))}
    last_seen = {e: i for i, (e, _, _) in enumerate(events)}
    assert any(
        first_seen[b] < last_seen[a] and first_seen[b] > first_seen[a] and b >= 3
        for a in first_seen
        for b in first_seen
        if a != b
    )
    assert engine.stats.decode_steps < static_steps


class TwoDayEpisode:
    """A HiMAP-shaped episode: a coordinator turn spawns two day streams; the coordinator waits
    (keeping its row) until both report, then continues with their reports and finishes."""

    def __init__(self, setup):
        from rollout import Continue, Episode, Stop, TurnOutcome
        from rollout.render import render_env_reply
        from tests.rollout_fixtures import user_prompt

        tok = setup.tokenizer
        outer = self

        class _Episode(Episode):
            instance_id = "two-day"

            def start(self):
                return [Continue("coordinator", user_prompt(tok, "Split the trip into two days.")[1])]

            def on_turn_end(self, stream, text, eos):
                if stream == "coordinator" and not outer.reports:
                    outer.reports["pending"] = ""
                    return TurnOutcome(
                        [Continue(f"day{d}", user_prompt(tok, f"Plan day {d}.")[1]) for d in (1, 2)]
                    )
                if stream.startswith("day"):
                    outer.reports[stream] = text
                    actions = [Stop(stream, "answer", text)]
                    if "day1" in outer.reports and "day2" in outer.reports:
                        outer.reply = f"day1: {outer.reports['day1']}\nday2: {outer.reports['day2']}"
                        actions.append(Continue("coordinator", render_env_reply(tok, outer.reply)))
                    return TurnOutcome(actions)
                return TurnOutcome([Stop(stream, "answer", text)])

        self.reports: dict[str, str] = {}
        self.reply = ""
        self.episode = _Episode()


def test_multi_stream_episode_shares_state_and_waits(rollout_setup):
    from rollout.render import render_env_reply

    two_day = TwoDayEpisode(rollout_setup)
    engine, events = _tracing_engine(rollout_setup)
    records = engine.run([two_day.episode], rng=0)
    assert [r.stream for r in records] == ["coordinator", "day1", "day2"]
    coordinator, day1, day2 = records
    assert all(r.stop_reason == "answer" for r in records)
    assert len(coordinator.turns) == 2 and len(day1.turns) == len(day2.turns) == 1
    reply = render_env_reply(rollout_setup.tokenizer, two_day.reply)
    start = coordinator.turns[0][1]
    assert coordinator.ids[start : start + len(reply)] == reply  # the days' reports, mask 0
    assert not any(coordinator.loss_mask[start : start + len(reply)])
    # the two days decoded in the same segments (parallel rows), while the coordinator waited
    # (one decode call traces its rows in row order, so same-segment rows are adjacent events)
    day1_decodes = [
        i for i, (key, kind, _, _) in enumerate(events) if key == (0, "day1") and kind == "decode"
    ]
    assert day1_decodes and all(events[i + 1][:2] == ((0, "day2"), "decode") for i in day1_decodes)
    coordinator_decodes = [
        i for i, (key, kind, _, _) in enumerate(events) if key == (0, "coordinator") and kind == "decode"
    ]
    assert len(coordinator_decodes) == 2 and coordinator_decodes[0] < day1_decodes[0] < coordinator_decodes[1]


def test_sampled_episodes_do_not_depend_on_batch_placement(rollout_setup):
    """Keys come from (rng, episode, position), not the row: T=1 sampling gives the same episodes
    when segments return after every row's turn and after a third of them (rows freed, refilled
    and decoded at other times), and a different rng gives different ones."""
    runs = [
        _greedy_ids(
            rollout_setup, _multi_turn_episodes(rollout_setup, 5), temperature=1.0, segment_return_share=share
        )[0]
        for share in (1.0, 0.34)
    ]
    assert runs[0] == runs[1]
    from rollout import RolloutEngine

    other = RolloutEngine(rollout_setup.model, rollout_setup.tokenizer, engine_config(temperature=1.0))
    assert [r.ids for r in other.run(_multi_turn_episodes(rollout_setup, 5), rng=1)] != runs[0]
