"""Packing records into token-budget rows (b2tjax/step/packing.py) and the segment-aware loss
counts (b2tjax/grpo/loss.py): determinism, budgets, balance, shapes; per-segment sequence counts
equal the per-row counts of the same records laid out one per row."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

from b2tjax.grpo import loss as grpo
from b2tjax.step.packing import (
    balanced_slots,
    first_fit_decreasing,
    pack_records,
    packed_shape,
)


def _lengths(seed: int, n: int = 64, top: int = 2000) -> list[int]:
    rng = np.random.default_rng(seed)
    return [int(x) for x in np.clip(rng.lognormal(6.5, 0.6, n), 20, top)]


def test_first_fit_decreasing_places_every_record_once_within_the_budget():
    for seed in range(5):
        lengths = _lengths(seed)
        bins = first_fit_decreasing(lengths, 2048)
        assert sorted(itertools.chain(*bins)) == list(range(len(lengths)))
        assert all(sum(lengths[i] for i in b) <= 2048 for b in bins)
        # FFD's bound: no two bins could be merged (each later bin's records did not fit earlier)
        loads = [sum(lengths[i] for i in b) for b in bins]
        assert sum(loads) > (len(bins) - 1) * 2048 / 2


def test_first_fit_decreasing_by_hand():
    #            0    1   2   3   4  5   6
    lengths = [5, 100, 30, 70, 64, 1, 200]
    # longest first: 200 alone (over the budget), 100, 70, 64 open bins; 30 joins 70; 5 and 1 join 100
    assert first_fit_decreasing(lengths, 128) == [[6], [1, 0, 5], [3, 2], [4]]


def test_packing_is_a_pure_function_of_the_lengths():
    lengths = _lengths(3)
    a, b = pack_records(lengths, 2048, 8, 2), pack_records(list(lengths), 2048, 8, 2)
    for field in ("row", "start", "length"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    # the devices a micro-batch splits over order the rows, never which records share one
    one = pack_records(lengths, 2048, 8, 1)
    groups = lambda p: sorted(tuple(sorted(np.flatnonzero(p.row == r))) for r in set(p.row))  # noqa: E731
    assert groups(one) == groups(a)


def test_rows_are_balanced_over_micro_batches_and_devices():
    lengths = _lengths(4, n=256)
    pack = pack_records(lengths, 4096, 8, 2)
    row_tokens = np.zeros(pack.total_rows, np.int64)
    np.add.at(row_tokens, pack.row, pack.length)
    per_device = row_tokens.reshape(pack.micro, 2, pack.rows // 2).sum(axis=2)
    # LPT: loads differ by at most the longest row
    assert per_device.max() - per_device.min() <= row_tokens.max()
    assert per_device.sum() == sum(lengths)


def test_balanced_slots_fill_each_slot_once():
    slots = balanced_slots([9, 8, 7, 1, 1], micro=2, rows=4, row_devices=2)
    assert len(set(slots)) == 5 and all(0 <= s < 8 for s in slots)
    # groups (micro, device) of 2 rows: 9 -> g0, 8 -> g1, 7 -> g2, 1 -> g3, 1 -> g3
    assert slots == [0, 2, 4, 6, 7]


def test_micro_batches_are_as_few_as_hold_the_rows_and_evenly_filled():
    assert packed_shape(3, 8) == (1, 3) and packed_shape(3, 8, row_devices=2) == (1, 4)
    assert packed_shape(9, 8) == (2, 5) and packed_shape(9, 8, row_devices=2) == (2, 6)
    assert packed_shape(33, 8) == (5, 7) and packed_shape(33, 6, row_devices=4) == (
        6,
        6,
    )  # 6 % 4: no rounding
    for rows in range(1, 200):
        micro, width = packed_shape(rows, 8, 2)
        assert width <= 8 and micro == -(-rows // 8)
        assert 0 <= micro * width - rows < 2 * micro  # under a row per device and micro-batch pads


def test_segments_restart_positions_and_a_long_record_gets_its_own_row():
    pack = pack_records([5, 3, 200, 4], 16, micro_rows=4)
    assert pack.width == 256  # the long record's 64-token bucket
    seg, pos = pack.segments()
    long_row = int(pack.row[2])
    assert set(seg[long_row, :200]) == {1} and not seg[long_row, 200:].any()
    short = [r for r in range(pack.total_rows) if r != long_row and seg[r].any()]
    assert len(short) == 1  # 5 + 3 + 4 <= 16 share one row
    row = short[0]
    assert seg[row, :12].tolist() == [1] * 5 + [2] * 4 + [3] * 3
    assert pos[row, :12].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1, 2]
    placed = pack.place([np.arange(n) + 10 * i for i, n in enumerate([5, 3, 200, 4])], np.int32)
    assert pack.take(placed, 1).tolist() == [10, 11, 12]
    with pytest.raises(ValueError, match="shorter than a record"):
        pack_records([300], 64, 4, width=256)


def _unpacked_and_packed(seed: int = 0):
    """Records of random multi-turn masks, laid out one per row and packed (2 micro-batches)."""
    rng = np.random.default_rng(seed)
    lengths = [int(x) for x in rng.integers(4, 30, 9)]
    masks = [(rng.random(n) < 0.5).astype(np.float32) for n in lengths]
    masks[3][:] = 0  # a record with nothing to train
    for m in masks:
        m[0] = 0
    pack = pack_records(lengths, 48, micro_rows=2)
    rows = np.zeros((len(lengths), 64), np.float32)
    for i, m in enumerate(masks):
        rows[i, : len(m)] = m
    packed = pack.place(masks, np.float32)
    seg, _ = pack.segments()
    return rows, packed.reshape(pack.micro, pack.rows, -1), seg.reshape(pack.micro, pack.rows, -1), pack


@pytest.mark.parametrize("mode", grpo.AGGREGATION_MODES)
def test_segment_counts_and_weights_equal_the_rows_of_one_record_each(mode):
    rows, packed, seg, pack = _unpacked_and_packed()
    want = grpo.batch_normaliser(jnp.asarray(rows), 48)
    got = grpo.batch_normaliser(jnp.asarray(packed), 48, jnp.asarray(seg))
    assert float(want.num_seqs) == float(got.num_seqs) == 8  # record 3 has no trained token
    assert float(want.num_tokens) == float(got.num_tokens)
    w_rows = np.asarray(grpo.token_weights(jnp.asarray(rows), mode, want))
    w_packed = np.asarray(
        grpo.token_weights(jnp.asarray(packed), mode, got, jnp.asarray(seg), packed.shape[-1] + 1)
    )
    flat = w_packed.reshape(pack.total_rows, -1)
    for i in range(rows.shape[0]):
        np.testing.assert_array_equal(pack.take(flat, i), w_rows[i, : pack.length[i]])
