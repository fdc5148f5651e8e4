"""The jitted GRPO step on the tiny Qwen3: micro-batch accumulation, non-finite skip, log-prob pass."""

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from b2tjax.config import GRPOConfig, OptimConfig
from b2tjax.step import loss as grpo
from b2tjax.step.batch import TrainBatch
from b2tjax.step.optim import learning_rate_schedule, make_optimizer
from b2tjax.step.train_step import BoundModel, init_train_state, make_step_fns
from models.config import get_config
from models.qwen3 import Qwen3ForCausalLM
from models.settings import ModelRuntime
from rollout.sampling import teacher_forced_logprobs

N, T = 4, 24
FIXED = 32


@functools.cache
def _model(dtype=jnp.float32):
    """One tiny model per compute dtype for the whole module (eager init is slow on CPU)."""
    return Qwen3ForCausalLM(
        get_config("tiny"), rngs=nnx.Rngs(0), runtime=ModelRuntime(dtype=dtype, param_dtype=jnp.float32)
    )


@functools.cache
def _setup(aggregation="seq_mean_token_mean", beta=0.04, sgd=False):
    """One set of step functions per loss for the whole module; every set shares the first one's
    log-prob pass (it does not depend on the loss), so each shape compiles once."""
    cfg = get_config("tiny")
    model = _model()
    model_fn, params = BoundModel.from_model(model)
    gcfg = GRPOConfig(aggregation=aggregation, beta=beta, clip_low=0.2, clip_high=0.28, logprob_chunk=8)
    ocfg = OptimConfig(lr=1e-2, warmup_steps=0)
    # Plain SGD keeps the update linear in the gradient, so parameters compare at float precision
    # (Adam's first step is ~lr * sign(g) and would amplify rounding noise of near-zero gradients).
    opt = optax.sgd(1.0) if sgd else make_optimizer(ocfg, 10)
    fns = make_step_fns(
        model_fn, opt, learning_rate_schedule(ocfg, 10), gcfg, temperature=0.8, fixed_length=FIXED
    )
    if (aggregation, beta, sgd) != ("seq_mean_token_mean", 0.04, False):
        fns = dataclasses.replace(fns, logprobs=_setup()[4].logprobs)
    return cfg, model, params, opt, fns


def _batch(vocab):
    rng = np.random.default_rng(1)
    ids = rng.integers(0, vocab, size=(N, T)).astype(np.int32)
    mask = np.zeros((N, T), np.float32)
    mask[0, 5:20] = 1
    mask[1, 3:9] = 1
    mask[1, 14:24] = 1  # two turns with an environment reply between them
    mask[2, 10:12] = 1
    mask[3, 6:23] = 1
    return ids, mask, rng


@pytest.mark.slow
@pytest.mark.parametrize("aggregation", grpo.AGGREGATION_MODES)
def test_micro_batches_equal_one_batch(aggregation):
    cfg, _, params, opt, fns = _setup(aggregation, sgd=True)
    ids, mask, rng = _batch(cfg.vocab_size)
    lp_now = np.asarray(fns.logprobs(params, ids[None], None))[0]
    old = lp_now + rng.normal(scale=0.3, size=(N, T)).astype(np.float32) * mask
    ref = lp_now + rng.normal(scale=0.2, size=(N, T)).astype(np.float32) * mask
    adv = np.array([1.0, -0.5, 2.0, -1.5], np.float32)
    flat = dict(ids=ids, mask=mask, old_logprobs=old, ref_logprobs=ref, advantages=adv)

    results = {}
    for micro in (1, 4):
        batch = fns.shard_batch(TrainBatch(**flat).split(micro))
        state = init_train_state(jax.tree.map(jnp.copy, params), opt)
        new_state, metrics = fns.grpo_step(state, batch)
        results[micro] = (float(metrics["loss"]), float(metrics["clip_frac"]), new_state.params)
    for micro in (4,):
        np.testing.assert_allclose(results[micro][0], results[1][0], rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(results[micro][1], results[1][1], rtol=1e-5)
        jax.tree.map(
            lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7),
            results[micro][2],
            results[1][2],
        )
    assert results[1][1] > 0  # clipping really was active
    # The parameters moved (the step did something).
    moved = jax.tree.map(lambda a, b: float(jnp.abs(a - b).max()), results[1][2], params)
    assert max(jax.tree.leaves(moved)) > 1e-4


