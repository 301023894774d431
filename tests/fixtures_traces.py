"""Span exports written by the project for the traces tests.

One logical set of four traces (``SPANS``) is written in every shape that Phoenix and
OpenTelemetry exporters produce, so the tests can check that every shape loads to the
same table. Attributes are kept here in OpenInference's flat dotted form; each writer
turns them into its own shape.

- ``t-chat``: second turn of a chat (session ``s-1``); the root CHAIN holds the plain
  question and answer, a RETRIEVER finds two documents, the LLM sees a system prompt, the
  first turn and the question wrapped with context.
- ``t-hello``: no retrieval, the root has no input/output: both come from the LLM span.
- ``t-agent``: AGENT root with JSON ``input.value``/``output.value``; RETRIEVER (3 docs),
  RERANKER (keeps 2, reordered), a TOOL with an output, a TOOL with an empty output.
- ``t-json``: root input is a JSON chat request with earlier turns; no LLM span, no
  output, status ERROR; in session ``s-1`` too.
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import polars as pl

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=timezone.utc)

DOC_WARRANTY = "The X200 comes with a two-year limited warranty covering parts and labour."
DOC_RETURNS = "Returns are accepted within 30 days of delivery."
DOC_X200 = "The X200 costs $299."
DOC_X300 = "The X300 costs $349."
DOC_COLORS = "The X300 comes in red and blue."
DOC_BATTERY = "Fast charging fills the X200 battery to 80% in 35 minutes."


def _span(
    trace: str,
    span: str,
    parent: str | None,
    name: str,
    kind: str,
    second: int,
    attributes: dict[str, Any],
    status: str = "OK",
) -> dict[str, Any]:
    start = T0 + timedelta(seconds=second)
    return {
        "trace_id": trace,
        "span_id": span,
        "parent_id": parent,
        "name": name,
        "kind": kind,
        "start": start,
        "end": start + timedelta(milliseconds=900),
        "status": status,
        "attributes": {"openinference.span.kind": kind, **attributes},
    }


def _messages(direction: str, *messages: tuple[str, str]) -> dict[str, str]:
    out = {}
    for i, (role, content) in enumerate(messages):
        out[f"llm.{direction}_messages.{i}.message.role"] = role
        out[f"llm.{direction}_messages.{i}.message.content"] = content
    return out


def _docs(prefix: str, *docs: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, doc in enumerate(docs):
        out[f"{prefix}.{i}.document.content"] = doc
        out[f"{prefix}.{i}.document.score"] = round(0.9 - 0.1 * i, 2)
    return out


CHAT_REQUEST = {
    "messages": [
        {"role": "system", "content": "You are the X200 support bot."},
        {"role": "user", "content": "What is the X200 battery life?"},
        {"role": "assistant", "content": "About ten hours."},
        {"role": "user", "content": "And how fast does it charge?"},
    ]
}

# Listed out of time order on purpose: the loader must sort.
SPANS: list[dict[str, Any]] = [
    _span("t-hello", "h-root", None, "chat", "CHAIN", 10, {}),
    _span(
        "t-hello",
        "h-llm",
        "h-root",
        "ChatOpenAI",
        "LLM",
        11,
        {
            **_messages("input", ("system", "Be brief."), ("user", "Hi there")),
            **_messages("output", ("assistant", "Hello! How can I help?")),
        },
    ),
    _span(
        "t-chat",
        "c-root",
        None,
        "rag",
        "CHAIN",
        0,
        {
            "session.id": "s-1",
            "input.value": "How long is the X200 warranty?",
            "input.mime_type": "text/plain",
            "output.value": "Two years.",
        },
    ),
    _span(
        "t-chat",
        "c-ret",
        "c-root",
        "retrieve",
        "RETRIEVER",
        1,
        {
            "input.value": "X200 warranty length",
            **_docs("retrieval.documents", DOC_WARRANTY, DOC_RETURNS),
        },
    ),
    _span(
        "t-chat",
        "c-llm",
        "c-root",
        "ChatOpenAI",
        "LLM",
        2,
        {
            **_messages(
                "input",
                ("system", "Answer from the context."),
                ("user", "Do you ship to Canada?"),
                ("assistant", "Yes, we ship to Canada."),
                ("user", f"Context: {DOC_WARRANTY}\nQuestion: How long is the X200 warranty?"),
            ),
            **_messages("output", ("assistant", "Two years.")),
            "output.value": "Two years.",
        },
    ),
    _span(
        "t-agent",
        "a-root",
        None,
        "agent",
        "AGENT",
        20,
        {
            "input.value": json.dumps({"query": "Compare the X200 and X300 prices"}),
            "input.mime_type": "application/json",
            "output.value": json.dumps({"answer": "The X300 costs $50 more.", "steps": 3}),
            "output.mime_type": "application/json",
        },
    ),
    _span(
        "t-agent",
        "a-ret",
        "a-root",
        "retrieve",
        "RETRIEVER",
        21,
        {
            "input.value": "X200 X300 price",
            **_docs("retrieval.documents", DOC_X200, DOC_COLORS, DOC_X300),
        },
    ),
    _span(
        "t-agent",
        "a-rerank",
        "a-ret",
        "rerank",
        "RERANKER",
        22,
        {
            "reranker.query": "X200 X300 price",
            **_docs("reranker.input_documents", DOC_X200, DOC_COLORS, DOC_X300),
            **_docs("reranker.output_documents", DOC_X300, DOC_X200),
        },
    ),
    _span(
        "t-agent",
        "a-tool",
        "a-root",
        "price_lookup",
        "TOOL",
        23,
        {"input.value": json.dumps({"sku": "X300"}), "output.value": json.dumps({"price": 349})},
    ),
    _span(
        "t-agent",
        "a-tool-empty",
        "a-root",
        "notify",
        "TOOL",
        24,
        {"input.value": "ping", "output.value": ""},
    ),
    _span(
        "t-json",
        "j-root",
        None,
        "chat",
        "CHAIN",
        30,
        {
            "session.id": "s-1",
            "input.value": json.dumps(CHAT_REQUEST),
            "input.mime_type": "application/json",
        },
        status="ERROR",
    ),
    _span(
        "t-json",
        "j-ret",
        "j-root",
        "retrieve",
        "RETRIEVER",
        31,
        {"input.value": "X200 charging", **_docs("retrieval.documents", DOC_BATTERY)},
    ),
]


# --- attribute shapes --------------------------------------------------------------------

_LISTS = re.compile(
    r"^(retrieval\.documents|reranker\.input_documents|reranker\.output_documents"
    r"|llm\.input_messages|llm\.output_messages)\.(\d+)\.(.+)$"
)


def nested(flat: dict[str, Any]) -> dict[str, Any]:
    """``{"a.b.0.c": 1}`` -> ``{"a": {"b": [{"c": 1}]}}``: every dot a level, indices lists."""
    root: dict[str, Any] = {}
    for key, value in flat.items():
        node: Any = root
        parts = key.split(".")
        for part, following in zip(parts, parts[1:], strict=False):
            if isinstance(node, list):
                index = int(part)
                while len(node) <= index:
                    node.append([] if following.isdigit() else {})
                node = node[index]
            else:
                node = node.setdefault(part, [] if following.isdigit() else {})
        node[parts[-1]] = value
    return root


def phoenix(flat: dict[str, Any]) -> dict[str, Any]:
    """Phoenix's dataframe form: dotted keys, lists of {"document.content": ...} records."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        match = _LISTS.match(key)
        if match is None:
            out[key] = value
            continue
        items = out.setdefault(match[1], [])
        while len(items) <= int(match[2]):
            items.append({})
        items[int(match[2])][match[3]] = value
    return out


