"""fk.traces.load: Phoenix / OpenTelemetry span exports as trace- and span-level tables."""

from __future__ import annotations

import glob
import gzip
import importlib.util
import json
import re
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

sys.path.insert(0, str(Path(__file__).parent))
import fixtures_traces as fx  # noqa: E402

from framekit.traces import SPAN_SCHEMA, TRACE_SCHEMA, TraceFormatError, load  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "framekit" / "data" / "sample_traces.jsonl"


def at(second: int) -> datetime:
    return datetime(2025, 3, 1, 12, 0, second, tzinfo=timezone.utc)


# Written out by hand from the fixture's story, not computed by the code under test.
EXPECTED_TRACES = [
    {
        "trace_id": "t-chat",
        "span_id": "c-root",
        "session_id": "s-1",
        "start_time": at(0),
        "input": "How long is the X200 warranty?",
        "output": "Two years.",
        "history": [
            {"role": "user", "content": "Do you ship to Canada?"},
            {"role": "assistant", "content": "Yes, we ship to Canada."},
        ],
        "context": [fx.DOC_WARRANTY, fx.DOC_RETURNS],
        "status_code": "OK",
    },
    {
        "trace_id": "t-hello",
        "span_id": "h-root",
        "session_id": None,
        "start_time": at(10),
        "input": "Hi there",
        "output": "Hello! How can I help?",
        "history": [],
        "context": [],
        "status_code": "OK",
    },
    {
        "trace_id": "t-agent",
        "span_id": "a-root",
        "session_id": None,
        "start_time": at(20),
        "input": "Compare the X200 and X300 prices",
        "output": "The X300 costs $50 more.",
        "history": [],
        "context": [fx.DOC_X300, fx.DOC_X200],
        "status_code": "OK",
    },
    {
        "trace_id": "t-json",
        "span_id": "j-root",
        "session_id": "s-1",
        "start_time": at(30),
        "input": "And how fast does it charge?",
        "output": None,
        "history": [
            {"role": "user", "content": "What is the X200 battery life?"},
            {"role": "assistant", "content": "About ten hours."},
        ],
        "context": [fx.DOC_BATTERY],
        "status_code": "ERROR",
    },
]

AGENT_QUESTION = "Compare the X200 and X300 prices"
EXPECTED_STEPS = [
    ("t-chat", "c-ret", "RETRIEVER", "retrieve", "How long is the X200 warranty?",
     "X200 warranty length", [fx.DOC_WARRANTY, fx.DOC_RETURNS], at(1)),
    ("t-agent", "a-ret", "RETRIEVER", "retrieve", AGENT_QUESTION, "X200 X300 price",
     [fx.DOC_X200, fx.DOC_COLORS, fx.DOC_X300], at(21)),
    ("t-agent", "a-rerank", "RERANKER", "rerank", AGENT_QUESTION, "X200 X300 price",
     [fx.DOC_X300, fx.DOC_X200], at(22)),
    ("t-agent", "a-tool", "TOOL", "price_lookup", AGENT_QUESTION, '{"sku": "X300"}',
     ['{"price": 349}'], at(23)),
    ("t-json", "j-ret", "RETRIEVER", "retrieve", "And how fast does it charge?",
     "X200 charging", [fx.DOC_BATTERY], at(31)),
]  # fmt: skip


@pytest.mark.parametrize("write", fx.WRITERS, ids=lambda w: w.__name__.removeprefix("write_"))
def test_every_export_shape_gives_the_same_trace_table(write: Any, tmp_path: Path) -> None:
    traces = load(write(tmp_path))
    assert traces.schema == TRACE_SCHEMA
    assert traces.to_dicts() == EXPECTED_TRACES


@pytest.mark.parametrize("write", fx.WRITERS, ids=lambda w: w.__name__.removeprefix("write_"))
def test_every_export_shape_gives_the_same_retrieval_steps(write: Any, tmp_path: Path) -> None:
    steps = load(write(tmp_path), level="span")
    assert steps.schema == SPAN_SCHEMA
    assert steps.rows() == EXPECTED_STEPS


def test_tool_with_empty_output_and_llm_spans_are_not_retrieval_steps(tmp_path: Path) -> None:
    steps = load(fx.write_jsonl_nested(tmp_path), level="span")
    assert "a-tool-empty" not in steps["span_id"].to_list()
    assert set(steps["span_kind"]) == {"RETRIEVER", "RERANKER", "TOOL"}


# --- gzipped files, globs, directories and lists of paths -------------------------------


