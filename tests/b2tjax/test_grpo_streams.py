"""GRPO over episodes with a varying number of streams: credit modes against a hand computation,
today's layout unchanged to the bit, the row layout invisible to the real train step."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from b2tjax.config import TrainConfig, load_config
from b2tjax.grpo import credit
from b2tjax.grpo.packed import packed_update
from b2tjax.grpo.update import RolloutBatch, UpdateSpec, batch_advantages, credit_metrics, grpo_update
from b2tjax.run.agreement import StepShape, agree_step
from b2tjax.step import loss as grpo
from b2tjax.step.packing import RowPolicy
from b2tjax.step.train_step import BoundModel, init_train_state, make_step_fns
from models.config import get_config
from models.qwen3 import Qwen3ForCausalLM
from models.settings import ModelRuntime
from rollout import hosts
from rollout.record import EpisodeRecord, StreamTag

EPS = 1e-6

# 2 prompts x 3 episodes, 1..4 streams each: (prompt, episode, team reward, [(role, day, local)]).
# Prompt 7's episodes all score 0.4: an all-equal group. Episode 12 re-plans day 2 in round 2.
EPISODES = [
    (3, 10, 0.2, [("coordinator", None, None), ("executor", 1, 0.5), ("executor", 2, 1.0)]),
    (3, 11, 0.9, [("coordinator", None, None)]),
    (
        3,
        12,
        0.5,
        [("coordinator", None, None), ("executor", 1, 0.7), ("executor", 2, 0.1), ("executor", 2, 0.6)],
    ),
    (7, 20, 0.4, [("coordinator", None, None), ("executor", 1, 0.3)]),
    (
        7,
        21,
        0.4,
        [("coordinator", None, None), ("executor", 1, 0.9), ("executor", 2, 0.2), ("executor", 3, 0.8)],
    ),
    (7, 22, 0.4, [("coordinator", None, None), ("executor", 1, 0.3), ("executor", 2, 0.4)]),
]


def _streams() -> list[dict]:
    """One dict per record, in a shuffled order: nothing may rely on contiguous groups."""
    rows = [
        dict(prompt=p, episode=e, team=team, role=role, day=day, local=local)
        for p, e, team, streams in EPISODES
        for role, day, local in streams
    ]
    order = np.random.default_rng(5).permutation(len(rows))
    return [rows[i] for i in order]


def _record(reward: float, role: str = "agent", day: int | None = None) -> EpisodeRecord:
    details = (("day", day),) if day is not None else ()
    return EpisodeRecord(instance_id="x", reward=reward, tag=StreamTag(role, details))


def _hand_advantages(streams: list[dict], mode: str, weight: float, scale_by_std: bool) -> np.ndarray:
    """The credit rules written out with loops in float64."""

    def normalise(x, pool):
        centred = x - np.mean(pool)
        return centred / (np.std(pool) + EPS) if scale_by_std else centred

    team = {}
    for prompt in {s["prompt"] for s in streams}:
        rewards = {s["episode"]: s["team"] for s in streams if s["prompt"] == prompt}  # each episode once
        for episode, r in rewards.items():
            team[episode] = normalise(r, list(rewards.values()))
    out = []
    for s in streams:
        adv = team[s["episode"]]
        if mode == "team_local" and s["local"] is not None:
            pool = [
                t["local"]
                for t in streams
                if t["local"] is not None
                and (t["prompt"], t["role"], t["day"]) == (s["prompt"], s["role"], s["day"])
            ]
            adv += weight * normalise(s["local"], pool)
        out.append(adv)
    return np.array(out)


@pytest.mark.parametrize("scale_by_std", [True, False])
@pytest.mark.parametrize("mode", ["team", "team_local"])
def test_advantages_match_hand_computation(mode, scale_by_std):
    streams = _streams()
    batch = RolloutBatch(
        [_record(s["team"], s["role"], s["day"]) for s in streams],
        {},
        groups=[s["prompt"] for s in streams],
        episodes=[s["episode"] for s in streams],
        local_rewards=[s["local"] for s in streams],
    )
    cfg = load_config(
        None, [f"grpo.credit={mode}", "grpo.local_weight=0.3", f"grpo.scale_by_std={scale_by_std}"]
    )
    adv, episodes = batch_advantages(cfg.grpo, cfg.rollout.group_size, batch)
    want = _hand_advantages(streams, mode, 0.3, scale_by_std)
    np.testing.assert_allclose(adv, want, rtol=1e-5, atol=1e-6)
    assert episodes.count == 6
    in_equal_group = np.array([s["prompt"] == 7 for s in streams])
    has_local = np.array([s["local"] is not None for s in streams])
    assert np.all(adv[in_equal_group & ~has_local] == 0.0)  # all-equal group: no team signal
    if mode == "team_local":  # ... but its day executors still compare their day scores
        assert np.abs(adv[in_equal_group & has_local]).max() > 0.1
    metrics = credit_metrics(batch.records, adv, episodes)
    assert metrics["reward"] == pytest.approx(np.mean([team for _, _, team, _ in EPISODES]))  # episodes once
    assert metrics["groups_all_equal"] == 0.5 and metrics["records"] == 17 and metrics["episodes"] == 6
    for role in ("coordinator", "executor"):
        of_role = np.array([s["role"] == role for s in streams])
        assert metrics[f"adv_mean/{role}"] == pytest.approx(want[of_role].mean(), abs=1e-6)


def test_todays_layout_gives_the_previous_advantages_bit_for_bit():
    """groups=None is what the trainer did before: jitted group_advantages on the flat P*G vector."""
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(5, 4)).astype(np.float32)
    rewards[2] = 0.75  # an all-equal group
    rewards = rewards.reshape(-1)
    previous = jax.jit(grpo.group_advantages, static_argnums=(1, 2, 3))
    cfg = TrainConfig()
    cfg.rollout.group_size, cfg.rollout.prompts_per_step = 4, 5
    for scale_by_std in (True, False):
        cfg.grpo.scale_by_std = scale_by_std
        want = np.asarray(previous(rewards, 4, EPS, scale_by_std))
        for groups, episodes in ((None, None), (list(np.arange(20) // 4), list(range(20)))):
            batch = RolloutBatch([_record(float(r)) for r in rewards], {}, groups, episodes)
            adv, _ = batch_advantages(cfg.grpo, cfg.rollout.group_size, batch)
            np.testing.assert_array_equal(adv, want)


def test_streams_of_one_episode_must_agree():
    with pytest.raises(ValueError, match="team reward"):
        credit.episodes_of([0.1, 0.2], 2, groups=[0, 0], episodes=[5, 5])
    with pytest.raises(ValueError, match="same prompt group"):
        credit.episodes_of([0.1, 0.1], 2, groups=[0, 1], episodes=[5, 5])


def test_bad_credit_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="grpo.credit must be one of team, team_local; got 'solo'"):
        load_config(None, ["grpo.credit=solo"])
    with pytest.raises(ValueError, match="grpo.local_weight must be >= 0, got -1.0"):
        load_config(None, ["grpo.local_weight=-1"])


def test_a_step_must_fill_its_mini_batches():
    records = [EpisodeRecord(instance_id=f"r{i}", prompt_len=1, reward=0.0) for i in range(3)]
    g = dataclasses.replace(TrainConfig().grpo, mini_batches=4)
    with pytest.raises(ValueError, match="a step with 3 records cannot fill grpo.mini_batches=4"):
        packed_update(g, RowPolicy(64, 1), None, None, records, np.zeros(3), seed=0)


# ----------------------------------------------------------------------------------------------
# Row layouts through the real update (tiny Qwen3, plain SGD so parameters move by exactly -gradient)

N_RECORDS = 5


@functools.cache
def _model_and_records():
    model = Qwen3ForCausalLM(
        get_config("tiny"), rngs=nnx.Rngs(0), runtime=ModelRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    )
    model_fn, params = BoundModel.from_model(model)
    base = make_step_fns(model_fn, optax.sgd(1.0), lambda s: 1.0, _cfg("token_mean", 5, 1, 0).grpo, **_STEP)
    rng = np.random.default_rng(3)
    lengths = (30, 22, 41, 17, 35)
    ids = rng.integers(0, 1024, size=(len(lengths), 64)).astype(np.int32)
    lp = np.asarray(base.logprobs(params, ids[None], None))[0]  # the shape the unpadded update uses
    records = []
    for i, (length, reward) in enumerate(zip(lengths, (0.0, 1.0, 1.0, 0.5, 2.0))):
        rec = EpisodeRecord(instance_id=f"r{i}", prompt_len=4, reward=reward)
        rec.append(ids[i, :4].tolist(), sampled=False)
        for start in range(4, length, 6):  # sampled turns of 4 tokens, 2 environment tokens between
            end = min(start + 4, length)
            noisy = lp[i, start:end] + rng.normal(0, 0.3, end - start)  # off-policy: ratios != 1
            rec.append(ids[i, start:end].tolist(), sampled=True, logprobs=noisy.tolist())
            rec.append(ids[i, end : min(end + 2, length)].tolist(), sampled=False)
        records.append(rec)
    reference = jax.tree.map(lambda x: x + 0.01 * jnp.sign(x), params)
    return model_fn, params, base, records, reference


_STEP = dict(temperature=0.8, fixed_length=48)


@functools.cache
def _step_fns(aggregation: str):
    """The module's step functions per loss (plain SGD), each set with the records' log-prob pass
    (it does not depend on the loss): a shape met by two tests compiles once."""
    model_fn, _, base, _, _ = _model_and_records()
    step = make_step_fns(model_fn, optax.sgd(1.0), lambda s: 1.0, _cfg(aggregation, 1, 5, 0).grpo, **_STEP)
    return dataclasses.replace(step, logprobs=base.logprobs)


def _cfg(aggregation: str, prompts: int, group: int, micro: int, row_tokens: int = 0) -> TrainConfig:
    cfg = TrainConfig()
    cfg.rollout.prompts_per_step, cfg.rollout.group_size = prompts, group
    cfg.grpo = dataclasses.replace(
        cfg.grpo,
        aggregation=aggregation,
        beta=0.04,
        micro_batch_size=micro,
        logprob_chunk=64,
        row_tokens=row_tokens,
    )
    return cfg


@pytest.mark.slow
@pytest.mark.parametrize("aggregation", grpo.AGGREGATION_MODES)
def test_the_row_layout_changes_neither_loss_nor_gradient(aggregation):
    _, params, _, records, reference = _model_and_records()
    # 4 episodes of 2 prompts; episode 1 has two streams (records 1 and 2).
    batch = RolloutBatch(records, {}, groups=[0, 0, 0, 1, 1], episodes=[0, 1, 1, 2, 3])
    fns = _step_fns(aggregation)
    results = {}
    # 5 records: packed into the recipe's rows in one micro-batch, and one record per row in
    # micro-batches of up to 2 rows: [r r] [r r] [r].
    layouts = (("unpadded", _cfg(aggregation, 1, 5, 0)), ("padded", _cfg(aggregation, 1, 2, 2, row_tokens=1)))
    for name, cfg in layouts:
        state = init_train_state(jax.tree.map(jnp.copy, params), optax.sgd(1.0))
        new_state, metrics = grpo_update(
            UpdateSpec.of(cfg.grpo, cfg.rollout, cfg.rollout_batch, 1),
            fns,
            state,
            batch,
            seed=0,
            ref_params=reference,
        )
        results[name] = (metrics, new_state.params)
    unpadded, padded = results["unpadded"], results["padded"]
    assert unpadded[0]["rows"] == 1 and padded[0]["rows"] == 5
    for key in ("loss", "grad_norm", "clip_frac", "kl", "entropy"):
        np.testing.assert_allclose(padded[0][key], unpadded[0][key], rtol=1e-5, atol=1e-7, err_msg=key)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7), padded[1], unpadded[1])
    assert unpadded[0]["clip_frac"] > 0 and unpadded[0]["kl"] > 0  # both branches of the objective live
    moved = jax.tree.map(lambda a, b: float(jnp.abs(a - b).max()), unpadded[1], params)
    assert max(jax.tree.leaves(moved)) > 1e-4


@pytest.fixture
def allgathers(monkeypatch) -> list:
    """Every cross-process allgather (`rollout.hosts.allgather`, what every agreement and gather of
    objects runs) made from here on, as the values gathered."""
    calls: list = []
    real = hosts.allgather

    def counting(x):
        calls.append(np.asarray(x).tolist())
        return real(x)

    monkeypatch.setattr(hosts, "allgather", counting)
    return calls


def test_a_step_agrees_once_on_its_batch(allgathers, monkeypatch):
    """The trainer's one agreement per step is one allgather of the batch's shape; processes that
    hold different batches stop there, in one line, instead of training apart or hanging."""
    shape = StepShape.of([30, 22, 41])
    assert agree_step(shape) == shape == StepShape(records=3, tokens=93, longest=41)
    assert allgathers == [[3, 93, 41]]
    other = np.asarray([[3, 93, 41], [3, 94, 41]])
    monkeypatch.setattr(hosts, "allgather", lambda x: other)  # what two processes apart would gather
    monkeypatch.setattr(hosts.jax, "process_count", lambda: 2)
    with pytest.raises(RuntimeError, match="the processes hold different batches of one step"):
        agree_step(shape)


@pytest.mark.slow
def test_drop_flat_groups_trains_exactly_on_the_informative_records(allgathers):
    """grpo.drop_flat_groups: a step of a spread group (records 0, 3, 4: rewards 0, 0.5, 2) and a
    flat one (records 1, 2: both 1.0) updates the parameters exactly as training on the spread
    group's records alone; a step whose groups are all flat leaves the state untouched. The updates
    talk to no other process: the step's one agreement is the trainer's (`agree_step`)."""
    _, params, _, records, reference = _model_and_records()
    fns = _step_fns("token_mean")

    def update(cfg, batch):
        state = init_train_state(jax.tree.map(jnp.copy, params), optax.sgd(1.0))
        return grpo_update(
            UpdateSpec.of(cfg.grpo, cfg.rollout, cfg.rollout_batch, 1),
            fns,
            state,
            batch,
            seed=0,
            ref_params=reference,
        )

    dropping = _cfg("token_mean", 1, 5, 1)
    dropping.grpo = dataclasses.replace(dropping.grpo, drop_flat_groups=True)
    mixed = RolloutBatch(records, {}, groups=[0, 1, 1, 0, 0], episodes=[0, 1, 2, 3, 4])
    got_state, got = update(dropping, mixed)
    spread_only = RolloutBatch([records[i] for i in (0, 3, 4)], {}, groups=[0, 0, 0], episodes=[0, 1, 2])
    want_state, want = update(_cfg("token_mean", 1, 3, 0), spread_only)
    assert got["trained_records"] == 3 and got["groups_all_equal"] == 0.5 and got["episodes"] == 5
    for key in ("loss", "grad_norm", "entropy"):
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, err_msg=key)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7),
        got_state.params,
        want_state.params,
    )

    flat = RolloutBatch([records[1], records[2]], {}, groups=[0, 0], episodes=[0, 1])
    state = init_train_state(jax.tree.map(jnp.copy, params), optax.sgd(1.0))
    same, metrics = grpo_update(
        UpdateSpec.of(dropping.grpo, dropping.rollout, dropping.rollout_batch, 1),
        fns,
        state,
        flat,
        seed=0,
        ref_params=reference,
    )
    assert same is state and metrics["applied"] == 0.0 and metrics["trained_records"] == 0.0
    assert metrics["groups_all_equal"] == 1.0 and "loss" not in metrics
    assert allgathers == []


def test_informative_records_top_up_to_the_mini_batches_with_flat_ones():
    from b2tjax.grpo.update import informative_records

    episodes = credit.episodes_of([1.0, 1.0, 0.0, 1.0, 3.0, 3.0], 2, None, None)  # groups of 2
    assert informative_records(episodes, 1).tolist() == [2, 3]
    assert informative_records(episodes, 4).tolist() == [2, 3, 0, 1]  # two flat ones added
    flat = credit.episodes_of([1.0, 1.0, 2.0, 2.0], 2, None, None)
    assert informative_records(flat, 2).tolist() == []
