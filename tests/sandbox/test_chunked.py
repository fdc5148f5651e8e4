"""sandbox.chunked: results in task order for any worker count, and a rerun computes only the chunks
whose files are missing (what a killed make_data leaves)."""

from __future__ import annotations

from sandbox.chunked import Workers, map_chunks

SEEN: list[list[int]] = []


def _square(chunk: list[int]) -> list[int]:
    return [x * x for x in chunk]


def _square_and_record(chunk: list[int]) -> list[int]:
    SEEN.append(chunk)
    return _square(chunk)


def _setup() -> None:
    return None


def _squares(pool: Workers, fn, store, logged: list[str]) -> list[int]:
    return list(map_chunks(pool, fn, range(10), store=store, label="sq", size=3, log=logged.append))


def test_results_come_back_in_task_order_from_two_processes(tmp_path):
    with Workers(2, _setup) as pool:
        assert _squares(pool, _square, tmp_path, []) == [x * x for x in range(10)]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"sq-{k:06d}.json" for k in range(4)]


def test_a_rerun_computes_only_the_missing_chunks(tmp_path):
    logged: list[str] = []
    with Workers(1, _setup) as pool:
        _squares(pool, _square, tmp_path, logged)
        (tmp_path / "sq-000002.json").unlink()  # the chunk a killed run had not finished
        SEEN.clear()
        again = _squares(pool, _square_and_record, tmp_path, logged)
    assert again == [x * x for x in range(10)]
    assert SEEN == [[6, 7, 8]]
    assert "[sq] resuming: 3 of 4 chunks already done" in logged
