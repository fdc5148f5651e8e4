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


def _padded(rows: list, fill: int, dtype) -> jnp.ndarray:
    """Records' per-token arrays as one batch, each padded after its end (causal: their outputs
    before it are the record's alone)."""
    out = np.full((len(rows), max(LENGTHS), *np.shape(rows[0])[1:]), fill, dtype)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return jnp.asarray(out)


def _records(sampler) -> list[EpisodeRecord]:
    """Records of the sampler's log-probs and routes (teacher-forced, as the engine records them:
    tests/rollout/test_router_replay_engine.py); the first lacks its last 2 tokens' routes (not
    sampled: appended after its last model call)."""
    rng = np.random.default_rng(7)
    ids = [rng.integers(1, sampler.config.vocab_size, n).astype(np.int32) for n in LENGTHS]
    run = jax.jit(lambda ids: (sequence_logprobs(sampler, ids)[0], sampler.routed_forward(ids)[1][1]))
    lps, routes = (np.asarray(x) for x in run(_padded(ids, 1, np.int32)))
    records = []
    for i, n in enumerate(LENGTHS):
        keep = n - 2 if i == 0 else n
        mask = ((np.arange(n) >= PROMPT) & (np.arange(n) < keep)).astype(int)
        lp = list(lps[i, :n] * mask)
        records.append(EpisodeRecord(f"r{i}", list(ids[i]), list(mask), lp, routes=routes[i, :keep]))
    return records


def test_trainer_log_probs_follow_the_sampler_routes():
    sampler = _model()
    model_fn, params = BoundModel.from_model(sampler)
    fns = make_step_fns(
        model_fn, optax.sgd(0.1), lambda s: 0.1, GRPOConfig(), temperature=1.0, fixed_length=64
    )
    records = _records(sampler)
    sampled = [np.asarray(r.loss_mask, bool) for r in records]
    want = [np.asarray(r.logprobs) for r in records]

    def run(params, records) -> list[np.ndarray]:  # the GRPO step's packed log-prob pass
        return logprob_pass(fns, record_fields(True, records), POLICY.pack(LENGTHS))(params)

    def gap(got: list[np.ndarray]) -> float:
        return max(np.abs(g[s] - w[s]).max() for g, w, s in zip(got, want, sampled, strict=True))

    fields = record_fields(True, records)
    np.testing.assert_array_equal(fields["routes"][0][-2:], -1)  # no routes recorded: own top-k
    assert gap(run(params, records)) < 1e-5  # the sampler's own weights: its log-probs

    trainer = nnx.clone(sampler)  # a router slightly moved: some tokens go to other experts
    router = trainer.layers.mlp.router
    router[...] = router[...] + jnp.asarray(
        np.random.default_rng(1).normal(0, 0.02, router.shape), jnp.float32
    )
    ids = _padded([r.ids for r in records], 1, np.int32)
    ones = jnp.ones(ids.shape, jnp.int32)
    pos = jnp.broadcast_to(jnp.arange(ids.shape[1], dtype=jnp.int32), ids.shape)
    given = _padded(fields["routes"], -1, np.int16)
    alone = jax.jit(
        lambda routes: (
            sequence_logprobs(trainer, ids, segments=(ones, pos, routes))[0],
            trainer.routed_forward(ids)[1][1],
        )
    )
    expected, own = (np.asarray(x) for x in alone(given))
    differ = np.concatenate(
        [
            (np.sort(o[: len(r.routes)], -1) != np.sort(r.routes, -1)).any((-1, -2))
            for o, r in zip(own, records)
        ]
    )
    assert 0 < differ.mean() < 0.5
    trained = BoundModel.from_model(trainer)[1]
    replayed = run(trained, records)
    plain = run(trained, [dataclasses.replace(r, routes=None) for r in records])
    for i, (got, s) in enumerate(zip(replayed, sampled, strict=True)):  # each alone, the sampler's experts
        np.testing.assert_allclose(got[s], expected[i, : len(s)][s], atol=1e-5)
    assert gap(replayed) < gap(plain) / 10  # only the gate weights moved, not the experts

    # the training rows carry the routes where their records lie, -1 on padding
    fields["old_lp"], fields["is_w"] = want, None
    batches, micro = packed_batches(fields, np.arange(3), np.ones(3), POLICY)
    for batch, mb in zip(batches, micro, strict=True):
        rows = batch.routes[0]
        assert rows.dtype == np.int16 and rows.shape == (mb.pack.rows, mb.pack.width, 2, 2)
        assert (rows[batch.segment_ids[0] == 0] == -1).all()
        for k, i in enumerate(mb.members):
            np.testing.assert_array_equal(mb.pack.take(rows, k), fields["routes"][i])
