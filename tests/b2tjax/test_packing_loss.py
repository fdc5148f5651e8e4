"""Packed rows train exactly as rows of one record each (the layout of padded rows, the packer at
a one-token budget): that update is the expectation.

Through the real `grpo_update` and SFT step on the tiny Qwen3 in fp32, with plain SGD (the
parameters move by exactly -gradient): records of irregular multi-turn masks, off-policy sampler
log-probs (ratios != 1, both clip branches), a KL reference, two mini-batches and micro-batches,
packed several to a row, a mini-batch's micro-batches of two row widths (gradient programs of
two shapes adding into one buffer, one apply), give the same loss, metrics and per-parameter
gradients (1e-6) under every aggregation mode, with full fine-tuning and with LoRA adapters. Both
layouts run the same programs: one per row width of the run, whatever the records' lengths.
A streamed batch (rollout.max_staleness > 0: the decoupled objective, b2tjax/grpo/offpolicy.py),
whose sampler log-probs put some importance weights over the cap, trains alike too: the same
loss, gradients, importance-weight and staleness metrics.
"""

import collections
import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from b2tjax.config import TrainConfig
from b2tjax.config.schema import SFTConfig
from b2tjax.grpo.update import RolloutBatch, UpdateSpec, grpo_update
from b2tjax.sft.batches import sft_rows, sft_step_batch
from b2tjax.step import loss as grpo
from b2tjax.step.packing import RowPolicy
from b2tjax.step.train_step import BoundModel, init_train_state, make_step_fns
from models.config import get_config
from models.lora import LoraConfig, add_lora
from models.qwen3 import Qwen3ForCausalLM
from models.settings import ModelRuntime
from rollout.record import EpisodeRecord

LENGTHS = (30, 22, 101, 17, 75, 9, 26, 120)
ROW = 128  # packs 1-3 records to a row
WIDTHS = 2  # rows of 64 or 128 tokens: a mini-batch has micro-batches of both (checked below)
_STEP = dict(temperature=0.8, fixed_length=48)
LAYOUT_KEYS = {"rows", "useful_token_share"}  # differ by design
ONE_PER_ROW = 1  # a row budget below every record: each record a row of its own
# GRPO rows laid out for 2 row devices: every micro-batch has 2 rows (a padding row where one is
# missing), so a run compiles 2 shapes, not 4
DEVICES = 2


@functools.cache
def _model(lora: bool):
    model = Qwen3ForCausalLM(
        get_config("tiny"), rngs=nnx.Rngs(0), runtime=ModelRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    )
    if lora:
        add_lora(model, LoraConfig(rank=4, alpha=8.0), seed=1)
        for _, var in nnx.iter_graph(model):  # B = 0 would leave A without a gradient
            if isinstance(var, nnx.LoRAParam) and not var[...].any():
                var[...] = 0.05 * jax.random.normal(jax.random.key(2), var[...].shape)
    return model


def _records(rng, behaviour=-1.5, version: int | None = None, lengths=LENGTHS) -> list[EpisodeRecord]:
    """Prompt, then sampled turns of 3-5 tokens with 1-3 environment tokens between (irregular),
    sampler log-probs about `behaviour`; `version`: streamed, record i's turns sampled by policy
    version `version - i % 2`."""
    records = []
    for i, length in enumerate(lengths):
        rec = EpisodeRecord(instance_id=f"r{i}", prompt_len=3 + i % 3, reward=float(rng.integers(0, 4)))
        ids = rng.integers(0, 1024, size=length).tolist()
        rec.append(ids[: rec.prompt_len], sampled=False)
        at = rec.prompt_len
        while at < length:
            turn = ids[at : at + int(rng.integers(3, 6))]
            lp = (behaviour + rng.normal(0, 0.5, len(turn))).tolist()
            versions = None if version is None else [version - i % 2] * len(turn)
            rec.append(turn, sampled=True, logprobs=lp, versions=versions)
            at += len(turn)
            env = ids[at : at + int(rng.integers(1, 4))]
            rec.append(env, sampled=False)
            at += len(env)
        records.append(rec)
    return records


def _cfg(aggregation: str, row_tokens: int, max_staleness: int = 0) -> TrainConfig:
    cfg = TrainConfig()
    cfg.rollout.prompts_per_step, cfg.rollout.group_size = 2, 4
    cfg.rollout.max_staleness = max_staleness
    cfg.rollout.max_seq_len = ROW  # the widest row: no record is longer
    cfg.grpo = dataclasses.replace(
        cfg.grpo,
        aggregation=aggregation,
        beta=0.04,
        mini_batches=2,
        micro_batch_size=2,
        logprob_chunk=16,
        row_tokens=row_tokens,
        row_widths=WIDTHS,
    )
    return cfg


