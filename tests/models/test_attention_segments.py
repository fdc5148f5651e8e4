"""Segment-aware attention (packed rows) against the independent expectation: every record
of a packed row gives the logits and gradients of a forward of that record alone."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from models.config import get_config
from models.qwen3 import Qwen3ForCausalLM
from models.settings import ModelRuntime

# Two rows of T = 32: records of 7, 12 and 5 tokens then 8 of padding; 20 and 9 tokens then 3 of padding.
ROWS = ([7, 12, 5], [20, 9])
T = 32


def _packed(vocab: int, seed: int = 0) -> tuple[list[list[np.ndarray]], np.ndarray, np.ndarray, np.ndarray]:
    """(records per row, ids [2, T], positions restarting per record, segment ids with 0 = padding)."""
    rng = np.random.default_rng(seed)
    records = [[rng.integers(0, vocab, n, dtype=np.int32) for n in row] for row in ROWS]
    ids = np.zeros((len(ROWS), T), np.int32)
    positions = np.zeros_like(ids)
    segments = np.zeros_like(ids)
    for r, row in enumerate(records):
        start = 0
        for s, rec in enumerate(row, start=1):
            ids[r, start : start + len(rec)] = rec
            positions[r, start : start + len(rec)] = np.arange(len(rec))
            segments[r, start : start + len(rec)] = s
            start += len(rec)
        positions[r, start:] = np.arange(T - start)  # padding: its own positions, segment 0
        ids[r, start:] = rng.integers(0, vocab, T - start)
    return records, ids, positions, segments


@pytest.fixture(scope="module")
def tiny() -> Qwen3ForCausalLM:
    return Qwen3ForCausalLM(
        get_config("tiny"),
        rngs=nnx.Rngs(0),
        runtime=ModelRuntime(attention="reference", attention_block=None),
    )


def _twin(model: Qwen3ForCausalLM, **kwargs) -> Qwen3ForCausalLM:
    other = Qwen3ForCausalLM(model.config, rngs=nnx.Rngs(1), runtime=ModelRuntime(**kwargs))
    nnx.update(other, nnx.state(model, nnx.Param))
    return other


FORWARD = nnx.jit(lambda m, ids, pos, seg: m(ids, pos, seg))


@pytest.mark.parametrize(
    "options",
    [
        {"attention": "reference", "attention_block": None},
        {"attention": "reference", "attention_block": 8},  # four query blocks, each building its mask
        {"attention": "xla"},
    ],
    ids=["reference", "reference-blocked", "xla"],
)
def test_packed_row_gives_each_record_its_own_logits(tiny, options):
    model = _twin(tiny, **options)
    records, ids, positions, segments = _packed(model.config.vocab_size)
    packed = np.asarray(FORWARD(model, jnp.asarray(ids), jnp.asarray(positions), jnp.asarray(segments)))
    assert np.isfinite(packed).all()  # padding (segment 0) attends within itself: finite
    for r, row in enumerate(records):
        start = 0
        for rec in row:
            alone = np.asarray(FORWARD(tiny, jnp.asarray(rec[None]), None, None))[0]
            np.testing.assert_allclose(packed[r, start : start + len(rec)], alone, atol=1e-6, rtol=0)
            start += len(rec)
    # the segments do matter: the same row unsegmented differs after its first record
    plain = np.asarray(FORWARD(model, jnp.asarray(ids), jnp.asarray(positions), None))
    assert np.abs(plain[0, 7:19] - packed[0, 7:19]).max() > 1e-3


def test_one_segment_is_bit_identical_to_none(tiny):
    """segment_ids of a single record build the very mask of segment_ids=None (blocked and not)."""
    _, ids, _, _ = _packed(tiny.config.vocab_size, seed=1)
    ones = jnp.ones(ids.shape, jnp.int32)
    for model in (tiny, _twin(tiny, attention="reference", attention_block=8)):
        np.testing.assert_array_equal(
            np.asarray(FORWARD(model, jnp.asarray(ids), None, ones)),
            np.asarray(FORWARD(model, jnp.asarray(ids), None, None)),
        )


@pytest.mark.slow  # six differentiated forwards in one compile
def test_packed_gradients_are_the_sum_of_each_records(tiny):
    """Token-sum NLL over a packed row's records: the parameter gradients of the records run alone,
    summed (the reference path, blocked)."""
    model = _twin(tiny, attention="reference", attention_block=8)
    records, ids, positions, segments = _packed(model.config.vocab_size, seed=2)
    targets = np.roll(ids, -1, axis=1)
    weights = (segments == np.roll(segments, -1, axis=1)) & (segments > 0)  # next token in the same record
    weights[:, -1] = False

    def packed_loss(m):
        logp = jax.nn.log_softmax(m(jnp.asarray(ids), jnp.asarray(positions), jnp.asarray(segments)))
        return -(jnp.take_along_axis(logp, jnp.asarray(targets)[..., None], -1)[..., 0] * weights).sum()

    def alone_loss(m):
        total = 0.0
        for rec in (rec for row in records for rec in row):
            logp = jax.nn.log_softmax(m(jnp.asarray(rec[None, :-1])))
            total += -jnp.take_along_axis(logp, jnp.asarray(rec[None, 1:, None]), -1).sum()
        return total

    l0, g0 = nnx.jit(nnx.value_and_grad(packed_loss))(model)
    l1, g1 = nnx.jit(nnx.value_and_grad(alone_loss))(model)
    np.testing.assert_allclose(l0, l1, rtol=1e-6)
    # fp32 sums of five programs against one: within 1e-5 (measured 2.3e-6 at most)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5, rtol=1e-6), g0, g1)


def test_segment_ids_of_another_shape_are_rejected(tiny):
    with pytest.raises(ValueError, match="segment_ids must be"):
        tiny(jnp.zeros((2, 8), jnp.int32), None, jnp.zeros((2, 7), jnp.int32))
