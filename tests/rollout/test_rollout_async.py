"""Host work hidden behind decoding (`segment_return_share` < 1, rollout/schedule.py): the records
never depend on timing. Tools that sleep a random 0-30 ms reorder when turn-ends finish; segments
returning after half or three quarters of their rows must give exactly the drained schedule's
episodes."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest

from tests.rollout.test_rollout_streams import TeamEpisode
from tests.rollout_fixtures import (  # noqa: F401
    ANSWER,
    BATCH,
    MEMORY,
    SEARCH,
    TOTAL,
    engine_config,
    forced_episode,
    rollout_setup,
)

SCHEDULES = [dict(segment_return_share=share) for share in (1.0, 0.5, 0.75)]


class SleepyEnv:
    """An EpisodeEnv whose every step first sleeps a random 0-30 ms (a slow tool)."""

    def __init__(self, env, seed: int):
        self.env, self.random = env, random.Random(seed)

    def step(self, text):
        time.sleep(self.random.uniform(0.0, 0.03))
        return self.env.step(text)


def _agent_episodes(setup, n: int = 6):
    """Mixed turn counts (answer at turn 1..4) and turn lengths: scripted calls, memory writes
    and free turns that are sampled to the 6-token cap or a stop token."""
    episodes = []
    for i in range(n):
        turns = 1 + i % 4
        script = {k: (SEARCH, MEMORY, None)[(k + i) % 3] for k in range(turns)}
        script = {k: text for k, text in script.items() if text is not None}
        script[turns] = ANSWER
        episode = forced_episode(setup, f"ep{i}", f"Plan trip {i} to Chengdu." + " Quickly." * i, script)
        episode.env = SleepyEnv(episode.env, seed=int(time.time_ns() % 1000) + i)  # any timing
        episodes.append(episode)
    return episodes


class SleepyTeam(TeamEpisode):
    """TeamEpisode (coordinator + 2-3 days) whose callbacks sleep 0-30 ms, so the days' turn-ends
    finish in varying order."""

    def on_turn_end(self, stream, text, eos):
        time.sleep(random.uniform(0.0, 0.03))
        return super().on_turn_end(stream, text, eos)


def _run(setup, episodes, rng=0, **overrides):
    from rollout import RolloutEngine

    engine = RolloutEngine(setup.model, setup.tokenizer, engine_config(**overrides))
    return engine.run(episodes, rng=rng), engine.stats


def _assert_same_records(reference, records, logprob_tol):
    assert [(r.episode, r.stream) for r in records] == [(r.episode, r.stream) for r in reference]
    for a, b in zip(reference, records):
        assert (a.ids, a.loss_mask, a.turns, a.forced) == (b.ids, b.loss_mask, b.turns, b.forced)
        assert (a.stop_reason, a.answer, a.errors, a.calls) == (b.stop_reason, b.answer, b.errors, b.calls)
        assert b.logprobs == pytest.approx(a.logprobs, abs=logprob_tol)


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_overlapped_host_work_gives_the_drained_records(rollout_setup, temperature):
    runs = [
        _run(rollout_setup, _agent_episodes(rollout_setup), temperature=temperature, **s) for s in SCHEDULES
    ]
    (reference, sync_stats), *async_runs = runs
    assert len({len(r.turns) for r in reference}) >= 3, "turn counts should be mixed"
    # answers, and (greedy) one episode cut at max_seq_len: its on_limit goes through the chain too
    assert "answer" in {r.stop_reason for r in reference}
    assert "error" not in {r.stop_reason for r in reference}, [r.error_message for r in reference]
    assert sync_stats.hidden_s == 0.0
    for records, _ in async_runs:
        _assert_same_records(reference, records, 1e-5)  # fp32 rounding of other prefill shapes
    # share 0.5: the rows still sampling decode while the others' tools sleep
    stats = async_runs[0][1]
    assert stats.hidden_s > 0.0, "no tool time ran during a decode call"
    assert stats.host_s + stats.device_s > stats.wall_s  # overlap, by the stats' own account


def test_overlapped_host_work_gives_the_drained_records_for_multi_stream_episodes(rollout_setup):
    """4 team episodes (14 streams) on 3 rows at T=1: parking, episodes in parallel, the days of
    one episode finishing in any order, one episode's callbacks chained."""
    runs = [
        _run(
            rollout_setup,
            [SleepyTeam(rollout_setup.tokenizer, i, n) for i, n in enumerate((2, 3, 2, 3))],
            rng=3,
            temperature=1.0,
            **s,
        )
        for s in SCHEDULES
    ]
    (reference, _), *async_runs = runs
    assert len(reference) == 14
    assert all(r.stop_reason == "answer" for r in reference), [r.error_message for r in reference]
    for records, _ in async_runs:
        _assert_same_records(reference, records, 1e-4)  # parked streams are re-prefilled


def _own_pages(model, rows: int):
    """An empty page pool whose `rows` rows each own TOTAL slots of pages in order (the tables the
    engine's allocator would give them), and the next-token logits."""
    import jax.numpy as jnp

    from rollout.pages import pages_for
    from rollout.placement import new_rollout_arrays

    per_row = pages_for(TOTAL, 16)
    cache, logits = new_rollout_arrays(model.config, rows, TOTAL, model.dtype, (16, rows * per_row))
    return cache.replace(pages=jnp.arange(rows * per_row, dtype=jnp.int32).reshape(rows, per_row)), logits