def otlp_attributes(flat: dict[str, Any]) -> list[dict[str, Any]]:
    """OTLP/JSON's ``[{"key": ..., "value": {"stringValue": ...}}]``."""

    def wrap(value: Any) -> dict[str, Any]:
        if isinstance(value, bool):
            return {"boolValue": value}
        if isinstance(value, int):
            return {"intValue": str(value)}
        if isinstance(value, float):
            return {"doubleValue": value}
        return {"stringValue": value}

    return [{"key": key, "value": wrap(value)} for key, value in flat.items()]


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _nanos(moment: datetime) -> str:
    return str(int(moment.timestamp()) * 10**9 + moment.microsecond * 1000)


# --- writers: each returns the path it wrote ---------------------------------------------


def write_jsonl_nested(directory: Path) -> Path:
    """JSONL, ``context`` object, ``span_kind`` field, fully nested attribute dicts."""
    path = directory / "spans.jsonl"
    lines = [
        json.dumps(
            {
                "name": s["name"],
                "context": {"trace_id": s["trace_id"], "span_id": s["span_id"]},
                "parent_id": s["parent_id"],
                "span_kind": s["kind"],
                "start_time": _iso(s["start"]),
                "end_time": _iso(s["end"]),
                "status_code": s["status"],
                "attributes": nested(s["attributes"]),
            }
        )
        for s in SPANS
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_json_dotted(directory: Path) -> Path:
    """JSON ``{"spans": [...]}``, top-level ids, dotted attribute keys, nanosecond ISO times."""
    path = directory / "spans.json"
    spans = [
        {
            "trace_id": s["trace_id"],
            "span_id": s["span_id"],
            "parent_id": s["parent_id"],
            "name": s["name"],
            "start_time": s["start"].strftime("%Y-%m-%dT%H:%M:%S.%f123Z"),  # nanoseconds
            "status": {"status_code": s["status"]},
            "attributes": s["attributes"],
        }
        for s in SPANS
    ]
    path.write_text(json.dumps({"spans": spans}, indent=1), encoding="utf-8")
    return path


def write_json_phoenix_list(directory: Path) -> Path:
    """JSON list, ``context`` object, Phoenix's semi-nested attributes."""
    path = directory / "phoenix.json"
    spans = [
        {
            "name": s["name"],
            "context": {"trace_id": s["trace_id"], "span_id": s["span_id"]},
            "parent_id": s["parent_id"],
            "span_kind": s["kind"],
            "start_time": _iso(s["start"]),
            "status_code": s["status"],
            "attributes": phoenix(s["attributes"]),
        }
        for s in SPANS
    ]
    path.write_text(json.dumps(spans), encoding="utf-8")
    return path


def write_json_otlp(directory: Path) -> Path:
    """OTLP/JSON request: ``resourceSpans`` / ``scopeSpans``, camelCase, key/value lists."""
    codes = {"OK": "STATUS_CODE_OK", "ERROR": "STATUS_CODE_ERROR"}
    spans = [
        {
            "traceId": s["trace_id"],
            "spanId": s["span_id"],
            "parentSpanId": s["parent_id"] or "",
            "name": s["name"],
            "kind": 1,
            "startTimeUnixNano": _nanos(s["start"]),
            "endTimeUnixNano": _nanos(s["end"]),
            "status": {"code": codes[s["status"]]},
            "attributes": otlp_attributes(s["attributes"]),
        }
        for s in SPANS
    ]
    request = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}
    path = directory / "otlp.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    return path