def _widths_per_mini_batch(seed: int) -> list[set[int]]:
    """The row widths of each mini-batch's micro-batches, as the packed update lays them out."""
    split = np.array_split(np.random.default_rng(seed).permutation(len(LENGTHS)), 2)
    policy = RowPolicy(ROW, 2, DEVICES, row_widths=WIDTHS, longest=ROW)
    return [{mb.pack.width for mb in policy.pack([LENGTHS[i] for i in m])} for m in split]


def _assert_same_gradients(got, want):
    """Within 1e-6 everywhere, and within 1e-4 of the largest gradient (the tiny model's are ~1e-3)."""
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=0, atol=1e-6), got, want)
    scale = max(float(np.abs(g).max()) for g in jax.tree.leaves(want))
    diff = max(
        float(np.abs(a - b).max()) for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True)
    )
    assert scale > 1e-4 and diff <= 1e-4 * scale, (diff, scale)


def _grads(new, old):
    return jax.tree.map(lambda a, b: np.asarray(b) - np.asarray(a), new, old)  # SGD(1): -(-grad)


@functools.cache
def _fns(aggregation: str, lora: bool, streamed: bool):
    """(step functions, params, KL reference) shared by the tests of a model: one program per shape.
    Only the GRPO gradient program depends on the loss (its aggregation mode; a streamed batch's
    importance weights); the others are shared. Every argument positional, no default: the cache
    keys on the arguments as written, so `_fns(m, l)` and `_fns(m, l, False)` would build (and
    compile) the same functions twice."""
    model = _model(lora)
    model_fn, params = BoundModel.from_model(model)
    cfg = _cfg(aggregation, ROW)
    fns = make_step_fns(
        model_fn, optax.sgd(1.0), lambda s: 1.0, cfg.grpo, frozen=BoundModel.frozen_of(model), **_STEP
    )
    if (aggregation, streamed) != ("token_mean", False):
        base, params, reference = _fns("token_mean", lora, False)
        shared = dict(logprobs=base.logprobs, apply=base.apply, zero_grads=base.zero_grads)
        return dataclasses.replace(fns, **shared), params, reference
    return fns, params, jax.tree.map(lambda x: x + 0.01 * jnp.sign(x), params)


_COMPILES: collections.Counter = collections.Counter()


def _count(event: str, duration: float, fun_name: str = "", **_) -> None:
    if event == "/jax/core/compile/backend_compile_duration":
        _COMPILES[fun_name] += 1


@functools.cache
def _listen() -> None:
    jax.monitoring.register_event_duration_secs_listener(_count)


def _programs() -> tuple[int, int]:
    """XLA compiles so far in this process of gradient and log-prob programs (from the first call)."""
    _listen()
    return _COMPILES["jit(micro_grads)"], _COMPILES["jit(_logprob_pass)"]


def _padded_and_packed(aggregation: str, lora: bool, batch: RolloutBatch, max_staleness: int = 0):
    """(metrics, gradients) of one `grpo_update` on `batch`, one record per row then packed, by the
    same step functions."""
    fns, params, reference = _fns(aggregation, lora, max_staleness > 0)
    results = []
    for row_tokens in (ONE_PER_ROW, ROW):
        cfg = _cfg(aggregation, row_tokens, max_staleness)
        state = init_train_state(jax.tree.map(jnp.copy, params), optax.sgd(1.0))
        new_state, metrics = grpo_update(
            UpdateSpec.of(cfg.grpo, cfg.rollout, cfg.rollout_batch, DEVICES),
            fns,
            state,
            batch,
            seed=3,
            ref_params=reference,
        )
        results.append((metrics, _grads(new_state.params, params)))
    return results


def _assert_same_update(padded, padded_grads, packed, packed_grads):
    """Same metrics (1e-6) but the layout's, same gradients; packed rows compute fewer tokens."""
    assert packed["rows"] < padded["rows"] and packed["useful_token_share"] > padded["useful_token_share"]
    assert set(padded) - LAYOUT_KEYS == set(packed) - LAYOUT_KEYS
    for key in sorted(set(padded) - LAYOUT_KEYS):
        np.testing.assert_allclose(packed[key], padded[key], rtol=1e-6, atol=1e-6, err_msg=key)
    _assert_same_gradients(packed_grads, padded_grads)


