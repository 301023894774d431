"""The cache's chunked lookup (one SQL query per chunk of keys) gives what ``get()`` gives.

A fully cached re-run asks for every key of the run at once; ``Cache.get_many`` reads
diskcache's table in chunks instead of calling ``diskcache.Cache.get`` once per key. These
tests write entries through diskcache itself, in every storage mode it has, and compare
the chunked answer with diskcache's own key by key.
"""

from __future__ import annotations

import pickle
import sqlite3
from pathlib import Path

import diskcache
import pytest

from framekit.engine import cache_table
from framekit.engine.cache import Cache

ENTRY = {"answer": {"label": "relevant", "explanation": "names it"}, "tokens": 3}


def _fill(path: Path) -> dict[str, object]:
    """Entries of every kind diskcache stores: a pickle in the row, a pickle in a file
    beside the database, raw text, raw bytes, a number; and one that has expired."""
    store = diskcache.Cache(str(path), size_limit=2**40, eviction_policy="none")
    values: dict[str, object] = {
        "chat:small": ENTRY,
        "chat:large": {"answer": {"label": "x" * 70_000}, "tokens": 1},  # a value file
        "emb:bytes": b"\x00\x01" * 8,
        "text": "a foreign entry: a plain string",
        "long text": "y" * 70_000,  # a text file
        "number": 7,
    }
    for key, value in values.items():
        store.set(key, value)
    store.set("chat:expired", ENTRY, expire=0.001)
    store.close()
    return values


@pytest.fixture(params=["chunks", "whole table"])
def reading(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test runs with both ways of reading many keys: several chunks (a partial
    one among them), and the whole table read in several batches."""
    monkeypatch.setattr(cache_table, "LOOKUP_CHUNK", 2)
    monkeypatch.setattr(cache_table, "SCAN_ROWS", 3)
    share = 0.0 if request.param == "whole table" else float("inf")
    monkeypatch.setattr(cache_table, "SCAN_SHARE", share)
    return str(request.param)


def test_lookup_returns_exactly_what_get_returns(tmp_path: Path, reading: str) -> None:
    values = _fill(tmp_path / "c")
    keys = [*values, "chat:expired", "chat:absent"]
    store = diskcache.Cache(str(tmp_path / "c"))
    expected = {k: store.get(k) for k in keys if store.get(k) is not None}
    store.close()
    assert expected == values  # the expired entry and the absent key are misses for get()
    assert Cache(tmp_path / "c").get_many(keys) == expected


def test_a_corrupt_entry_is_a_miss_for_both_lookups_and_the_others_still_hit(
    tmp_path: Path, reading: str
) -> None:
    _fill(tmp_path / "c")
    with sqlite3.connect(tmp_path / "c" / "cache.db") as con:  # a truncated pickle
        con.execute(
            "UPDATE Cache SET value = ? WHERE key = 'chat:small'",
            (pickle.dumps(ENTRY)[:9],),
        )
    cache = Cache(tmp_path / "c")
    assert cache.get("chat:small") is None
    hits = cache.get_many(["chat:small", "number", "chat:large"])
    assert set(hits) == {"number", "chat:large"}
    assert cache.enabled  # one bad entry does not turn the cache off


def test_a_value_file_deleted_under_the_cache_is_a_miss(tmp_path: Path, reading: str) -> None:
    _fill(tmp_path / "c")
    for value_file in (tmp_path / "c").rglob("*.val"):
        value_file.unlink()
    hits = Cache(tmp_path / "c").get_many(["chat:large", "long text", "chat:small"])
    assert set(hits) == {"chat:small"}


def test_a_cache_that_counts_hits_is_read_key_by_key_so_its_counters_move(
    tmp_path: Path,
) -> None:
    values = _fill(tmp_path / "c")
    counting = diskcache.Cache(str(tmp_path / "c"), statistics=True)
    counting.close()  # the setting is kept in the database, as a user's tool would leave it
    cache = Cache(tmp_path / "c")
    assert cache.get_many(list(values)) == values
    key = next(iter(values))
    assert cache.get(key) == values[key]  # one key read the same way
    reopened = diskcache.Cache(str(tmp_path / "c"))
    hits, _misses = reopened.stats()
    assert hits == len(values) + 1  # every hit counted, as get() counts it
    reopened.close()


def test_answers_written_during_the_run_are_found_by_the_next_lookup(
    tmp_path: Path, reading: str
) -> None:
    cache = Cache(tmp_path / "c")
    assert cache.get_many(["chat:a"]) == {}
    cache.set("chat:a", ENTRY)
    cache.set_many([("chat:b", ENTRY)])
    assert cache.get_many(["chat:a", "chat:b"]) == {"chat:a": ENTRY, "chat:b": ENTRY}


def test_a_foreign_value_under_a_runs_key_is_asked_again_and_overwritten(
    judge_simulator, tmp_path: Path
) -> None:
    import diskcache as dc

    import framekit as fk
    from framekit.evaluators import RetrievalRelevance
    from tests.helpers import MAPPING, retrieval_frame, sim_judge

    df = retrieval_frame(6)
    judge = sim_judge(judge_simulator)
    fk.evaluate_dataframe(df, [RetrievalRelevance()], MAPPING, judge=judge, cache=tmp_path)
    store = dc.Cache(str(tmp_path))
    keys = [k for k in store.iterkeys() if str(k).startswith("chat:")]
    assert len(keys) == 6
    store.set(keys[0], "written by another tool")  # a string: not an answer entry
    store.set(keys[1], {"answer": None})  # a dict, but no answer in it
    store.close()
    sent = judge_simulator.stats()["chat"]
    out = fk.evaluate_dataframe(
        df, [RetrievalRelevance()], MAPPING, judge=judge, cache=tmp_path, progress=False
    )
    assert judge_simulator.stats()["chat"] == sent + 2  # the two foreign entries only
    assert out["retrieval_relevance_score"].null_count() == 0
    run = fk.last_run()
    assert run is not None and run.cache_hits == 4
    again = Cache(tmp_path).get_many([keys[0], keys[1]])
    assert all(isinstance(v, dict) and v["answer"] for v in again.values()) and len(again) == 2


def test_the_caller_may_use_the_cache_between_the_batches_of_a_whole_table_read(
    tmp_path: Path, reading: str
) -> None:
    values = _fill(tmp_path / "c")
    cache = Cache(tmp_path / "c")
    found: dict[str, object] = {}
    written = []
    for batch in cache.lookup(list(values)):
        found.update(batch)
        assert cache.get("chat:small") == ENTRY  # a read meanwhile does not wait on the lookup
        written.append(f"chat:new{len(written)}")
        cache.set(written[-1], ENTRY)  # nor does a write
    assert found == values
    assert len(written) > 1  # (the lookup came in several batches)
    assert cache.get_many(written) == dict.fromkeys(written, ENTRY)
