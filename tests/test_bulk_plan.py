"""The bulk steps of planning give what the row-at-a-time steps gave.

Identical rows are grouped by polars when the columns are typed, and cache keys start
from a stored hash of the prefix and the system prompt; both must be invisible: the same
records, weights and row-to-record map, and the same keys as the documented hash stream
(so caches and batch ``custom_id`` values written before still match).
"""

from __future__ import annotations

import hashlib
import json

import polars as pl

from framekit.engine.keys import chat_key
from framekit.engine.records import distinct_records
from framekit.judges.request import ChatRequest

SCHEMA = {"type": "object", "properties": {"label": {"type": "string"}}}


def _stream_key(prefix: bytes, messages: list[dict[str, str]], schema_bytes: bytes) -> str:
    """The key as documented in ``chat_key``: prefix, then per plain message a record
    separator, the role, a unit separator and the text, then the schema."""
    h = hashlib.sha256(prefix)
    for m in messages:
        h.update(b"\x1e" + m["role"].encode() + b"\x1f" + m["content"].encode())
    h.update(b"\x1c" + schema_bytes)
    return "chat:" + h.hexdigest()


def test_keys_from_the_stored_system_prompt_hash_equal_the_documented_stream() -> None:
    schema_bytes = b'{"type":"object","properties":{"label":{"type":"string"}}}'
    for prefix in (b"judge-a", b"judge-b"):
        for user in ("first", "second", "first"):
            messages = [
                {"role": "system", "content": "You judge relevance."},
                {"role": "user", "content": user},
            ]
            key = chat_key(prefix, ChatRequest(messages, "v", SCHEMA))
            assert key == _stream_key(prefix, messages, schema_bytes)
    # Another system prompt under the same prefix is another key.
    other = [{"role": "system", "content": "Other."}, {"role": "user", "content": "first"}]
    first = [{"role": "system", "content": "You judge relevance."}, other[1]]
    assert chat_key(b"judge-a", ChatRequest(other, "v", SCHEMA)) != chat_key(
        b"judge-a", ChatRequest(first, "v", SCHEMA)
    )


def _python_path(columns: dict[str, pl.Series], names: list[str], height: int):
    # A row error sends distinct_records down its row-at-a-time path; the row itself is
    # then compared apart.
    return distinct_records(columns, names, height, {height - 1: "boom"})


def test_grouping_by_polars_gives_the_records_weights_and_rows_of_the_python_path() -> None:
    questions = ["a", "b", None, "a", "c", "b", None, "a", "z"]
    docs = [["x"], ["y", "z"], ["x"], ["x"], [], ["y", "z"], ["x"], ["w"], ["q"]]
    columns = {
        "input": pl.Series("input", questions),
        "context": pl.Series("context", docs),
    }
    names = ["input", "context"]
    records, inverse = distinct_records(columns, names, len(questions))
    slow, slow_inverse = _python_path(columns, names, len(questions))
    assert [r.fields for r in records] == [r.fields for r in slow[:-1]] + [
        {"input": "z", "context": ["q"]}
    ]
    assert [r.weight for r in records] == [r.weight for r in slow[:-1]] + [1]
    assert inverse[:-1] == slow_inverse[:-1]
    assert [records[i].fields for i in inverse] == [
        {"input": q, "context": d} for q, d in zip(questions, docs)
    ]
    assert sum(r.weight for r in records) == len(questions)


def test_batch_lines_are_the_bytes_the_standard_library_wrote() -> None:
    from framekit.judges.request import dump_json, load_json

    line = {
        "custom_id": "0" * 64,
        "body": {
            "messages": [{"role": "user", "content": 'Ünïcode 漢字 \u2028 "quoted" \\ tab\t'}],
            "temperature": 0.0,
            "top_p": 0.95,
            "max_tokens": 256,
            "strict": True,
            "stop": None,
        },
        "huge": 2**70,  # past orjson's integers: written by the standard library
    }
    expected = json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode()
    assert dump_json(line) == expected
    assert load_json(expected) == line
    assert load_json(b'{"x": NaN}')["x"] != load_json(b'{"x": NaN}')["x"]  # NaN read back
