"""Bad actions and every limit: the run completes, flags errors, records why each episode stopped."""

from __future__ import annotations

import pytest

from tests.rollout_fixtures import (
    ANSWER,
    SEARCH,
    engine_config,
    forced_episode,
    rollout_setup,  # noqa: F401
    user_prompt,
)


def _padded_prompt(tokenizer, length: int) -> list[int]:
    """A valid chat prompt of exactly `length` tokens (filler inside the user message)."""
    head, tail = user_prompt(tokenizer, "x")[1][:3], user_prompt(tokenizer, "x")[1][3:]
    filler = tokenizer.encode("a")
    return head + filler * (length - len(head) - len(tail)) + tail


class RaisingEpisode:
    """An episode whose environment crashes after the first turn."""

    def __init__(self, setup):
        from rollout import AgentEpisode

        class Crash(AgentEpisode):
            def on_turn_end(self, stream, text, eos):
                raise RuntimeError("environment crashed")

        self.episode = Crash("crash", user_prompt(setup.tokenizer, "hello")[1], None, setup.tokenizer)


@pytest.fixture(scope="module")
def limit_run(rollout_setup):
    from rollout import RolloutEngine
    from sandbox.python_tool import PythonLimits, PythonSandbox

    setup, tok = rollout_setup, rollout_setup.tokenizer
    python = PythonSandbox(num_workers=1, limits=PythonLimits(timeout_s=0.5), isolation="unsafe-ok")
    episodes = {
        "malformed": forced_episode(
            setup,
            "malformed",
            "a",
            {
                0: '<tool_call>{"name": "AttractionSearch", "arguments": {city: Chengdu}</tool_call>'
                "<|im_end|>",
                1: ANSWER,
            },
        ),
        "unknown_tool": forced_episode(
            setup,
            "unknown_tool",
            "b",
            {
                0: '<tool_call>{"name": "TeleportSearch", "arguments": {"city": "Chengdu"}}</tool_call>'
                "<|im_end|>",
                1: ANSWER,
            },
        ),
        "python_timeout": forced_episode(
            setup,
            "python_timeout",
            "c",
            {
                0: '<tool_call>{"name": "Python", "arguments": {"code": "while True:\\n    pass"}}'
                "</tool_call><|im_end|>",
                1: ANSWER,
            },
            python_tool=python,
        ),
        "memory_off": forced_episode(
            setup,
            "memory_off",
            "d",
            {0: '<memory>{"action": "read", "key": "all"}</memory><|im_end|>', 1: ANSWER},
            memory=False,
        ),
        "max_turns": forced_episode(setup, "max_turns", "e", {0: SEARCH}),
        "env_max_turns": forced_episode(setup, "env_max_turns", "f", {0: SEARCH}, env_max_turns=1),
        "crash": RaisingEpisode(setup).episode,
    }
    from rollout import AgentEpisode
    from sandbox.env import EpisodeEnv

    for name, length in (("total_in_decode", 997), ("prompt_too_long", 1200)):
        env = EpisodeEnv(setup.world, max_turns=20)
        episodes[name] = AgentEpisode(name, _padded_prompt(tok, length), env, tok)
    engine = RolloutEngine(setup.model, tok, engine_config(max_turns=3, max_seq_len=1000, temperature=1.0))
    try:
        records = engine.run(list(episodes.values()), rng=3)
    finally:
        python.close()
    capped_engine = RolloutEngine(setup.model, tok, engine_config(turn_cap="stop", temperature=1.0))
    capped = capped_engine.run([forced_episode(setup, "turn_cap", "g", {})], rng=3)[0]
    return episodes, {r.instance_id: r for r in records}, capped


def _response(episodes, name, turn=0, index=0):
    return episodes[name].steps[turn].responses[index]


def test_bad_calls_are_flagged_and_episode_continues(limit_run):
    episodes, records, _ = limit_run
    for name, needle in (
        ("malformed", "json"),
        ("unknown_tool", "TeleportSearch"),
        ("python_timeout", "time"),
        ("memory_off", "memory"),
    ):
        record = records[name]
        assert record.errors == [True], name
        assert record.any_error
        assert needle.lower() in _response(episodes, name).text.lower(), (
            name,
            _response(episodes, name).text,
        )
        assert record.stop_reason == "answer" and record.answer == "[]" and not record.truncated
        assert len(record.turns) == 2 and record.num_sampled == 0  # both turns fully scripted


def test_max_turns_engine_and_environment(limit_run):
    _, records, _ = limit_run
    engine_limit, env_limit = records["max_turns"], records["env_max_turns"]
    assert engine_limit.stop_reason == "max_turns" and engine_limit.truncated and engine_limit.answer is None
    assert len(engine_limit.turns) == 3
    assert env_limit.stop_reason == "max_turns" and env_limit.truncated and len(env_limit.turns) == 1


def test_total_token_budget(limit_run, rollout_setup):
    _, records, _ = limit_run
    in_decode = records["total_in_decode"]
    assert in_decode.stop_reason == "max_total_tokens" and in_decode.truncated
    assert len(in_decode.ids) == 1000 and in_decode.num_sampled == 3  # stopped mid-turn by the budget
    assert in_decode.turns == [(997, 1000)]
    too_long = records["prompt_too_long"]
    assert too_long.stop_reason == "max_total_tokens" and too_long.num_sampled == 0 and too_long.turns == []


def test_turn_token_cap_stops_episode(limit_run):
    _, _, capped = limit_run
    assert capped.stop_reason == "max_turn_tokens" and capped.truncated
    assert capped.num_sampled == 6 and capped.forced == [] and capped.answer is None


def test_turn_token_cap_close_adds_forced_im_end(limit_run, rollout_setup):
    _, records, _ = limit_run
    record = records["max_turns"]
    closing = [(a, b) for a, b in record.forced if b - a == 1]
    assert closing, "capped turns are closed with a forced <|im_end|>"
    for a, _ in closing:
        assert record.ids[a] == rollout_setup.tokenizer.im_end_id and record.loss_mask[a] == 0


def test_crashing_environment_is_recorded_not_raised(limit_run):
    _, records, _ = limit_run
    crash = records["crash"]
    assert crash.stop_reason == "error" and "environment crashed" in crash.error_message
    assert crash.any_error and len(crash.turns) == 1


def test_records_round_trip_through_json(limit_run):
    import json

    from rollout import EpisodeRecord

    _, records, capped = limit_run
    for record in [*records.values(), capped]:
        obj = json.loads(json.dumps(record.to_json()))
        assert obj["truncated"] == record.truncated
        assert EpisodeRecord.from_json(obj) == record