def _phoenix_row(s: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": s["name"],
        "span_kind": s["kind"],
        "parent_id": s["parent_id"],
        "start_time": s["start"],
        "end_time": s["end"],
        "status_code": s["status"],
        "context.span_id": s["span_id"],
        "context.trace_id": s["trace_id"],
    }


def write_parquet_phoenix(directory: Path) -> Path:
    """Phoenix ``get_spans_dataframe().to_parquet()``: ``attributes.*`` columns, list columns."""
    rows = [
        {**_phoenix_row(s), **{f"attributes.{k}": v for k, v in phoenix(s["attributes"]).items()}}
        for s in SPANS
    ]
    path = directory / "phoenix.parquet"
    pl.DataFrame(rows, infer_schema_length=None).write_parquet(path)
    return path


def write_parquet_dotted(directory: Path) -> Path:
    """Fully flattened columns: ``attributes.retrieval.documents.0.document.content``."""
    rows = [
        {**_phoenix_row(s), **{f"attributes.{k}": v for k, v in s["attributes"].items()}}
        for s in SPANS
    ]
    path = directory / "dotted.parquet"
    pl.DataFrame(rows, infer_schema_length=None).write_parquet(path)
    return path


def write_parquet_struct(directory: Path) -> Path:
    """One ``attributes`` struct column holding the nested form, ``context`` struct ids."""
    rows = [
        {
            "context": {"trace_id": s["trace_id"], "span_id": s["span_id"]},
            "parent_id": s["parent_id"],
            "name": s["name"],
            "start_time": s["start"],
            "status_code": s["status"],
            "attributes": nested(s["attributes"]),
        }
        for s in SPANS
    ]
    path = directory / "struct.parquet"
    pl.DataFrame(rows, infer_schema_length=None).write_parquet(path)
    return path


def write_parquet_json_attributes(directory: Path) -> Path:
    """An ``attributes`` column of JSON text (what many ad-hoc exports do)."""
    rows = [{**_phoenix_row(s), "attributes": json.dumps(s["attributes"])} for s in SPANS]
    path = directory / "json_attributes.parquet"
    pl.DataFrame(rows).write_parquet(path)
    return path


WRITERS = [
    write_jsonl_nested,
    write_json_dotted,
    write_json_phoenix_list,
    write_json_otlp,
    write_parquet_phoenix,
    write_parquet_dotted,
    write_parquet_struct,
    write_parquet_json_attributes,
]