def gzipped(path: Path, name: str) -> Path:
    target = path.with_name(name)
    target.write_bytes(gzip.compress(path.read_bytes()))
    return target


def split_in_two(whole: Path, first: Path, second: Path) -> None:
    """Alternate lines between two files: every trace of two or more spans is split."""
    lines = whole.read_text(encoding="utf-8").splitlines(keepends=True)
    for path, part in ((first, lines[0::2]), (second, lines[1::2])):
        path.parent.mkdir(parents=True, exist_ok=True)
        data = "".join(part).encode()
        path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


@pytest.mark.parametrize(
    ("write", "name"),
    [(fx.write_jsonl_nested, "spans.jsonl.gz"), (fx.write_jsonl_nested, "SPANS.NDJSON.GZ"),
     (fx.write_json_dotted, "spans.json.gz"), (fx.write_json_otlp, "otlp.json.gz")],
)  # fmt: skip
def test_gzipped_export_loads_like_the_plain_file(write: Any, name: str, tmp_path: Path) -> None:
    plain = write(tmp_path)
    packed = gzipped(plain, name)
    assert_frame_equal(load(packed), load(plain))
    assert_frame_equal(load(packed, level="span"), load(plain, level="span"))
    assert load(packed).to_dicts() == EXPECTED_TRACES


@pytest.mark.parametrize(
    ("parts", "pattern"),
    [(["a.jsonl", "b.jsonl"], "*.jsonl"), (["a.jsonl", "sub/b.jsonl.gz"], "**/*.jsonl*")],
)
def test_glob_over_a_split_export_equals_the_whole_file(
    tmp_path: Path, parts: list[str], pattern: str
) -> None:
    whole = fx.write_jsonl_nested(tmp_path)
    split_in_two(whole, tmp_path / "parts" / parts[0], tmp_path / "parts" / parts[1])
    traces = load(str(tmp_path / "parts" / pattern))
    assert_frame_equal(traces, load(whole))
    assert traces.to_dicts() == EXPECTED_TRACES  # each split trace assembled once
    assert_frame_equal(load(tmp_path / "parts" / pattern, level="span"), load(whole, level="span"))


def test_list_of_paths_and_directory_read_as_one_export(tmp_path: Path) -> None:
    whole = fx.write_jsonl_nested(tmp_path)
    parts = tmp_path / "parts"
    split_in_two(whole, parts / "a.jsonl", parts / "b.ndjson.gz")
    (parts / "README.md").write_text("not spans")  # a directory's other files are skipped
    assert_frame_equal(load([parts / "a.jsonl", str(parts / "b.ndjson.gz")]), load(whole))
    assert_frame_equal(load(parts), load(whole))


def test_glob_result_does_not_depend_on_listing_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two traces starting at the same second: the tie breaks by file, in path order.
    write_spans(tmp_path / "a.jsonl", [span("root", trace="from-a")])
    write_spans(tmp_path / "b.jsonl", [span("root", trace="from-b")])
    listed = glob.glob  # the file system lists in any order: here, b before a
    monkeypatch.setattr(glob, "glob", lambda *a, **k: sorted(listed(*a, **k), reverse=True))
    assert load(f"{tmp_path}/*.jsonl")["trace_id"].to_list() == ["from-a", "from-b"]


def test_existing_file_with_pattern_characters_is_read_as_named(tmp_path: Path) -> None:
    path = write_spans(tmp_path / "spans[1].jsonl", [span("root", **{"input.value": "q"})])
    write_spans(tmp_path / "spans1.jsonl", [span("other", trace="wrong")])  # "[1]" would match it
    assert load(path)["input"].to_list() == ["q"]


# --- small single-trace exports for the individual rules --------------------------------


def write_spans(path: Path, spans: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(s) for s in spans) + "\n", encoding="utf-8")
    return path


def span(span_id: str, parent: str | None = None, kind: str = "CHAIN", second: int = 0, /,
         trace: str = "t", **attributes: Any) -> dict[str, Any]:  # fmt: skip
    return {
        "context": {"trace_id": trace, "span_id": span_id},
        "parent_id": parent,
        "name": span_id,
        "start_time": at(second).isoformat(),
        "status_code": "OK",
        "attributes": {"openinference.span.kind": kind, **attributes},
    }


def one_trace(tmp_path: Path, *spans: dict[str, Any]) -> dict[str, Any]:
    rows = load(write_spans(tmp_path / "t.jsonl", list(spans))).to_dicts()
    assert len(rows) == 1
    return rows[0]


