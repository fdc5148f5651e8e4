"""Router replay in training: records whose routes a sampler recorded are packed into rows with
them, and the trainer's log-prob pass over those rows, with a router slightly other than the
sampler's, gives the sampler's log-probs of the sampled tokens; without the routes the experts
and the log-probs differ."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from b2tjax.config import GRPOConfig
from b2tjax.grpo.packed import logprob_pass, packed_batches, record_fields
from b2tjax.step.logprobs import sequence_logprobs
from b2tjax.step.packing import RowPolicy
from b2tjax.step.train_step import BoundModel, make_step_fns
from rollout.record import EpisodeRecord
from tests.b2tjax.test_moe_load_balance import _model

LENGTHS, PROMPT = [30, 21, 12], 4
POLICY = RowPolicy(capacity=64, micro_rows=2)


def _records(sampler) -> list[EpisodeRecord]:
    """Records of the sampler's log-probs and routes (teacher-forced, as the engine records them:
    tests/rollout/test_router_replay_engine.py); the first lacks its last 2 tokens' routes (not
    sampled: appended after its last model call)."""
    rng = np.random.default_rng(7)
    run = jax.jit(lambda ids: (sequence_logprobs(sampler, ids)[0][0], sampler.routed_forward(ids)[1][1][0]))
    records = []
    for i, n in enumerate(LENGTHS):
        ids = rng.integers(1, sampler.config.vocab_size, n).astype(np.int32)
        lp, routes = (np.asarray(x) for x in run(jnp.asarray(ids[None])))
        mask = (np.arange(n) >= PROMPT).astype(int)
        keep = n - 2 if i == 0 else n
        mask[keep:] = 0
        records.append(EpisodeRecord(f"r{i}", list(ids), list(mask), list(lp * mask), routes=routes[:keep]))
    return records


def _pass(model, records):
    """Each record's log-probs by the GRPO step's packed log-prob pass under `model`'s weights, and
    the packing's fields."""
    model_fn, params = BoundModel.from_model(model)
    fns = make_step_fns(
        model_fn, optax.sgd(0.1), lambda s: 0.1, GRPOConfig(), temperature=1.0, fixed_length=64
    )
    fields = record_fields(True, records)
    return logprob_pass(fns, fields, POLICY.pack(LENGTHS))(params), fields


def test_trainer_log_probs_follow_the_sampler_routes():
    sampler = _model()
    records = _records(sampler)
    sampled = [np.asarray(r.loss_mask, bool) for r in records]
    want = [np.asarray(r.logprobs) for r in records]

    def gap(got: list[np.ndarray], ref: list[np.ndarray]) -> float:
        return max(np.abs(g[s] - w[s]).max() for g, w, s in zip(got, ref, sampled, strict=True))

    same, fields = _pass(sampler, records)  # the sampler's own weights: its log-probs
    np.testing.assert_array_equal(fields["routes"][0][-2:], -1)  # no routes recorded: own top-k
    assert gap(same, want) < 1e-5

    trainer = nnx.clone(sampler)  # a router slightly moved: some tokens go to other experts
    router = trainer.layers.mlp.router
    router[...] = router[...] + jnp.asarray(
        np.random.default_rng(1).normal(0, 0.02, router.shape), jnp.float32
    )
    own = [np.asarray(trainer.routed_forward(jnp.asarray([r.ids]))[1][1][0]) for r in records]
    differ = np.concatenate(
        [
            (np.sort(o[: len(r.routes)], -1) != np.sort(r.routes, -1)).any((-1, -2))
            for o, r in zip(own, records)
        ]
    )
    assert 0 < differ.mean() < 0.5
    replayed = _pass(trainer, records)[0]
    plain = _pass(trainer, [dataclasses.replace(r, routes=None) for r in records])[0]
    # replayed: each record alone through the sampler's experts (only the gate weights moved)
    alone = jax.jit(
        lambda ids, seg, pos, routes: sequence_logprobs(trainer, ids, segments=(seg, pos, routes))[0]
    )
    for got, r, route, s in zip(replayed, records, fields["routes"], sampled, strict=True):
        n = len(r.ids)
        ones, pos = jnp.ones((1, n), jnp.int32), jnp.arange(n, dtype=jnp.int32)[None]
        expected = np.asarray(alone(jnp.asarray([r.ids]), ones, pos, jnp.asarray(route[None]))[0])
        np.testing.assert_allclose(got[s], expected[s], atol=1e-5)  # the pass reads the sampled tokens
    assert gap(replayed, want) < gap(plain, want) / 3

    # the training rows carry the routes where their records lie, -1 on padding
    fields["old_lp"], fields["is_w"] = want, None
    batches, micro = packed_batches(fields, np.arange(3), np.ones(3), POLICY)
    for batch, mb in zip(batches, micro, strict=True):
        rows = batch.routes[0]
        assert rows.dtype == np.int16 and rows.shape == (mb.pack.rows, mb.pack.width, 2, 2)
        assert (rows[batch.segment_ids[0] == 0] == -1).all()
        for k, i in enumerate(mb.members):
            np.testing.assert_array_equal(mb.pack.take(rows, k), fields["routes"][i])