@pytest.mark.slow
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
@pytest.mark.parametrize("aggregation", grpo.AGGREGATION_MODES)
def test_packed_grpo_update_equals_one_record_per_row(aggregation, lora):
    assert _widths_per_mini_batch(3) == [{64, 128}, {128}]
    batch = RolloutBatch(_records(np.random.default_rng(7)), {})
    before = _programs()
    (padded, padded_grads), (packed, packed_grads) = _padded_and_packed(aggregation, lora, batch)
    _assert_same_update(padded, padded_grads, packed, packed_grads)
    assert padded["clip_frac"] > 0 and padded["kl"] > 0  # both branches of the objective live
    # both layouts, all passes: at most one program per shape of the run (2 rows of 64 or 128
    # tokens); the log-prob pass's may be compiled already (shared by the modes)
    shapes = RowPolicy(ROW, 2, DEVICES, row_widths=WIDTHS, longest=ROW).shapes
    compiled = np.subtract(_programs(), before)
    assert len(shapes) == 2 and 0 < compiled[0] <= len(shapes) and compiled[1] <= len(shapes), compiled


@pytest.mark.slow
def test_a_run_compiles_its_programs_once_whatever_the_record_lengths():
    """Two updates of a one-shape run (`row_widths: 1`, rows as many as the devices) on records of
    other lengths, other rows per mini-batch and other trained tokens per row: the second
    compiles nothing (a loss-position width sized to each batch compiled anew)."""
    fns, params, reference = _fns("token_mean", False, False)
    cfg = _cfg("token_mean", ROW)
    cfg.grpo = dataclasses.replace(cfg.grpo, row_widths=1)
    spec = UpdateSpec.of(cfg.grpo, cfg.rollout, cfg.rollout_batch, DEVICES)
    assert spec.rows.shapes == {(2, ROW)}  # one of the shapes the tests above compile
    state = init_train_state(jax.tree.map(jnp.copy, params), optax.sgd(1.0))
    counts = [_programs()]
    for seed, lengths in ((7, LENGTHS), (8, (64, 12, 90, 33, 128, 50, 7, 99))):
        records = _records(np.random.default_rng(seed), lengths=lengths)
        batch = RolloutBatch(records, {})
        state, _ = grpo_update(spec, fns, state, batch, seed=seed, ref_params=reference)
        counts.append(_programs())
    assert all(n <= 1 for n in np.subtract(counts[1], counts[0]))  # the shape, if no test compiled it
    assert counts[2] == counts[1]  # the second update compiled nothing


@pytest.mark.slow
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_packed_streamed_grpo_update_equals_one_record_per_row(lora):
    """Records sampled by the last two policy versions, the sampler's log-probs around the tiny
    model's (about -7): importance weights on both sides of 1, some over the cap."""
    records = _records(np.random.default_rng(11), behaviour=-7.5, version=5)
    batch = RolloutBatch(records, {}, policy_version=5)
    results = _padded_and_packed("seq_mean_token_mean", lora, batch, max_staleness=1)
    (padded, padded_grads), (packed, packed_grads) = results
    _assert_same_update(padded, padded_grads, packed, packed_grads)
    assert 0 < padded["is_capped_share"] < 1 and padded["is_weight_max"] > 2.0
    assert padded["staleness/0"] == packed["staleness/0"] == 0.5 and padded["staleness_max"] == 1.0
    for key in ("is_capped_share", "staleness/0", "staleness/1", "staleness_mean"):
        assert packed[key] == padded[key], key  # counts over the same tokens and records


@pytest.mark.slow
@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_packed_sft_step_equals_one_record_per_row(lora):
    fns, params, _ = _fns("token_mean", lora, False)
    rng = np.random.default_rng(5)
    rows = []
    for record in _records(rng):
        mask = list(record.loss_mask)
        rows.append({"ids": list(record.ids), "mask": mask})
    results = {}
    for packing in (False, True):
        sft = SFTConfig(
            batch_size=len(rows),
            micro_batch_size=2,
            max_seq_len=ROW,
            row_tokens=ROW if packing else ONE_PER_ROW,
            row_widths=WIDTHS,
        )
        step = sft_step_batch(rows, sft.max_seq_len, sft_rows(sft))
        if packing:  # micro-batches of several widths, one optimizer update
            assert {b.ids.shape[-1] for b in step.batches} == {64, 128}
        state = init_train_state(jax.tree.map(jnp.copy, params), optax.sgd(1.0))
        new_state, metrics = step.run(fns, state)
        results[packing] = (jax.device_get(metrics), _grads(new_state.params, params), step.layout)
    (padded, padded_grads, padded_layout), (packed, packed_grads, packed_layout) = (
        results[False],
        results[True],
    )
    assert packed_layout["rows"] < padded_layout["rows"]
    for key in padded:
        np.testing.assert_allclose(packed[key], padded[key], rtol=1e-6, atol=1e-6, err_msg=key)
    _assert_same_gradients(packed_grads, padded_grads)