OPENAI_REQUEST = {
    "model": "gpt-4o-mini",
    "messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Earlier question"}]},
        {"role": "assistant", "content": "Earlier answer"},
        {"role": "user", "content": [{"type": "text", "text": "What is 2 + 2?"}]},
    ],
}
LANGCHAIN_INPUT = {
    "messages": [
        [
            {"lc": 1, "id": ["langchain", "schema", "messages", "SystemMessage"],
             "kwargs": {"content": "Be brief."}},
            {"lc": 1, "id": ["langchain", "schema", "messages", "HumanMessage"],
             "kwargs": {"content": "What is 2 + 2?", "type": "human"}},
        ]
    ]
}  # fmt: skip


@pytest.mark.parametrize(
    ("value", "mime", "expected"),
    [
        (json.dumps({"question": "What is 2 + 2?"}), "application/json", "What is 2 + 2?"),
        (json.dumps({"input": {"query": "What is 2 + 2?"}}), None, "What is 2 + 2?"),
        (json.dumps(OPENAI_REQUEST), "application/json", "What is 2 + 2?"),
        (json.dumps(LANGCHAIN_INPUT), "application/json", "What is 2 + 2?"),
        # Nothing recognisable: the JSON text is the best thing to show a judge.
        (json.dumps({"sku": "X300", "qty": 2}), "application/json", '{"sku": "X300", "qty": 2}'),
        # Declared plain text is never parsed, even when it looks like JSON.
        ('{"question": "literal"}', "text/plain", '{"question": "literal"}'),
        ("{not json", "application/json", "{not json"),
    ],
)
def test_json_input_value_gives_the_users_question(
    tmp_path: Path, value: str, mime: str | None, expected: str
) -> None:
    attrs = {"input.value": value, **({"input.mime_type": mime} if mime else {})}
    assert one_trace(tmp_path, span("root", **attrs))["input"] == expected


def test_json_chat_request_gives_question_and_history_without_developer_turns(
    tmp_path: Path,
) -> None:
    row = one_trace(tmp_path, span("root", **{"input.value": json.dumps(OPENAI_REQUEST)}))
    assert row["input"] == "What is 2 + 2?"
    assert row["history"] == [
        {"role": "user", "content": "Earlier question"},
        {"role": "assistant", "content": "Earlier answer"},
    ]


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ({"choices": [{"message": {"role": "assistant", "content": "4"}}]}, "4"),
        ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "4"}]}, "4"),
        ({"result": {"answer": "4"}, "latency": 3}, "4"),
    ],
)  # fmt: skip
def test_json_output_value_gives_the_answer(tmp_path: Path, output: Any, expected: str) -> None:
    attrs = {"output.value": json.dumps(output), "output.mime_type": "application/json"}
    assert one_trace(tmp_path, span("root", **attrs))["output"] == expected


def test_multimodal_message_contents_are_read_as_text(tmp_path: Path) -> None:
    llm = span("llm", "root", "LLM", 1, **{
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": "Describe",
        "llm.input_messages.0.message.contents.1.message_content.type": "image",
        "llm.input_messages.0.message.contents.2.message_content.text": "this photo",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "A cat.",
    })  # fmt: skip
    row = one_trace(tmp_path, span("root"), llm)
    assert (row["input"], row["output"]) == ("Describe\nthis photo", "A cat.")


def test_last_llm_span_gives_input_output_and_history_when_root_has_blank_ones(
    tmp_path: Path,
) -> None:
    def llm(span_id: str, second: int, question: str, answer: str) -> dict[str, Any]:
        return span(span_id, "root", "LLM", second, **{
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "sys",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": "first",
            "llm.input_messages.2.message.role": "assistant",
            "llm.input_messages.2.message.content": "",  # a tool call: no text
            "llm.input_messages.3.message.role": "tool",
            "llm.input_messages.3.message.content": "tool result",
            "llm.input_messages.4.message.role": "user",
            "llm.input_messages.4.message.content": question,
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": answer,
        })  # fmt: skip

    # The later LLM span is listed first: "last" means last to start, not last in the file.
    blank_root = span("root", **{"input.value": "  ", "output.value": ""})
    row = one_trace(tmp_path, llm("late", 5, "q2", "final"), blank_root, llm("early", 1, "x", "y"))
    assert (row["input"], row["output"]) == ("q2", "final")
    assert row["history"] == [
        {"role": "user", "content": "first"},
        {"role": "tool", "content": "tool result"},
    ]


