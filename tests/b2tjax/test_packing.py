"""Packing records into token-budget rows and micro-batches of their own widths
(b2tjax/step/packing.py) and the segment-aware loss counts (b2tjax/step/loss.py): determinism,
budgets, widths and row counts; per-segment sequence counts and weights under the whole batch's
counts equal those of the same records laid out one per row."""

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

from b2tjax.step import loss as grpo
from b2tjax.step.batch import pad_length
from b2tjax.step.packing import (
    RowPolicy,
    first_fit_decreasing,
    micro_batch_plan,
    micro_sizes,
    pack_micro_batches,
    tokens_computed,
    width_buckets,
    width_of,
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


def test_width_buckets_and_micro_batch_sizes():
    assert width_buckets(1000, 4) == (256, 512, 768, 1024)  # a 64-token granule, capacity's bucket
    assert width_buckets(58156, 16)[-1] == 58176 and len(width_buckets(58156, 16)) == 16
    assert width_buckets(200, 16) == (64, 128, 192, 256)  # granules of 64 at least: fewer widths
    assert width_buckets(512, 1) == (512,)
    assert width_of(300, (256, 512)) == 512 and width_of(256, (256, 512)) == 256
    assert width_of(700, (256, 512)) == 704  # a record over what the recipe allows: its own bucket
    assert micro_sizes(8) == (1, 8) and micro_sizes(8, 2) == (2, 8) and micro_sizes(4, 4) == (4,)
    assert micro_sizes(6, 4) == (1, 6)  # 6 rows do not split over 4 devices: replicated
    # a run's shapes, decided once: the widest row holds the budget and the longest record
    assert RowPolicy(1, 2, row_widths=2, longest=128).shapes == {(1, 64), (1, 128), (2, 64), (2, 128)}
    assert RowPolicy(2048, 4, 4, row_widths=4, longest=1000).shapes == {
        (4, w) for w in (512, 1024, 1536, 2048)
    }
    # records longer than the budget: as many coarser widths up to the longest
    assert RowPolicy(256, 1, row_widths=2, longest=1000).widths == (128, 256, 512, 1024)


def test_micro_batch_plan_by_hand():
    widths, sizes = (64, 128, 192, 256), (1, 2, 4)
    # rows longest first: 250 and 240 share a 256 micro-batch; 100, 90, 70, 65 one of 128 (4 rows);
    # 30 one of 64 (1 row): fewer tokens than any other cut
    plan = micro_batch_plan([250, 240, 100, 90, 70, 65, 30], widths, sizes)
    assert plan == [(0, 2, 2, 256), (2, 6, 4, 128), (6, 7, 1, 64)]
    # 3 rows of one width: 2 + 1, never 4 with a padding row (more tokens)
    assert micro_batch_plan([60, 60, 60], widths, sizes) == [(0, 2, 2, 64), (2, 3, 1, 64)]
    # equal tokens: the fewest micro-batches
    assert micro_batch_plan([60, 60, 60, 60], widths, sizes) == [(0, 4, 4, 64)]


def _check_layout(lengths, micro_batches, capacity, sizes, widths):
    placed = np.concatenate([mb.members for mb in micro_batches])
    assert sorted(placed.tolist()) == list(range(len(lengths)))
    for mb in micro_batches:
        p = mb.pack
        assert p.rows in sizes and (p.width in widths or p.width == pad_length(max(p.length)))
        assert p.width >= max(p.length) and (p.length > capacity).sum() <= 1
        ends = np.zeros(p.rows, np.int64)
        np.maximum.at(ends, p.row, p.start + p.length)
        assert ends.max() <= p.width and (ends <= capacity).all() | (len(p.length) == 1)
        np.testing.assert_array_equal(np.asarray(lengths)[mb.members], p.length)


def test_pack_micro_batches_places_every_record_in_rows_of_their_own_width():
    for seed, devices in itertools.product(range(4), (1, 2)):
        lengths = np.random.default_rng(seed).integers(600, 2048, 96).tolist()  # most pair with none
        micro_batches = RowPolicy(2048, 8, devices, row_widths=8).pack(lengths)
        _check_layout(lengths, micro_batches, 2048, micro_sizes(8, devices), width_buckets(2048, 8))
        assert len({mb.pack.width for mb in micro_batches}) >= 3
        assert sum(lengths) / tokens_computed(micro_batches) > 0.9


def test_packing_is_a_pure_function_of_the_lengths():
    lengths = _lengths(3)
    a, b = RowPolicy(2048, 8, 2).pack(lengths), RowPolicy(2048, 8, 2).pack(list(lengths))
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.members, y.members)
        for field in ("row", "start", "length", "rows", "width"):
            np.testing.assert_array_equal(getattr(x.pack, field), getattr(y.pack, field))
    # the devices a micro-batch splits over set its row count, never which records share a row
    rows = lambda mbs: sorted(  # noqa: E731
        tuple(sorted(mb.members[mb.pack.row == r].tolist())) for mb in mbs for r in set(mb.pack.row)
    )
    assert rows(RowPolicy(2048, 8, 1).pack(lengths)) == rows(a)