def test_logprob_pass_matches_teacher_forced_reference():
    cfg, model, params, _, fns = _setup()
    ids, _, _ = _batch(cfg.vocab_size)
    got = np.asarray(fns.logprobs(params, ids.reshape(2, 2, T), None)).reshape(N, T)
    for row in range(N):
        want = teacher_forced_logprobs(model, ids[row].tolist(), 0.8)
        np.testing.assert_allclose(got[row, 1:], want, rtol=1e-4, atol=1e-5)
        assert got[row, 0] == 0.0


@pytest.mark.slow
def test_non_finite_loss_skips_step_and_counts_it():
    cfg, _, params, opt, fns = _setup("token_mean", beta=0.0)
    ids, mask, _ = _batch(cfg.vocab_size)
    adv = np.array([np.nan, 1.0, -1.0, 0.5], np.float32)
    batch = fns.shard_batch(TrainBatch(ids, mask, old_logprobs=np.zeros_like(mask), advantages=adv).split(1))
    state = init_train_state(jax.tree.map(jnp.copy, params), opt)
    opt_before = jax.tree.map(np.asarray, state.opt_state)
    new_state, metrics = fns.grpo_step(state, batch)
    assert float(metrics["applied"]) == 0.0
    assert int(new_state.skipped) == 1 and int(new_state.step) == 1
    jax.tree.map(lambda a, b: np.testing.assert_array_equal(np.asarray(a), b), new_state.params, params)
    jax.tree.map(
        lambda a, b: np.testing.assert_array_equal(np.asarray(a), b), new_state.opt_state, opt_before
    )
    # A finite batch afterwards trains normally.
    batch = dataclasses.replace(batch, advantages=jnp.asarray(np.array([[0.3, 1.0, -1.0, 0.5]], np.float32)))
    newer, metrics = fns.grpo_step(new_state, batch)
    assert float(metrics["applied"]) == 1.0 and int(newer.skipped) == 1


@pytest.mark.slow
def test_bf16_compute_keeps_fp32_master_weights():
    cfg = get_config("tiny")
    ids, mask, _ = _batch(cfg.vocab_size)
    adv = np.array([1.0, -0.5, 2.0, -1.5], np.float32)
    losses = {}
    for name, dtype in (("fp32", jnp.float32), ("bf16", jnp.bfloat16)):
        model = _model(dtype)
        model_fn, params = BoundModel.from_model(model)
        opt = optax.sgd(1e-2)
        fns = make_step_fns(
            model_fn, opt, lambda s: 1e-2, GRPOConfig(logprob_chunk=8), temperature=1.0, fixed_length=FIXED
        )
        old = np.asarray(fns.logprobs(params, ids[None], None))[0]  # on-policy: ratio 1 at the first step
        batch = fns.shard_batch(TrainBatch(ids, mask, old_logprobs=old, advantages=adv).split(1))
        new_state, metrics = fns.grpo_step(init_train_state(params, opt), batch)
        assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(new_state.params))
        losses[name] = (float(metrics["loss"]), float(metrics["ratio_mean"]))
    np.testing.assert_allclose(losses["fp32"][1], 1.0, rtol=1e-6)
    # bf16 forward: same loss to bf16 precision, ratios within bf16 rounding of 1.
    np.testing.assert_allclose(losses["bf16"][0], losses["fp32"][0], rtol=0.05, atol=0.02)
    np.testing.assert_allclose(losses["bf16"][1], 1.0, atol=0.02)


def _scopes(lowered) -> set[str]:
    """Every name in the `jax.named_scope` paths of a lowered program's op locations (JAX writes a
    backward op's path as e.g. `forward_backward/transpose(jvp(forward))/mlp/dot_general`)."""
    import re

    paths = re.findall(r'loc\("([^"/][^"]*/[^"]*)"', lowered.as_text(debug_info=True))
    return {name for path in paths for name in re.findall(r"\w+", path)}


