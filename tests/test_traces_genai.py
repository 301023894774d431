"""OpenTelemetry GenAI spans load to the same table as OpenInference ones; scores go back out.

The span files are written by ``scripts/make_genai_traces.py`` with the OpenTelemetry SDK:
one set of traces in OpenInference attributes, the current GenAI conventions and the older
ones, each as OTLP/JSON lines and as ``ConsoleSpanExporter`` dumps.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit._errors import InputError
from framekit.traces import TraceFormatError, load

pytest.importorskip("opentelemetry.sdk", reason="framekit[otel] writes the fixtures")
ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location(
    "make_genai", ROOT / "scripts" / "make_genai_traces.py"
)
assert _spec is not None and _spec.loader is not None
genai = importlib.util.module_from_spec(_spec)
sys.modules["make_genai"] = genai
_spec.loader.exec_module(genai)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    out = tmp_path_factory.mktemp("genai")
    written = {}
    for convention in genai.CONVENTIONS:
        otlp, console = genai.write(out, convention)
        written[(convention, "otlp")] = otlp
        written[(convention, "console")] = console
    return written


@pytest.mark.parametrize("convention", ["genai", "genai_older"])
@pytest.mark.parametrize("shape", ["otlp", "console"])
@pytest.mark.parametrize("level", ["trace", "span"])
def test_genai_spans_load_to_the_same_rows_as_openinference(
    files: dict[tuple[str, str], Path], convention: str, shape: str, level: str
) -> None:
    expected = load(files[("openinference", shape)], level=level)  # type: ignore[arg-type]
    got = load(files[(convention, shape)], level=level)  # type: ignore[arg-type]
    assert got.schema == expected.schema
    assert got.to_dicts() == expected.to_dicts()


def test_genai_trace_level_reads_question_answer_history_context_session(
    files: dict[tuple[str, str], Path],
) -> None:
    rag, hello, agent, search = load(files[("genai", "otlp")]).to_dicts()
    assert (rag["input"], rag["output"], rag["session_id"]) == (
        "How long is the X200 warranty?", "Two years.", "s-1")  # fmt: skip
    assert rag["history"] == [
        {"role": "user", "content": "Do you ship to Canada?"},
        {"role": "assistant", "content": "Yes, we ship to Canada."},
    ]
    assert rag["context"] == [genai.DOC_WARRANTY, genai.DOC_RETURNS]
    # A root without input or output: both from its chat call.
    assert (hello["input"], hello["output"]) == ("Hi there", "Hello! How can I help?")
    assert agent["context"] == [] and search["output"] == genai.SEARCH_ANSWER


def test_span_level_takes_web_search_llm_spans_and_skips_side_effect_tools(
    files: dict[tuple[str, str], Path],
) -> None:
    steps = load(files[("genai", "otlp")], level="span")
    assert steps.select("span_kind", "name").rows() == [
        ("RETRIEVER", "retrieve"), ("TOOL", "price_lookup"), ("LLM", "chat gpt-4o-mini")]  # fmt: skip
    search = steps.row(2, named=True)
    assert search["context"] == [genai.SEARCH_ANSWER]
    assert search["query"] == "When did the X300 come out?"


def test_span_level_rules_are_configurable(files: dict[tuple[str, str], Path]) -> None:
    path = files[("genai_older", "otlp")]
    every_tool = load(path, level="span", skip_tools=[], web_search=False)
    assert every_tool["name"].to_list() == ["retrieve", "price_lookup", "send_email"]
    own_list = load(path, level="span", skip_tools=["PRICE_*"])
    assert own_list["name"].to_list() == ["retrieve", "send_email", "chat gpt-4o-mini"]
    with pytest.raises(InputError, match="list of tool names"):
        load(path, level="span", skip_tools="send_email")


def test_one_file_mixing_both_conventions_loads(
    files: dict[tuple[str, str], Path], tmp_path: Path
) -> None:
    # The first half of the requests in OpenInference, the second in GenAI: traces straddle.
    oi = files[("openinference", "otlp")].read_text().splitlines()
    ga = files[("genai", "otlp")].read_text().splitlines()
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(oi[0] + "\n" + ga[1] + "\n")
    got = load(mixed)
    assert got.to_dicts() == load(files[("openinference", "otlp")]).to_dicts()


def test_genai_spans_in_parquet_and_jsonl_rows(
    files: dict[tuple[str, str], Path], tmp_path: Path
) -> None:
    # The same spans as flat rows (one span per row, attributes as a JSON string column).
    spans = genai.record("genai")
    rows = [json.loads(s.to_json()) for s in spans]
    flat = [{"trace_id": r["context"]["trace_id"], "span_id": r["context"]["span_id"],
             "parent_id": r["parent_id"], "name": r["name"], "start_time": r["start_time"],
             "attributes": json.dumps(r["attributes"])} for r in rows]  # fmt: skip
    pl.DataFrame(flat).write_parquet(tmp_path / "genai.parquet")
    (tmp_path / "genai.jsonl").write_text("".join(json.dumps(r) + "\n" for r in flat))
    expected = load(files[("openinference", "console")]).drop("status_code")
    for name in ("genai.parquet", "genai.jsonl"):  # no status field here: status_code null
        assert load(tmp_path / name).drop("status_code").to_dicts() == expected.to_dicts()


def test_otlp_and_console_dumps_of_the_same_spans_load_alike(
    files: dict[tuple[str, str], Path],
) -> None:
    for convention in genai.CONVENTIONS:
        otlp, console = files[(convention, "otlp")], files[(convention, "console")]
        assert load(otlp).to_dicts() == load(console).to_dicts()
        assert load(otlp)["status_code"].to_list() == ["UNSET"] * 4


def test_malformed_genai_messages_name_file_line_and_attribute(tmp_path: Path) -> None:
    lines = [
        {"traceId": "a" * 32, "spanId": "b" * 16, "name": "ok", "attributes": []},
        {"traceId": "a" * 32, "spanId": "c" * 16, "name": "chat", "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.input.messages", "value": {"stringValue": "[{\"role\": \"user\","}},
        ]},
    ]  # fmt: skip
    path = tmp_path / "bad.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(
        TraceFormatError,
        match=r"bad\.jsonl: line 2: span c+: gen_ai\.input\.messages is not valid JSON",
    ):
        load(path)


def test_large_export_spilled_to_disk_loads_like_in_memory(
    files: dict[tuple[str, str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import framekit.traces._spill as spill

    path = files[("genai", "otlp")]
    in_memory = load(path, level="span"), load(path)
    monkeypatch.setattr(spill, "_IN_MEMORY", 2)  # spill after the third span
    spilled: list[int] = []
    real_spill = spill._spill
    monkeypatch.setattr(spill, "_spill", lambda s, f: spilled.append(1) or real_spill(s, f))
    assert load(path, level="span").equals(in_memory[0])
    assert load(path).equals(in_memory[1])
    assert len(spilled) == 2 * len(genai.record("genai"))  # every span went through disk


# --- scores back out ----------------------------------------------------------------------


def _scored(files: dict[tuple[str, str], Path]) -> pl.DataFrame:
    traces = load(files[("genai", "otlp")])
    results = pl.DataFrame({
        "coherence_score": [1.0, None, 0.25, 0.75],
        "coherence_label": ["Completely Yes", None, "Not Generally", "Generally Yes"],
        "coherence_explanation": ["clear", None, "muddled", "mostly clear"],
        "coherence_passed": [True, None, False, True],
        "coherence_error": [None, "HTTP 500", None, None],
    })  # fmt: skip
    return pl.concat([traces, results], how="horizontal")


def test_to_annotations_has_phoenix_shape_and_counts_failed_rows(
    files: dict[tuple[str, str], Path],
) -> None:
    scored = _scored(files)
    with pytest.warns(UserWarning, match="1 failed rows left out"):
        frame = fk.traces.to_annotations(scored)
    assert frame.schema == fk.traces.ANNOTATION_SCHEMA
    ok = scored.filter(pl.col("coherence_error").is_null())
    assert frame["span_id"].to_list() == ok["span_id"].to_list()
    assert frame["score"].to_list() == [1.0, 0.25, 0.75]
    assert frame["metadata"].struct.field("trace_id").to_list() == ok["trace_id"].to_list()
    with pytest.raises(fk.InputError, match="no result columns for evaluator 'coherenc'"):
        fk.traces.to_annotations(scored, evaluators=["coherenc"])


def test_to_otel_events_file_parents_each_event_to_its_span(
    files: dict[tuple[str, str], Path], tmp_path: Path
) -> None:
    scored = _scored(files)
    result = fk.traces.to_otel_events(scored, tmp_path / "events.jsonl")
    assert (result.sent, result.skipped_failed) == (3, {"coherence": 1})
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    records = [r for line in lines for r in
               json.loads(line)["resourceLogs"][0]["scopeLogs"][0]["logRecords"]]  # fmt: skip
    ok = scored.filter(pl.col("coherence_error").is_null())
    assert [(r["traceId"], r["spanId"]) for r in records] == ok.select("trace_id", "span_id").rows()
    attrs = {a["key"]: a["value"] for a in records[1]["attributes"]}
    assert records[1]["eventName"] == "gen_ai.evaluation.result"
    assert attrs["gen_ai.evaluation.name"] == {"stringValue": "coherence"}
    assert attrs["gen_ai.evaluation.score.value"] == {"doubleValue": 0.25}
    assert attrs["gen_ai.evaluation.score.label"] == {"stringValue": "Not Generally"}
    assert not list(tmp_path.glob("*.partial"))


class _Collector(BaseHTTPRequestHandler):
    received: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802
        body = self.rfile.read(int(self.headers["content-length"]))
        type(self).received.append(body)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[str]:
    _Collector.received = []
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_to_otel_events_exports_with_the_sdk_to_an_otlp_endpoint(
    files: dict[tuple[str, str], Path], collector: str
) -> None:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    scored = _scored(files)
    assert fk.traces.to_otel_events(scored, collector).sent == 3
    records = []
    for body in _Collector.received:
        request = ExportLogsServiceRequest.FromString(body)
        records += [
            r for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records
        ]
    ok = scored.filter(pl.col("coherence_error").is_null())
    assert [(r.trace_id.hex(), r.span_id.hex()) for r in records] == ok.select(
        "trace_id", "span_id").rows()  # fmt: skip
    assert {r.event_name for r in records} == {"gen_ai.evaluation.result"}
    scores = [next(a.value.double_value for a in r.attributes
                   if a.key == "gen_ai.evaluation.score.value") for r in records]  # fmt: skip
    assert scores == [1.0, 0.25, 0.75]


def test_to_otel_events_refuses_ids_that_are_not_otel_ids(tmp_path: Path) -> None:
    scored = pl.DataFrame({"span_id": ["c-root"], "coherence_score": [1.0],
                           "coherence_error": [None]}, schema_overrides={"coherence_error": pl.String})  # fmt: skip
    with pytest.raises(fk.InputError, match="'c-root' is not an OpenTelemetry span id"):
        fk.traces.to_otel_events(scored, tmp_path / "e.jsonl")
    assert not (tmp_path / "e.jsonl").exists()


# --- the command line ---------------------------------------------------------------------


def test_cli_scores_a_trace_export_and_exports_its_annotations(
    files: dict[tuple[str, str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("onnxruntime", reason="the offline judge needs framekit[local]")
    from framekit.cli import main

    out = tmp_path / "scored.parquet"
    export = str(files[("genai", "otlp")])
    argv = ["evaluate", "--traces", export, "-o", str(out), "-e", "retrieval_relevance",
            "--level", "span", "--judge", "local", "--no-cache", "-q"]  # fmt: skip
    assert main(argv) == 0
    scored = pl.read_parquet(out)
    assert scored["span_id"].to_list() == load(export, level="span")["span_id"].to_list()
    assert scored["retrieval_relevance_error"].null_count() == scored.height

    events = tmp_path / "events.jsonl"
    assert main(["export-annotations", str(out), "--otlp", str(events)]) == 0
    assert f"sent {scored.height} annotations" in capsys.readouterr().out
    records = json.loads(events.read_text())["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    assert [r["spanId"] for r in records] == scored["span_id"].to_list()


def test_cli_refuses_a_missing_export_and_an_input_next_to_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from framekit.cli import main

    missing = ["evaluate", "--traces", str(tmp_path / "nope.jsonl"), "-o", "x.parquet",
               "-e", "coherence"]  # fmt: skip
    assert main(missing) == 2
    assert "nope.jsonl: no such span export" in capsys.readouterr().err
    both = ["evaluate", "t.parquet", "--traces", "x.jsonl", "-o", "o.parquet", "-e", "coherence"]
    assert main(both) == 2
    assert "either --traces or an input" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()