def test_documents_repeated_across_retrievers_appear_once_in_trace_context(tmp_path: Path) -> None:
    docs = {
        "retrieval.documents.0.document.content": "A",
        "retrieval.documents.1.document.content": "B",
    }
    more = {
        "retrieval.documents.0.document.content": "B",
        "retrieval.documents.1.document.content": "C",
    }
    row = one_trace(tmp_path, span("root"), span("r1", "root", "RETRIEVER", 1, **docs),
                    span("r2", "root", "RETRIEVER", 2, **more))  # fmt: skip
    assert row["context"] == ["A", "B", "C"]


def test_partial_export_without_root_uses_earliest_span_whose_parent_is_missing(
    tmp_path: Path,
) -> None:
    # "skewed" starts first (clock skew between services) but its parent is in the file.
    spans = [span("late", "lost-root", "LLM", 3), span("first", "lost-root", "CHAIN", 1,
             **{"input.value": "q"}), span("skewed", "first", "TOOL", 0)]  # fmt: skip
    row = one_trace(tmp_path, *spans)
    assert (row["span_id"], row["input"], row["start_time"]) == ("first", "q", at(1))


def test_duplicate_spans_are_counted_once(tmp_path: Path) -> None:
    retriever = span("r", "root", "RETRIEVER", 1, **{"retrieval.documents.0.document.content": "A"})
    path = write_spans(tmp_path / "dup.jsonl", [span("root"), retriever, retriever])
    assert load(path, level="span").height == 1


def test_reranker_without_input_value_uses_reranker_query(tmp_path: Path) -> None:
    rerank = span("rr", "root", "RERANKER", 1, **{"reranker.query": "q?",
                  "reranker.output_documents.0.document.content": "A"})  # fmt: skip
    path = write_spans(tmp_path / "rr.jsonl", [span("root", **{"input.value": "Q"}), rerank])
    assert load(path, level="span").select("input", "query", "context").row(0) == ("Q", "q?", ["A"])


@pytest.mark.parametrize(
    "value",
    [1740830400123456000, "1740830400123456000", 1740830400123.456, "2025-03-01T12:00:00.123456789Z",
     "2025-03-01T13:00:00.123456+01:00", "2025-03-01 12:00:00.123456", "2025-03-01T12:00:00.1234567Z"],
)  # fmt: skip
def test_start_times_in_any_unit_or_zone_become_utc(tmp_path: Path, value: Any) -> None:
    record = span("root")
    record["start_time"] = value
    started = one_trace(tmp_path, record)["start_time"]
    assert started == datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)


def test_phoenix_dataframe_in_memory_loads_like_its_parquet(tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    path = fx.write_parquet_phoenix(tmp_path)
    frame = pd.read_parquet(path).set_index("context.span_id", drop=False)
    assert load(frame).to_dicts() == EXPECTED_TRACES
    assert load(frame.set_index("context.span_id")).to_dicts() == EXPECTED_TRACES
    assert load(pl.read_parquet(path), level="span").rows() == EXPECTED_STEPS


# --- empty results keep their dtypes ----------------------------------------------------


@pytest.mark.parametrize(("name", "text"), [("empty.jsonl", "\n"), ("empty.json", "[]"),
                                            ("empty2.json", '{"spans": []}')])  # fmt: skip
def test_empty_exports_give_typed_empty_tables(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(text)
    for level, schema in (("trace", TRACE_SCHEMA), ("span", SPAN_SCHEMA)):
        frame = load(tmp_path / name, level=level)  # type: ignore[arg-type]
        assert frame.height == 0 and frame.schema == schema


def test_traces_without_retrieval_give_typed_empty_span_table(tmp_path: Path) -> None:
    path = write_spans(tmp_path / "chat.jsonl", [span("root", **{"input.value": "hi"})])
    steps = load(path, level="span")
    assert steps.height == 0 and steps.schema == SPAN_SCHEMA


# --- errors name the file and what is wrong ---------------------------------------------


def test_unknown_extension_is_refused_with_the_supported_ones(tmp_path: Path) -> None:
    path = tmp_path / "spans.csv"
    path.write_text("a,b\n")
    with pytest.raises(TraceFormatError, match=r"spans\.csv: unknown extension '\.csv'.*\.jsonl"):
        load(path)


def test_gzipped_parquet_is_refused_with_the_supported_extensions(tmp_path: Path) -> None:
    path = gzipped(fx.write_parquet_phoenix(tmp_path), "spans.parquet.gz")
    with pytest.raises(
        TraceFormatError, match=r"spans\.parquet\.gz: unknown extension '\.parquet\.gz'.*\.jsonl"
    ):
        load(path)


@pytest.mark.parametrize("damage", ["truncated", "not gzip"])
def test_unreadable_gzip_is_a_format_error_naming_the_file(tmp_path: Path, damage: str) -> None:
    packed = gzip.compress(fx.write_jsonl_nested(tmp_path).read_bytes())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(packed[: len(packed) // 2] if damage == "truncated" else b"plain text")
    with pytest.raises(TraceFormatError, match=r"cut\.jsonl\.gz: not a readable gzip file"):
        load(path)


@pytest.mark.parametrize("pattern", ["exports/*.jsonl", "exports/**/*.parquet", "x[12].json"])
def test_glob_matching_nothing_shows_the_pattern(tmp_path: Path, pattern: str) -> None:
    fx.write_jsonl_nested(tmp_path)  # spans.jsonl: there, but not matched
    shown = str(tmp_path / pattern)
    with pytest.raises(TraceFormatError, match=re.escape(shown) + ": no file matches"):
        load(shown)


def test_directory_or_list_without_exports_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("no spans here")
    with pytest.raises(TraceFormatError, match=re.escape(str(tmp_path)) + ": no span export"):
        load(tmp_path)
    with pytest.raises(TraceFormatError, match="list of paths is empty"):
        load([])


def test_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        load(tmp_path / "nope.jsonl")


def test_malformed_jsonl_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(span("root")) + "\n\n" + '{"context": {"trace_id": "t",\n')
    with pytest.raises(TraceFormatError, match=r"bad\.jsonl: malformed JSON on line 3"):
        load(path)


def test_malformed_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('[\n  {"name": "x",}\n]')
    with pytest.raises(TraceFormatError, match=r"bad\.json: malformed JSON at line 2, column"):
        load(path)


def test_json_object_without_spans_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"rows": [], "version": 2}))
    with pytest.raises(TraceFormatError, match=r"other\.json: expected a list of spans.*'rows'"):
        load(path)