def test_a_profile_of_the_train_step_reads_like_the_code():
    """The GRPO step's and the sampler's ops carry the model's and the step's block names, so a
    profile groups by them."""
    from rollout.sampling import sample_tokens

    cfg, model, params, opt, fns = _setup()
    ids, mask, _ = _batch(cfg.vocab_size)
    zeros = np.zeros((N, T), np.float32)
    flat = dict(ids=ids, mask=mask, old_logprobs=zeros, ref_logprobs=zeros, advantages=np.ones(N, np.float32))
    batch = fns.shard_batch(TrainBatch(**flat).split(1))
    lowered = fns.grpo_step.lower(init_train_state(params, opt), batch)
    metrics = set(lowered.out_info[1])
    assert {"loss", "entropy"} <= metrics and not {m for m in metrics if m.startswith("router/")}  # dense
    step = _scopes(lowered)
    blocks = {"embed", "layers", "attention", "mlp", "final_norm"}  # log-probs project chunk by chunk
    blocks |= {"forward_backward", "forward", "logprobs", "loss", "optimizer_update"}
    assert blocks <= step, sorted(blocks - step)
    assert "lm_head" in _scopes(jax.jit(lambda x: model(x)).lower(jnp.asarray(ids)))
    logits, keys = jnp.zeros((2, 8)), jax.random.split(jax.random.key(0), 2)
    knobs = (jnp.ones(2), jnp.ones(2), jnp.zeros(2, jnp.int32))  # temperature, top_p, top_k
    assert "sample" in _scopes(jax.jit(sample_tokens).lower(logits, keys, *knobs))


def _multi_turn_batch(vocab: int, length: int = 96):
    """Rows of different lengths (ids 0 after the end) with several trained spans each, and a row
    that trains nothing."""
    rng = np.random.default_rng(2)
    ends, spans = (
        [96, 70, 41, 88],
        [[(5, 20), (30, 41), (60, 77)], [(3, 9), (14, 24), (50, 70)], [(10, 12)], []],
    )
    ids, mask = np.zeros((N, length), np.int32), np.zeros((N, length), np.float32)
    for row, (end, row_spans) in enumerate(zip(ends, spans, strict=True)):
        ids[row, :end] = rng.integers(1, vocab, end)
        for a, b in row_spans:
            mask[row, a:b] = 1.0
    return ids, mask, rng


@pytest.mark.slow
def test_head_at_trained_positions_equals_head_everywhere():
    """The GRPO and SFT steps and the log-prob pass give the same numbers (fp32) whether the output
    head is projected at `TrainBatch.positions` only or at every token."""
    from b2tjax.step.batch import loss_positions

    cfg, _, params, opt, fns = _setup("seq_mean_token_mean", beta=0.04, sgd=True)
    ids, mask, rng = _multi_turn_batch(cfg.vocab_size)
    positions = loss_positions(mask)
    assert positions.shape == (N, 96) and positions[3].max() == 0  # row 3 trains nothing
    full_lp = np.asarray(fns.logprobs(params, ids[None], None))[0]
    read = np.asarray(fns.logprobs(params, ids[None], positions[None]))[0]
    np.testing.assert_allclose(read, full_lp * (mask > 0), rtol=0, atol=1e-6)
    old = full_lp + rng.normal(scale=0.3, size=mask.shape).astype(np.float32) * mask
    ref = full_lp + rng.normal(scale=0.2, size=mask.shape).astype(np.float32) * mask
    flat = dict(
        ids=ids, mask=mask, old_logprobs=old, ref_logprobs=ref, advantages=np.float32([1, -0.5, 2, 0])
    )
    for step, fields in ((fns.grpo_step, flat), (fns.sft_step, dict(ids=ids, mask=mask))):
        out = []
        for where in (None, positions):
            batch = fns.shard_batch(TrainBatch(**fields, positions=where).split(2))
            new_state, metrics = step(init_train_state(jax.tree.map(jnp.copy, params), opt), batch)
            out.append((jax.device_get(metrics), new_state.params))
        for key, value in out[0][0].items():
            np.testing.assert_allclose(out[1][0][key], value, rtol=1e-6, atol=1e-7, err_msg=key)
        # SGD(1.0) moves each parameter by minus its gradient: the gradients agree
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=0, atol=1e-6), out[1][1], out[0][1])
        assert float(out[0][0]["grad_norm"]) > 0.1


def test_loss_positions_pack_every_trained_token():
    from b2tjax.step.batch import loss_positions

    mask = np.zeros((2, 256), np.float32)
    mask[0, [3, 4, 200]] = 1.0
    mask[1, 10:150] = 1.0  # 140 trained tokens
    got = loss_positions(mask)
    assert got.shape == (2, 256) and got.dtype == np.int32  # as many as the tokens: one shape
    np.testing.assert_array_equal(got[0], [3, 4, 200] + [0] * 253)
    np.testing.assert_array_equal(got[1], [*range(10, 150)] + [0] * 116)
    assert loss_positions(np.zeros((3, 64), np.float32)).shape == (3, 64)  # nothing trained
    with pytest.raises(ValueError, match="position 0"):
        loss_positions(np.ones((1, 64), np.float32))
