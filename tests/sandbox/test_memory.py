"""The agent's key-value memory: reads, writes, 'all', bounds and every malformed operation."""

import json

import pytest

from sandbox.memory import Memory


def test_write_then_read_returns_the_value_as_json():
    mem = Memory()
    res = mem.apply({"action": "write", "key": "hotel", "value": {"name": "Jinjiang", "price": 980}})
    assert not res.is_error and "'hotel'" in res.text
    read = mem.apply({"action": "read", "key": "hotel"})
    assert not read.is_error
    assert json.loads(read.text) == {"hotel": {"name": "Jinjiang", "price": 980}}


def test_read_all_is_every_entry_with_sorted_keys():
    mem = Memory()
    assert mem.apply({"action": "read", "key": "all"}).text == "{}"
    mem.apply({"action": "write", "key": "b", "value": [1, 2]})
    mem.apply({"action": "write", "key": "a", "value": "天府"})
    text = mem.apply({"action": "read", "key": "all"}).text
    assert text == '{"a": "天府", "b": [1, 2]}'  # sorted keys, unicode kept, stable separators


def test_overwrite_replaces_value_and_its_size():
    mem = Memory(max_total_chars=30)
    mem.apply({"action": "write", "key": "k", "value": "x" * 20})  # 22 JSON characters
    assert not mem.apply({"action": "write", "key": "k", "value": "y" * 25}).is_error  # 27 <= 30
    assert mem.snapshot() == {"k": "y" * 25}
    assert mem.total_chars() == 27


@pytest.mark.parametrize(
    "op, fragment",
    [
        ({"action": "read", "key": "nope"}, "no memory entry 'nope'"),
        ({"action": "delete", "key": "k"}, '"read" or "write"'),
        ({"key": "k"}, '"read" or "write"'),
        ({"action": "read"}, 'needs a "key"'),
        ({"action": "read", "key": 3}, "must be a string, got int"),
        ({"action": "read", "key": "  "}, "must not be empty"),
        ({"action": "write", "key": "k"}, 'needs a non-null "value"'),
        ({"action": "write", "key": "k", "value": None}, 'needs a non-null "value"'),
        ({"action": "write", "key": "all", "value": 1}, "reserved"),
        ({"action": "write", "key": "k", "value": 1, "ttl": 5}, "unknown field(s) ['ttl']"),
        (["read", "k"], "must be a JSON object"),
    ],
)
def test_malformed_operations_are_error_results(op, fragment):
    mem = Memory()
    res = mem.apply(op)
    assert res.is_error and res.text.startswith("Error: ")
    assert fragment in res.text
    assert mem.snapshot() == {}


def test_missing_key_error_lists_stored_keys():
    mem = Memory()
    mem.apply({"action": "write", "key": "flight", "value": "MU5401"})
    assert 'stored keys: ["flight"]' in mem.apply({"action": "read", "key": "train"}).text


def test_value_and_store_bounds_reject_and_keep_the_store_unchanged():
    mem = Memory(max_key_chars=5, max_value_chars=10, max_total_chars=20, max_keys=3)
    assert "limit is 5" in mem.apply({"action": "write", "key": "toolong", "value": 1}).text
    # "aaaaaaaaaa" renders as 12 JSON characters > 10
    assert "limit per value is 10" in mem.apply({"action": "write", "key": "a", "value": "a" * 10}).text
    assert not mem.apply({"action": "write", "key": "a", "value": "a" * 8}).is_error  # 10 chars
    assert not mem.apply({"action": "write", "key": "b", "value": "b" * 8}).is_error  # total 20
    over = mem.apply({"action": "write", "key": "c", "value": 1})  # total would be 21
    assert over.is_error and "limit is 20" in over.text
    assert mem.snapshot() == {"a": "a" * 8, "b": "b" * 8}
    small = Memory(max_keys=2)
    small.apply({"action": "write", "key": "x", "value": 1})
    small.apply({"action": "write", "key": "y", "value": 1})
    assert "full (2 keys)" in small.apply({"action": "write", "key": "z", "value": 1}).text
    assert not small.apply({"action": "write", "key": "x", "value": 2}).is_error  # overwrite allowed


def test_identical_operation_sequences_give_identical_replies():
    ops = [{"action": "write", "key": k, "value": {"z": 1, "a": [k]}} for k in ("q", "b", "m")]
    ops.append({"action": "read", "key": "all"})
    replies = []
    for _ in range(2):
        mem = Memory()
        replies.append([mem.apply(o).text for o in ops])
    assert replies[0] == replies[1]
    assert json.loads(replies[0][3]) == {
        "b": {"a": ["b"], "z": 1},
        "m": {"a": ["m"], "z": 1},
        "q": {"a": ["q"], "z": 1},
    }
    m1, m2 = Memory(), Memory()
    for o in ops[:3]:
        m1.apply(o)
    for o in reversed(ops[:3]):
        m2.apply(o)
    assert m1.apply(ops[3]).text == m2.apply(ops[3]).text  # 'all' does not depend on write order
