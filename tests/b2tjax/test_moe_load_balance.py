"""A Qwen3-MoE's router in training: its statistics and load-balance loss against numpy and hand
values, padding never counted, weight 0 the plain loss and gradient, a weight > 0 adding the loss
and a gradient that lowers it, and the step's router metrics."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from b2tjax.config import GRPOConfig
from b2tjax.step import loss as grpo
from b2tjax.step.batch import TrainBatch
from b2tjax.step.logprobs import forward, sequence_head
from b2tjax.step.train_step import BoundModel, make_step_fns
from models.config import get_config
from models.moe import MoeBlock
from models.moe_config import MoeConfig
from models.qwen3 import Qwen3ForCausalLM
from models.router_stats import RouterStats, load_balance_loss, router_metrics

E, K, WEIGHT, LR = 8, 2, 0.5, 0.1
MOE = MoeConfig(num_experts=E, num_experts_per_tok=K, moe_intermediate_size=16, norm_topk_prob=True)
CFG = get_config(
    "tiny-untied", vocab_size=128, hidden_size=32, intermediate_size=64, head_dim=8, moe=MOE,
    initializer_range=0.2,
)  # fmt: skip


def _softmax(z: np.ndarray) -> np.ndarray:
    z = np.exp(z - z.max(-1, keepdims=True))
    return z / z.sum(-1, keepdims=True)


def _stats(model, ids, segments) -> RouterStats:
    return nnx.jit(lambda m, i, s: m.hidden_and_router(i, None, s)[1])(
        model, jnp.asarray(ids), jnp.asarray(segments)
    )


def test_block_stats_and_loss_equal_numpy_from_its_router_probabilities():
    f32 = jnp.float32
    block = MoeBlock(CFG, rngs=nnx.Rngs(0), dtype=f32, param_dtype=f32, experts="dense")
    x = np.random.default_rng(0).normal(size=(12, 32)).astype(np.float32)
    valid = np.array([1, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 1], bool)
    stats = nnx.jit(lambda b, x, v: b.forward(x[None], v[None])[1])(block, jnp.asarray(x), jnp.asarray(valid))
    probs = _softmax(x @ np.asarray(block.router[...]))[valid]  # [n, E]
    chosen = np.argsort(-probs, axis=-1)[:, :K]
    counts = np.bincount(chosen.reshape(-1), minlength=E)
    n = valid.sum()
    np.testing.assert_array_equal(stats.counts, counts)
    np.testing.assert_allclose(stats.probs, probs.sum(0), rtol=1e-5)
    np.testing.assert_allclose(stats.entropy, -(probs * np.log(probs)).sum(), rtol=1e-5)
    assert float(stats.tokens) == n and float(stats.slots) == n * K
    stacked = jax.tree.map(lambda a: a[None], stats)  # one layer
    want = E * np.sum(counts / n * probs.mean(0))
    np.testing.assert_allclose(load_balance_loss(stacked), want, rtol=1e-5)
    metrics = router_metrics(stacked)
    np.testing.assert_allclose(metrics["router/load_balance_loss"], want, rtol=1e-5)
    np.testing.assert_allclose(metrics["router/expert_load_max"], counts.max() / (n * K / E), rtol=1e-6)
    assert float(metrics["router/dropped_share"]) == 0.0  # dropless: every slot of a valid token routed


def test_metrics_of_a_hand_built_case():
    """Two layers, 4 experts, top-2, 4 tokens (8 slots, 2 a balanced expert); layer 1 left a slot
    unrouted, so the dropped share is measured, not assumed."""
    stats = RouterStats(
        counts=jnp.asarray([[4, 2, 2, 0], [2, 2, 1, 2]], jnp.float32),
        probs=jnp.asarray([[2, 1, 1, 0], [1, 1, 1, 1]], jnp.float32),
        entropy=jnp.asarray([2.0, 4.0]),
        tokens=jnp.asarray([4.0, 4.0]),
        slots=jnp.asarray([8.0, 8.0]),
    )
    loads = [np.array([2, 1, 1, 0.0]), np.array([1, 1, 0.5, 1])]
    want = {
        "router/load_balance_loss": (4 * 0.75 + 4 * 0.4375) / 2,  # E x sum_e f_e P_e per layer
        "router/expert_load_max": (2 + 1) / 2,
        "router/expert_load_min": (0 + 0.5) / 2,
        "router/expert_load_cv": np.mean([load.std() / load.mean() for load in loads]),
        "router/dropped_share": (0 + 1 / 8) / 2,
        "router/entropy": (0.5 + 1.0) / 2,
    }
    got = router_metrics(stats)
    assert set(got) == set(want)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-6, err_msg=name)


@functools.cache
def _model():
    """The tiny MoE with random weights set from numpy (an eager init costs seconds of dispatch)."""
    graph, state = nnx.split(nnx.eval_shape(lambda: Qwen3ForCausalLM(CFG, rngs=nnx.Rngs(0))))
    rng = np.random.default_rng(0)
    weights = jax.tree.map(
        lambda a: (a.ndim == 1) + rng.normal(0.0, 0.2, a.shape).astype(np.float32), nnx.to_pure_dict(state)
    )  # norms' scales about 1
    nnx.replace_by_pure_dict(state, jax.tree.map(jnp.asarray, weights))
    return nnx.merge(graph, state)


def test_padding_and_packing_leave_the_router_stats_unchanged():
    """Records A (5 tokens), B (3), C (6): packed two to a row, or one a row, each with padding
    after it and padding rows; the stats count the same 14 tokens the same way."""
    rng = np.random.default_rng(1)
    a, b, c = (rng.integers(1, CFG.vocab_size, n) for n in (5, 3, 6))
    ids, seg = np.zeros((2, 4, 12), np.int32), np.zeros((2, 4, 12), np.int32)
    ids[0, 0, :8], seg[0, 0, :8] = np.concatenate([a, b]), [1] * 5 + [2] * 3
    ids[0, 1, :6], seg[0, 1, :6] = c, 1
    for row, rec in enumerate((a, b, c)):
        ids[1, row, : len(rec)], seg[1, row, : len(rec)] = rec, 1
    packed, padded = (_stats(_model(), ids[i], seg[i]) for i in range(2))
    np.testing.assert_array_equal(packed.tokens, [14, 14])
    np.testing.assert_array_equal(packed.counts, padded.counts)
    for field in ("probs", "entropy", "tokens", "slots"):
        np.testing.assert_allclose(getattr(packed, field), getattr(padded, field), rtol=1e-5, err_msg=field)


def _batch():
    """One packed micro-batch [1, 2, 16]: three records (ids 0 and segment 0 after them)."""
    rng = np.random.default_rng(2)
    seg = np.array([[1] * 6 + [2] * 7 + [0] * 3, [1] * 11 + [0] * 5], np.int32)
    ids = np.where(seg > 0, rng.integers(1, CFG.vocab_size, seg.shape), 0).astype(np.int32)
    positions = np.array([list(range(6)) + list(range(7)) + [0] * 3, list(range(11)) + [0] * 5], np.int32)
    mask = ((seg > 0) & (positions > 1)).astype(np.float32)  # each record's tokens after its second
    return TrainBatch(ids, mask, segment_ids=seg, token_positions=positions).split(1)


@functools.cache
def _sft_grad(weight: float):
    model_fn, params = BoundModel.from_model(_model())
    fns = make_step_fns(
        model_fn, optax.sgd(1.0), lambda s: 1.0, GRPOConfig(), temperature=1.0, fixed_length=16,
        load_balance_weight=weight,
    )  # fmt: skip
    norm = grpo.batch_normaliser(jnp.asarray(_batch().mask), 16)
    return lambda p: fns.sft_grad(p, fns.zero_grads(p), fns.shard_batch(_batch()), norm), params


def test_weight_0_gives_the_plain_loss_and_gradient_and_the_router_metrics():
    grad, params = _sft_grad(0.0)
    grads, loss, stats = grad(params)
    micro = jax.tree.map(lambda x: jnp.asarray(x[0]), _batch())
    model_fn = BoundModel.from_model(_model())[0]

    def nll(p):
        hidden, router = forward(model_fn(p), micro.ids, micro.segments)
        lp, _ = sequence_head(model_fn(p), hidden, micro.ids)
        return -jnp.sum(lp * micro.mask) / jnp.sum(micro.mask), router

    (want, router), want_grads = jax.jit(jax.value_and_grad(nll, has_aux=True))(params)
    np.testing.assert_allclose(loss, want, rtol=1e-6)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7), grads, want_grads)
    for name, value in router_metrics(router).items():  # one micro-batch: its metrics exactly
        np.testing.assert_allclose(stats[name], value, rtol=1e-5, err_msg=name)
    assert float(stats["router/dropped_share"]) == 0.0


def test_weight_adds_the_loss_and_its_gradient_lowers_it():
    (plain, params), (weighted, _) = _sft_grad(0.0), _sft_grad(WEIGHT)

    def term(params):  # (the load-balance loss, its gradient: what the weight adds, per unit)
        (grads0, loss0, stats), (grads, loss, _) = plain(params), weighted(params)
        aux = float(stats["router/load_balance_loss"])
        np.testing.assert_allclose(loss - loss0, WEIGHT * aux, rtol=1e-5)
        return aux, jax.tree.map(lambda g, g0: (g - g0) / WEIGHT, grads, grads0)

    aux, grads = term(params)
    assert all(float(jnp.abs(g).max()) > 1e-4 for g in grads["layers"]["mlp"]["router"])  # every layer's
    losses = [aux]
    for _ in range(3):  # gradient descent on the term alone lowers it
        params = jax.tree.map(lambda p, g: p - LR * g, params, grads)
        aux, grads = term(params)
        losses.append(aux)
    assert all(b < a for a, b in zip(losses, losses[1:], strict=False)), losses


def test_a_weight_for_a_dense_model_is_refused():
    dense = nnx.eval_shape(
        lambda: Qwen3ForCausalLM(get_config("tiny-untied", vocab_size=128), rngs=nnx.Rngs(0))
    )
    model_fn, params = BoundModel.from_model(dense)  # shapes only: the step is traced, never run
    fns = make_step_fns(
        model_fn, optax.sgd(1.0), lambda s: 1.0, GRPOConfig(), temperature=1.0, fixed_length=16,
        load_balance_weight=WEIGHT,
    )  # fmt: skip
    norm = grpo.batch_normaliser(jnp.asarray(_batch().mask), 16)
    with pytest.raises(ValueError, match="model.moe.load_balance_loss_weight=0.5 needs a Qwen3-MoE model"):
        fns.sft_grad.lower(params, params, _batch(), norm)


def test_the_grpo_step_adds_the_router_terms_too():
    """Traced only (its numbers are the SFT step's: the same function adds them)."""
    model_fn, params = BoundModel.from_model(_model())
    fns = make_step_fns(
        model_fn, optax.sgd(1.0), lambda s: 1.0, GRPOConfig(), temperature=1.0, fixed_length=16,
        load_balance_weight=WEIGHT,
    )  # fmt: skip
    flat = jax.tree.map(lambda x: x[0], _batch())
    zeros = np.zeros_like(flat.mask)
    batch = TrainBatch(
        flat.ids, flat.mask, old_logprobs=zeros, advantages=zeros, segment_ids=flat.segment_ids,
        token_positions=flat.token_positions,
    ).split(1)  # fmt: skip
    norm = grpo.batch_normaliser(jnp.asarray(batch.mask), 16, jnp.asarray(batch.segment_ids))
    stats = fns.grpo_grad.lower(params, params, batch, norm).out_info[2]
    assert {"clip_frac", "entropy", "router/load_balance_loss", "router/dropped_share"} <= set(stats)