def test_span_without_id_names_its_line(tmp_path: Path) -> None:
    broken = span("x")
    del broken["context"]["span_id"]
    path = write_spans(tmp_path / "noid.jsonl", [span("root"), broken])
    with pytest.raises(TraceFormatError, match=r"noid\.jsonl: line 2: span has no span id"):
        load(path)


def test_parquet_without_span_id_column_lists_its_columns(tmp_path: Path) -> None:
    path = tmp_path / "table.parquet"
    pl.DataFrame({"question": ["q"], "answer": ["a"]}).write_parquet(path)
    with pytest.raises(
        TraceFormatError, match=r"table\.parquet: no span id column.*question, answer"
    ):
        load(path)


def test_corrupt_parquet_is_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "corrupt.parquet"
    path.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(TraceFormatError, match=r"corrupt\.parquet: not a readable Parquet"):
        load(path)


def test_unreadable_start_time_names_the_span(tmp_path: Path) -> None:
    record = span("root")
    record["start_time"] = "yesterday"
    with pytest.raises(
        TraceFormatError, match=r"t\.jsonl: line 1: unreadable start_time 'yesterday'"
    ):
        load(write_spans(tmp_path / "t.jsonl", [record]))


def test_unknown_level_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="level must be 'trace' or 'span'"):
        load(fx.write_jsonl_nested(tmp_path), level="document")  # type: ignore[arg-type]


def test_trace_format_error_is_a_value_error() -> None:
    assert issubclass(TraceFormatError, ValueError)


# --- the shipped sample ------------------------------------------------------------------


def test_sample_export_is_small_and_loads_twenty_evaluable_traces() -> None:
    assert SAMPLE.stat().st_size < 50_000
    traces = load(SAMPLE)
    assert traces.height == 20
    assert traces["input"].null_count() == 0
    assert traces.filter(pl.col("output").is_null())["status_code"].to_list() == ["ERROR"]
    assert traces["history"].list.len().max() == 4  # third turn of the Paris session
    assert traces.filter(pl.col("context").list.len() == 0).height == 3  # small talk, 2 tools
    steps = load(SAMPLE, level="span")
    assert steps.group_by("span_kind").len().sort("span_kind").rows() == [
        ("RERANKER", 2),
        ("RETRIEVER", 17),
        ("TOOL", 2),
    ]


def test_sample_export_is_reproduced_by_its_script() -> None:
    spec = importlib.util.spec_from_file_location(
        "make_sample", ROOT / "scripts" / "make_sample_traces.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.render() == SAMPLE.read_text(encoding="utf-8")
