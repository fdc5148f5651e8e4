"""The paged KV cache (`rollout.kv_cache: paged`) through the engine: its records equal the
contiguous cache's (token ids, loss masks, answers; log-probs within 1e-6) for a GRPO group of 8
on 3 and on 8 rows, synchronous and asynchronous host work, team episodes that park, static
batching, and a pool so small that streams wait for pages and are preempted; a group of 8 holds its
prompt's pages once. The host's page table and allocator are tested on their own first."""

from __future__ import annotations

import numpy as np
import pytest

from rollout.pages import PageTable, pages_for
from tests.rollout.test_rollout_async import SCHEDULES, SleepyTeam, _agent_episodes
from tests.rollout.test_rollout_prefix import GROUP, _assert_same_records, _group, _run
from tests.rollout.test_rollout_streams import _team_episodes
from tests.rollout_fixtures import rollout_setup  # noqa: F401

pytestmark = pytest.mark.slow  # rolls groups out through the engine twice, paged and contiguous

PAGED = dict(kv_cache="paged", page_size=16)


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
def contiguous_group(rollout_setup):
    """contiguous_group(rows) -> (records, stats) of the group of 8 at T = 1 on `rows` rows of the
    contiguous cache: the reference of every paged run of the group, rolled once per row count."""
    runs: dict[int, tuple] = {}

    def get(rows: int):
        if rows not in runs:
            runs[rows] = _run(rollout_setup, _group(rollout_setup), temperature=1.0, batch_rows=rows)
        return runs[rows]

    return get


@pytest.mark.parametrize("rows", [3, GROUP])
def test_a_group_of_8_gives_the_contiguous_records(rollout_setup, contiguous_group, rows):
    reference, contiguous = contiguous_group(rows)
    records, paged = _run(rollout_setup, _group(rollout_setup), **PAGED, temperature=1.0, batch_rows=rows)
    _assert_same_records(reference, records)
    assert (
        paged.reused_tokens == contiguous.reused_tokens and paged.prefill_tokens == contiguous.prefill_tokens
    )
    assert paged.peak_shared_pages >= (reference[0].prompt_len - 1) // 16  # the prompt's full pages
    assert paged.kv_bytes_per_live_token < contiguous.kv_bytes_per_live_token


def test_the_memory_of_3_contiguous_rows_decodes_more_rows_paged(rollout_setup, contiguous_group):
    """The pool of 3 contiguous rows' bytes on 8 rows: more than 3 rows decode at once (each holds
    the pages it fills, the group's prompt pages once), with the records of 3 contiguous rows."""
    from tests.rollout_fixtures import TOTAL

    reference, contiguous = contiguous_group(3)
    pool = 3 * pages_for(TOTAL, PAGED["page_size"])
    records, paged = _run(
        rollout_setup, _group(rollout_setup), batch_rows=GROUP, kv_pages=pool, **PAGED, temperature=1.0
    )
    _assert_same_records(reference, records)
    assert contiguous.peak_rows_decoding == 3 and paged.peak_rows_decoding > 3
    assert paged.decode_steps < contiguous.decode_steps


def test_copies_of_whole_pages_only_move_no_page(rollout_setup, contiguous_group):
    """Pages of one slot: every prefix copy shares whole pages and moves none (an empty move list
    reaches the device call), with the contiguous cache's records."""
    reference, _ = contiguous_group(3)
    records, paged = _run(
        rollout_setup, _group(rollout_setup), kv_cache="paged", page_size=1, temperature=1.0, batch_rows=3
    )
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
    _run(rollout_setup, _group(rollout_setup), temperature=1.0, batch_rows=GROUP, **PAGED)
    held, refs, in_use, lengths = seen[0]
    assert len(set(lengths)) == 1 and len(lengths) == GROUP  # the same context (prompt, forced turn 0)
    context, room = lengths[0]
    full = (context - 1) // 16  # a copy leaves the record's last token to prefill
    assert full >= 5
    shared = held[0][:full]
    assert all(h[:full] == shared for h in held) and all(refs[0, p] == GROUP for p in shared)
    own = pages_for(context + room, 16) - full  # the partly filled last page (copied) and the room
    assert in_use == full + GROUP * own < GROUP * pages_for(context, 16)


def test_a_pool_too_small_for_every_row_waits_and_preempts_with_the_same_records(
    rollout_setup, contiguous_group
):
    """8 rows over 16 pages of 64 slots (one row's worth of the contiguous cache): the group cannot
    all grow at once, so streams wait in the queue or give their rows up, and the records stay."""
    reference, _ = contiguous_group(GROUP)
    records, stats = _run(
        rollout_setup,
        _group(rollout_setup),
        kv_cache="paged",
        page_size=64,
        kv_pages=16,
        temperature=1.0,
        batch_rows=GROUP,
    )
    _assert_same_records(reference, records)
    assert stats.peak_pages <= 16 and stats.parks > 0 and stats.reprefill_tokens > 0


def test_every_host_schedule_gives_the_contiguous_records(rollout_setup):
    reference, _ = _run(rollout_setup, _agent_episodes(rollout_setup), temperature=1.0)
    for schedule in SCHEDULES:
        records, _ = _run(rollout_setup, _agent_episodes(rollout_setup), temperature=1.0, **PAGED, **schedule)
        _assert_same_records(reference, records)


def test_parking_team_episodes_give_the_contiguous_records(rollout_setup):
    """14 streams on 3 rows: waiting coordinators are parked (and, paged, copy their own old pages
    back by reference when seated again); host work overlapped, the days end in any order."""
    teams = lambda: [SleepyTeam(rollout_setup.tokenizer, i, n) for i, n in enumerate((2, 3, 2, 3))]  # noqa: E731
    reference, contiguous = _run(rollout_setup, teams(), temperature=1.0)
    for schedule in (dict(), dict(segment_return_share=0.5)):
        records, paged = _run(rollout_setup, teams(), temperature=1.0, **PAGED, **schedule)
        _assert_same_records(reference, records)
        assert paged.parks > 0
    records, _ = _run(rollout_setup, _team_episodes(rollout_setup.tokenizer), temperature=1.0, **PAGED)
    assert all(r.stop_reason == "answer" for r in records)
    assert np.isfinite(contiguous.kv_bytes_per_live_token)
