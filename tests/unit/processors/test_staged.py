"""StagedStore: reads see staged writes; nothing reaches the table before ``apply``."""

from __future__ import annotations

from rllm.processors.staged import StagedStore


def test_overlay_reads_writes_deletes_then_apply_or_discard() -> None:
    table = {b"a": b"1", b"b": b"2"}
    store = StagedStore(table)
    store[b"c"] = b"3"
    del store[b"a"]
    assert store.get(b"c") == b"3" and b"a" not in store and store.get(b"a") is None
    assert sorted(store) == [b"b", b"c"] and len(store) == 2 and store.pending == 2
    assert table == {b"a": b"1", b"b": b"2"}  # untouched until apply
    store.apply()
    assert table == {b"b": b"2", b"c": b"3"} and store.pending == 0
    store[b"d"] = b"4"
    store.discard()
    assert b"d" not in store and table == {b"b": b"2", b"c": b"3"}


def test_rollback_to_a_mark_keeps_earlier_writes_of_the_batch() -> None:
    table = {b"a": b"1"}
    store = StagedStore(table)
    store[b"b"] = b"2"
    mark = store.mark()
    store[b"b"] = b"3"
    store[b"c"] = b"4"
    del store[b"a"]
    store.rollback(mark)
    assert store.get(b"b") == b"2" and b"c" not in store and store.get(b"a") == b"1"
    store.apply()
    assert table == {b"a": b"1", b"b": b"2"}
