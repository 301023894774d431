"""A group of answers written straight into diskcache's table reads back as ``set()``'s.

:meth:`Cache.set_many` writes a group with a few statements (``framekit.engine.cache_rows``)
instead of diskcache's ``set()`` per value. What a user (or diskcache itself) can check
must not tell the two apart: the values diskcache's own ``get()`` returns, framekit's
lookup, the entry count and size diskcache keeps, its own consistency check, the value
files of large values, and the eviction of expired entries.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import diskcache

from framekit.engine.cache import Cache
from framekit.engine.cache_rows import writes_plainly
from framekit.engine.cache_values import loaded, stored

BIG = {"answer": {"label": "relevant", "explanation": "long " * 20_000}}  # > 32 kB: a file


def _items(n: int) -> list[tuple[str, object]]:
    answers = [
        (f"chat:{i:04d}", {"answer": {"label": "relevant", "explanation": f"row {i}"}, "tokens": i})
        for i in range(n)
    ]
    return [*answers, ("chat:big", BIG), ("emb:raw", b"\x00\x01" * 8), ("text", "plain text")]


def _checked(path: Path) -> diskcache.Cache:
    """diskcache's own view of the directory, after its own consistency check."""
    store = diskcache.Cache(str(path))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert store.check() == []
    assert caught == []
    return store


def _value_files(path: Path) -> list[Path]:
    return [p for p in path.rglob("*.val")]


def test_a_group_reads_back_alike_through_diskcache_and_framekit(tmp_path: Path) -> None:
    items = _items(1500)  # more keys than one look-up query takes
    ours, theirs = Cache(tmp_path / "ours"), Cache(tmp_path / "theirs")
    ours.set_many(items)
    for key, value in items:  # what diskcache's set() leaves, value by value
        theirs.set(key, value)
    ours.close(), theirs.close()
    mine, reference = _checked(tmp_path / "ours"), _checked(tmp_path / "theirs")
    for key, value in items:  # the same stored form (JSON text, raw bytes), read back alike
        assert mine.get(key) == reference.get(key) == stored(value)
        assert loaded(mine.get(key)) == value
    assert len(mine) == len(reference) == len(items)
    assert mine.volume() - mine.reset("size") == reference.volume() - reference.reset("size")
    assert mine.reset("size") == reference.reset("size") > 0  # the big answer's file
    assert len(_value_files(tmp_path / "ours")) == 1
    found = Cache(tmp_path / "ours").get_many([key for key, _ in items])
    assert found == dict(items)


def test_a_key_written_again_is_replaced_and_its_old_file_removed(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    cache.set_many(_items(10))
    assert len(_value_files(tmp_path)) == 1
    # In one group: the big answer replaced by a small one, a key given twice (the last
    # value stands, as two set() calls would leave it), and a new key.
    cache.set_many(
        [
            ("chat:big", {"answer": {"label": "irrelevant"}}),
            ("chat:0001", {"answer": {"label": "irrelevant"}}),
            ("chat:0001", {"answer": {"label": "relevant", "explanation": "second"}}),
            ("chat:new", {"answer": {"label": "relevant"}}),
        ]
    )
    assert cache.saved == 10 + 3 + 4
    cache.close()
    store = _checked(tmp_path)
    assert loaded(store.get("chat:big")) == {"answer": {"label": "irrelevant"}}
    assert loaded(store.get("chat:0001")) == {
        "answer": {"label": "relevant", "explanation": "second"}
    }
    assert len(store) == 10 + 3 + 1 and store.reset("size") == 0
    assert _value_files(tmp_path) == []


def test_expired_entries_are_evicted_as_set_evicts_them(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    other = diskcache.Cache(str(tmp_path))  # someone else's entries, with an expiry
    for i in range(5):
        other.set(f"old:{i}", BIG if i == 0 else i, expire=0.05)
    other.close()
    time.sleep(0.1)
    cache.set_many([("chat:a", {"answer": {"label": "relevant"}})])
    cache.close()
    store = _checked(tmp_path)
    assert len(store) == 1 and store.get("chat:a") is not None
    assert _value_files(tmp_path) == []  # the expired big value's file went with it


def test_stores_that_set_evicts_by_size_in_are_written_by_set(tmp_path: Path) -> None:
    # framekit opens its caches without eviction; a store that evicts by size is written
    # value by value through diskcache's own set(), which does that eviction.
    lru = diskcache.Cache(str(tmp_path / "lru"), eviction_policy="least-recently-used")
    assert not writes_plainly(lru)
    plain = Cache(tmp_path / "plain")
    assert plain._store is not None and writes_plainly(plain._store)


def test_a_key_that_is_not_text_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    import pytest

    from framekit.engine.cache_rows import RowWriter

    store = diskcache.Cache(str(tmp_path))
    writer = RowWriter(tmp_path, store.disk, store.cull_limit)
    with pytest.raises(TypeError, match="cache keys are text or numbers, got tuple"):
        writer.write([("chat:a", BIG), (("a", 1), "x")])  # type: ignore[list-item]
    writer.close()
    assert len(store) == 0 and _value_files(tmp_path) == []  # the big value's file removed
    store.close()


def test_the_writer_maps_no_file_and_keeps_a_small_page_cache(tmp_path: Path) -> None:
    # diskcache maps 64 MB of the file and caches 32 MB of pages on each connection; the
    # writer's connection does neither (what it writes is the same: the tests above).
    from framekit.engine.cache_rows import WRITER_MEMORY, RowWriter

    store = diskcache.Cache(str(tmp_path))
    assert store.sqlite_mmap_size > 0 and store.sqlite_cache_size > 2000
    writer = RowWriter(tmp_path, store.disk, store.cull_limit)
    writer.write([("chat:a", {"answer": {"label": "relevant"}})])
    con = writer._connection()
    assert con.execute("PRAGMA mmap_size").fetchone()[0] == WRITER_MEMORY["mmap_size"] == 0
    assert con.execute("PRAGMA cache_size").fetchone()[0] == WRITER_MEMORY["cache_size"]
    assert con.execute("PRAGMA synchronous").fetchone()[0] == store.sqlite_synchronous
    writer.close()
    assert store.get("chat:a") == {"answer": {"label": "relevant"}}
    store.close()
