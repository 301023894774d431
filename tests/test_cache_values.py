"""Answers are kept as JSON text where JSON gives them back exactly, and read back alike.

``framekit.engine.cache_values`` decides the stored form. A user can check it from outside
(sqlite's ``json_extract`` reads an answer's label), every way framekit reads the cache
must give back the value written (one key, chunks of keys, the whole table), a value JSON
would change must come back unchanged, and a cache written before the change (pickles)
must still be read.
"""

from __future__ import annotations

import math
import shutil
import sqlite3
import tempfile
import warnings
from pathlib import Path

import diskcache
import pytest

from framekit.engine import cache_table
from framekit.engine.cache import Cache
from framekit.engine.cache_values import loaded, stored
from tests.helpers import read_only

ANSWER = {
    "answer": {"label": "relevant", "explanation": "It names the year."},
    "tokens": 41,
    "cost_usd": None,
    "probabilities": {"relevant": 0.875, "irrelevant": 0.125},
}

# Values JSON would not give back as they are: each must be kept in diskcache's own form.
ODD = {
    "a tuple": (1, "two"),
    "a NaN cost": {"answer": {"label": "relevant"}, "cost_usd": math.nan},
    "an infinite probability": {"probabilities": {"relevant": math.inf}},
    "keys that are numbers": {1: "one"},
    "a set": {"relevant"},
    "a wide integer": 2**70,
}


@pytest.fixture(params=["one key", "chunks", "whole table", "read-only"])
def read(request, monkeypatch):
    """Reads ``keys`` from a cache directory each way framekit reads it."""

    def by_key(path: Path, keys: list[str]) -> dict[str, object]:
        cache = Cache(path)
        return {key: cache.get(key) for key in keys}

    def by_lookup(path: Path, keys: list[str]) -> dict[str, object]:
        return Cache(path).get_many(keys)

    def read_only_copy(path: Path, keys: list[str]) -> dict[str, object]:
        base = Path(tempfile.mkdtemp())
        base.chmod(0o755)  # reachable for the unprivileged user read_only() acts as
        shutil.copytree(path, base / "cache")
        try:
            with read_only(base / "cache"), warnings.catch_warnings():
                warnings.simplefilter("ignore")  # (the one warning: nothing will be saved)
                cache = Cache(base / "cache")
                assert cache.enabled and not cache.writable
                one_by_one = {key: cache.get(key) for key in keys}
                many = cache.get_many(keys)  # (compared as text: NaN is not equal to itself)
                assert {k: repr(v) for k, v in many.items()} == {
                    k: repr(v) for k, v in one_by_one.items()
                }
                return one_by_one
        finally:
            shutil.rmtree(base)

    if request.param == "one key":
        return by_key
    if request.param == "read-only":
        return read_only_copy
    # A lookup of more keys than one chunk, all of the table: read through the index in
    # chunks, or by reading every row.
    monkeypatch.setattr(cache_table, "LOOKUP_CHUNK", 2)
    share = 1.1 if request.param == "chunks" else 0.0
    monkeypatch.setattr(cache_table, "SCAN_SHARE", share)
    return by_lookup


def _rows(path: Path) -> dict[str, tuple[int, object]]:
    with sqlite3.connect(path / "cache.db") as con:
        rows = con.execute("SELECT key, mode, value FROM Cache").fetchall()
    return {key: (mode, value) for key, mode, value in rows}


def test_an_answer_is_stored_as_json_text_that_sqlite_can_read(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    cache.set("chat:one", ANSWER)
    cache.set_many([("chat:two", ANSWER)])
    cache.close()
    with sqlite3.connect(tmp_path / "cache.db") as con:
        labels = con.execute(
            "SELECT key, json_extract(value, '$.answer.label'),"
            " json_extract(value, '$.probabilities.relevant') FROM Cache ORDER BY key"
        ).fetchall()
    assert labels == [("chat:one", "relevant", 0.875), ("chat:two", "relevant", 0.875)]
    assert {mode for mode, _ in _rows(tmp_path).values()} == {diskcache.core.MODE_RAW}


def test_every_read_gives_back_what_was_written(tmp_path: Path, read) -> None:
    values: dict[str, object] = {
        "chat:answer": ANSWER,
        "emb:vector": b"\x00\x7b\x22" * 8,  # raw bytes stay bytes, whatever they begin with
        "text": "plain text",
        "number text": "5",  # would read back as 5 if text were stored as it is
        "json-looking text": '{"label": "relevant"}',
        "big": {"answer": {"explanation": "long " * 10_000}},  # > 32 kB: a file of its own
        **{f"odd:{name}": value for name, value in ODD.items()},
    }
    cache = Cache(tmp_path)
    cache.set_many(list(values.items())[:4])
    for key, value in list(values.items())[4:]:
        cache.set(key, value)
    cache.close()
    back = read(tmp_path, list(values))
    for key, value in values.items():
        if key == "odd:a NaN cost":
            assert back[key]["cost_usd"] != back[key]["cost_usd"]  # type: ignore[index]
            assert back[key]["answer"] == value["answer"]  # type: ignore[index]
        else:
            assert back[key] == value and type(back[key]) is type(value), key


def test_values_json_would_change_are_kept_in_diskcaches_own_form(tmp_path: Path) -> None:
    cache = Cache(tmp_path)
    cache.set_many([(f"odd:{name}", value) for name, value in ODD.items()])
    cache.close()
    modes = {key: mode for key, (mode, _) in _rows(tmp_path).items()}
    assert all(mode == diskcache.core.MODE_PICKLE for mode in modes.values()), modes


def test_a_cache_of_pickled_answers_written_before_is_still_read(tmp_path: Path, read) -> None:
    older = diskcache.Cache(str(tmp_path))  # what framekit wrote before: diskcache's pickles
    older.set("chat:old", ANSWER)
    older.set("chat:older", {"answer": {"label": "irrelevant"}})
    older.close()
    assert {mode for mode, _ in _rows(tmp_path).values()} == {diskcache.core.MODE_PICKLE}
    back = read(tmp_path, ["chat:old", "chat:older"])
    assert back == {"chat:old": ANSWER, "chat:older": {"answer": {"label": "irrelevant"}}}


def test_text_that_is_not_json_is_read_as_it_is(tmp_path: Path, read) -> None:
    other = diskcache.Cache(str(tmp_path))  # text put there by something other than framekit
    other.set("note", "not json {")
    other.close()
    assert read(tmp_path, ["note"]) == {"note": "not json {"}


def test_stored_and_loaded_are_inverse_for_what_json_keeps() -> None:
    for value in (ANSWER, [1, 2.5, None, True], "text", 0, -0.0, {"k": {"nested": []}}):
        assert loaded(stored(value)) == value
    for value in ODD.values():
        assert stored(value) is value