def test_segments_restart_positions_and_a_long_record_gets_its_own_row():
    lengths = [5, 3, 200, 4]
    micro_batches = pack_micro_batches(lengths, 16, (1, 4), (64,))  # a recipe of 64-token records
    assert [(mb.pack.rows, mb.pack.width) for mb in micro_batches] == [(1, 256), (1, 64)]
    long, short = micro_batches
    seg, pos = long.pack.segments()
    assert long.members.tolist() == [2] and set(seg[0, :200]) == {1} and not seg[0, 200:].any()
    seg, pos = short.pack.segments()  # 5 + 3 + 4 <= 16 share one row
    assert short.members.tolist() == [0, 3, 1]
    assert seg[0, :12].tolist() == [1] * 5 + [2] * 4 + [3] * 3
    assert pos[0, :12].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 3, 0, 1, 2]
    values = [np.arange(lengths[i]) + 10 * i for i in short.members]
    placed = short.pack.place(values, np.int32)
    assert short.pack.take(placed, 2).tolist() == [10, 11, 12]


def _unpacked_and_packed(seed: int = 0):
    """Records of random multi-turn masks, laid out one per row and packed into micro-batches of
    several widths (rows of 128, widths 64 and 128, 2 rows per micro-batch)."""
    rng = np.random.default_rng(seed)
    lengths = [int(x) for x in rng.integers(4, 100, 9)]
    masks = [(rng.random(n) < 0.5).astype(np.float32) for n in lengths]
    masks[3][:] = 0  # a record with nothing to train
    for m in masks:
        m[0] = 0
    micro_batches = RowPolicy(128, 2, row_widths=2).pack(lengths)
    assert {mb.pack.width for mb in micro_batches} == {64, 128}
    rows = np.zeros((len(lengths), 128), np.float32)
    for i, m in enumerate(masks):
        rows[i, : len(m)] = m
    return rows, masks, micro_batches


@pytest.mark.parametrize("mode", grpo.AGGREGATION_MODES)
def test_segment_counts_and_weights_equal_the_rows_of_one_record_each(mode):
    """Each micro-batch's weights under the whole batch's counts (`record_normaliser`, as the
    packed steps divide) equal those of the same records one per row."""
    rows, masks, micro_batches = _unpacked_and_packed()
    want = grpo.batch_normaliser(jnp.asarray(rows), 48)
    got = grpo.record_normaliser(masks, 48)
    assert float(want.num_seqs) == float(got.num_seqs) == 8  # record 3 has no trained token
    assert float(want.num_tokens) == float(got.num_tokens) and float(got.fixed_length) == 48
    w_rows = np.asarray(grpo.token_weights(jnp.asarray(rows), mode, want))
    for mb in micro_batches:
        packed = mb.pack.place([masks[i] for i in mb.members], np.float32)
        seg, _ = mb.pack.segments()
        args = (jnp.asarray(packed), mode, got, jnp.asarray(seg), packed.shape[-1] + 1)
        w_packed = np.asarray(grpo.token_weights(*args))
        for k, i in enumerate(mb.members):
            np.testing.assert_array_equal(mb.pack.take(w_packed, k), w_rows[i, : len(masks[i])])
