"""The KV page pool through the engine, held against a roomy pool: a GRPO group of 8's records
(token ids, loss masks, answers; log-probs within 1e-6) do not change with the rows it runs on,
the page size, or a pool so small that streams wait for pages and are preempted; the memory of 3
whole rows decodes more than 3 rows; a group holds its prompt's pages once. The roomy pool's own
log-probs are the teacher-forced ones (tests/rollout/test_rollout_engine.py). The host's page table
and allocator are tested on their own first."""

from __future__ import annotations

import pytest

from rollout.pages import PageTable, pages_for
from tests.rollout.test_rollout_prefix import GROUP, _assert_same_records, _group, _run
from tests.rollout_fixtures import TOTAL, rollout_setup  # noqa: F401

pytestmark = pytest.mark.slow  # rolls a group out through the engine under several pools

PAGE = 16  # rollout.page_size's default


def test_page_table_shares_full_pages_and_copies_the_partial_one():
    table = PageTable(rows=4, shards=2, pages_per_shard=6, pages_per_row=6, page_size=4)
    assert table.grow(0, 10) and table.held[0] == [0, 1, 2]  # 10 slots: 3 pages, lowest first
    moves = table.share(0, 1, 9)  # rows 0 and 1 on shard 0: 2 full pages by reference
    assert table.held[1][:2] == [0, 1] and moves == [(0, 2, 0, table.held[1][2])]
    assert table.shared() == 2 and table.in_use() == 4
    cross = table.share(0, 2, 9)  # row 2 is on shard 1: every page copied
    assert [m[2] for m in cross] == [1, 1, 1] and table.refs[1].sum() == 3
    assert not table.grow(1, 24)  # 6 pages: 3 more, but shard 0 has 2 free
    table.drop(0)
    assert table.in_use() == 6 and table.shared() == 0  # rows 1 (3 pages, 2 once shared) and 2 (3)
    assert table.grow(1, 24) and len(table.held[1]) == 6
    assert table.reclaimable([1]) == 6 and table.reclaimable([]) == 0
    assert table.table[3].tolist() == [6] * 6  # free entries point past the shard's pages


def test_page_table_refuses_what_does_not_fit_and_changes_nothing():
    table = PageTable(rows=2, shards=1, pages_per_shard=3, pages_per_row=3, page_size=4)
    assert table.grow(0, 12)
    before = (table.table.copy(), table.refs.copy())
    assert not table.grow(1, 1) and table.share(0, 1, 5) is None
    assert (table.table == before[0]).all() and (table.refs == before[1]).all()


@pytest.fixture(scope="module")
def roomy_group(rollout_setup):
    """roomy_group(rows) -> (records, stats) of the group of 8 at T = 1 on `rows` rows whose pool
    holds every row whole (kv_pages 0): the reference of every other pool, rolled once per row count."""
    runs: dict[int, tuple] = {}

    def get(rows: int):
        if rows not in runs:
            runs[rows] = _run(rollout_setup, _group(rollout_setup), temperature=1.0, batch_rows=rows)
        return runs[rows]

    return get


def test_a_group_of_8_on_3_rows_gives_the_records_of_8_rows(rollout_setup, roomy_group):
    reference, wide = roomy_group(GROUP)
    records, narrow = roomy_group(3)
    _assert_same_records(reference, records)
    assert wide.peak_shared_pages >= (reference[0].prompt_len - 1) // PAGE  # the prompt's full pages
    assert narrow.peak_rows_decoding == 3


def test_the_memory_of_3_whole_rows_decodes_more_rows(rollout_setup, roomy_group):
    """The pool of 3 rows' whole streams on 8 rows: more than 3 rows decode at once (each holds the
    pages it fills, the group's prompt pages once), with the records of 3 rows."""
    reference, three = roomy_group(3)
    pool = 3 * pages_for(TOTAL, PAGE)
    records, paged = _run(
        rollout_setup, _group(rollout_setup), batch_rows=GROUP, kv_pages=pool, temperature=1.0
    )
    _assert_same_records(reference, records)
    assert paged.peak_rows_decoding > 3
    assert paged.decode_steps < three.decode_steps


def test_copies_of_whole_pages_only_move_no_page(rollout_setup, roomy_group):
    """Pages of one slot: every prefix copy shares whole pages and moves none (an empty move list
    reaches the device call), with the records of pages of 16."""
    reference, _ = roomy_group(3)
    records, paged = _run(rollout_setup, _group(rollout_setup), page_size=1, temperature=1.0, batch_rows=3)
    _assert_same_records(reference, records)
    assert paged.reused_tokens > 0


def test_a_group_of_8_holds_its_prompts_pages_once(rollout_setup, monkeypatch):
    """At the group's first decode segment (8 rows, every prompt in the cache), every row's table
    starts with the same pages, each referenced 8 times, and the pool holds those once plus each
    row's own pages: the partly filled last prompt page (copied) and the segment's room."""
    from rollout.device import DeviceCalls

    seen = []
    decode = DeviceCalls.decode

    def spy(self, batch, key, total_rows=None):
        lengths = [(len(s.record.ids), room) for _, s, room in batch]
        segment = decode(self, batch, key, total_rows)  # its room reserved first
        if not seen:
            table = self.kv.table
            seen.append(([list(h) for h in table.held], table.refs.copy(), table.in_use(), lengths))
        return segment

    monkeypatch.setattr(DeviceCalls, "decode", spy)
    _run(rollout_setup, _group(rollout_setup), temperature=1.0, batch_rows=GROUP, page_size=PAGE)
    held, refs, in_use, lengths = seen[0]
    assert len(set(lengths)) == 1 and len(lengths) == GROUP  # the same context (prompt, forced turn 0)
    context, room = lengths[0]
    full = (context - 1) // PAGE  # a copy leaves the record's last token to prefill
    assert full >= 5
    shared = held[0][:full]
    assert all(h[:full] == shared for h in held) and all(refs[0, p] == GROUP for p in shared)
    own = pages_for(context + room, PAGE) - full  # the partly filled last page (copied) and the room
    assert in_use == full + GROUP * own < GROUP * pages_for(context, PAGE)


def test_a_pool_too_small_for_every_row_waits_and_preempts_with_the_same_records(rollout_setup, roomy_group):
    """8 rows over 16 pages of 64 slots (one row's whole stream): the group cannot all grow at
    once, so streams wait in the queue or give their rows up, and the records stay."""
    reference, _ = roomy_group(GROUP)
    records, stats = _run(
        rollout_setup, _group(rollout_setup), page_size=64, kv_pages=16, temperature=1.0, batch_rows=GROUP
    )
    _assert_same_records(reference, records)
    assert stats.peak_pages <= 16 and stats.parks > 0 and stats.reprefill_tokens > 0