def _greedy_params(rows: int):
    """Greedy sampling settings for `rows` rows (temperature 0), one seed per row."""
    import jax.numpy as jnp

    from rollout.sampling import SamplingArrays

    return SamplingArrays(
        temperature=jnp.zeros(rows),
        top_p=jnp.ones(rows),
        top_k=jnp.zeros(rows, jnp.int32),
        seed=jnp.arange(rows, dtype=jnp.int32),
        stream=jnp.zeros(rows, jnp.int32),
    )


def test_decode_segment_returns_when_its_share_of_rows_has_stopped(rollout_setup):
    """Rows with budgets 2, 4 and 6 and no reachable stop token: the segment returns after 2 steps
    when 1 row must stop, after 4 when 2 must, after 6 when all must (the engine's default); rows cut off
    mid-turn report Finish.NONE and keep their cache consistent with their count."""
    import jax
    import jax.numpy as jnp

    from rollout.programs import Finish, ModelRunner

    model = rollout_setup.model
    runner = ModelRunner(model, valid_vocab=rollout_setup.tokenizer.vocab_size)  # the engine's
    rows = BATCH
    params = _greedy_params(rows)
    no_stop = jnp.asarray([-1, -1], jnp.int32)
    budget = jnp.asarray([2, 4, 6], jnp.int32)
    got = {}
    for stop_after in (1, 2, 3):
        # the engine tests' shapes (3 rows, 1024 slots, prefill width 64): nothing new to compile
        cache, logits = _own_pages(model, rows)
        prompt = np.zeros((rows, 64), np.int32)
        prompt[:, :8] = np.arange(1, 1 + rows * 8).reshape(rows, 8)
        logits, cache, _ = runner.prefill(
            runner.state,
            jnp.arange(rows, dtype=jnp.int32),
            prompt,
            jnp.full((rows,), 8, jnp.int32),
            cache,
            logits,
            jnp.zeros(rows, bool),
        )
        _, _, count, finish, cache, _, _ = runner.decode(
            runner.state,
            cache,
            logits,
            jnp.ones(rows, bool),
            budget,
            params,
            no_stop,
            jax.random.key(0),
            jnp.int32(stop_after),
            max_steps=8,
        )
        got[stop_after] = (np.asarray(count).tolist(), np.asarray(finish).tolist())
        assert np.asarray(cache.lengths).tolist() == [8 + c for c in got[stop_after][0]]
    B, N = Finish.BUDGET, Finish.NONE
    assert got == {1: ([2, 2, 2], [B, N, N]), 2: ([2, 4, 4], [B, B, N]), 3: ([2, 4, 6], [B, B, B])}


def test_the_programs_take_xla_cpus_forms_only_when_compiled_for_cpu(rollout_setup):
    """The platform a decode program is built for, not the host's backend, picks the CPU forms (the
    tied head as E x h^T behind a barrier, the layers unrolled over per-layer weights): a TPU plan
    lowered on this CPU host (b2tjax/plan/memory_plan.py) must be the TPU run's program, one layer scan."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from rollout.programs import compiled_functions, program_platform

    model = rollout_setup.model
    graphdef, state = nnx.split(model)
    rows = BATCH
    cache, logits = _own_pages(model, rows)
    params = _greedy_params(rows)
    args = (state, cache, logits, jnp.ones(rows, bool), jnp.full(rows, 4, jnp.int32), params)
    texts = {
        platform: compiled_functions(graphdef, None, platform)[1]
        .lower(*args, jnp.asarray([-1], jnp.int32), jax.random.key(0), max_steps=8)
        .as_text()
        for platform in ("cpu", "tpu")
    }
    assert program_platform(None) == "cpu"
    assert "optimization_barrier" in texts["cpu"] and "optimization_barrier" not in texts["tpu"]
    # the head's product plus one traced layer in the scan off CPU, or every layer's on CPU
    layers = model.config.num_hidden_layers
    dots = {p: text.count("stablehlo.dot_general") for p, text in texts.items()}
    assert layers > 1 and dots["cpu"] == 1 + layers * (dots["tpu"] - 1), dots


def test_the_host_schedule_follows_the_share_and_the_old_switches_are_refused(tmp_path):
    """Drained at share 1.0, overlapped below; a recipe or override naming a removed baseline switch
    is one line saying what replaced it."""
    from b2tjax.config import load_config, load_rollout_config
    from rollout.schedule import Drained, Overlapped, host_schedule

    assert isinstance(host_schedule(1.0), Drained) and isinstance(host_schedule(0.5), Overlapped)
    with pytest.raises(ValueError, match=r"'rollout.async_host' was removed: .*segment_return_share"):
        load_config(None, ["rollout.async_host=false"])
    recipe = tmp_path / "old.yaml"
    recipe.write_text("rollout:\n  refill: false\n")
    with pytest.raises(ValueError, match=r"old.yaml: .*'rollout.refill' was removed: continuous"):
        load_config(recipe)
    with pytest.raises(ValueError, match=r"'rollout.kv_cache' was removed: .*page pool; rollout.kv_pages"):
        load_config(None, ["rollout.kv_cache=contiguous"])
    with pytest.raises(ValueError, match=r"'rollout.reprefill' was removed") as err:
        load_rollout_config(None, ["rollout.reprefill=true"])
    assert "\n" not in str(err.value)
