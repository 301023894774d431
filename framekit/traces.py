"""Load OpenInference span exports (Phoenix, OpenTelemetry) as tables ready to evaluate.

``fk.traces.load(source, level="trace")`` reads spans written by Phoenix or an
OpenTelemetry exporter and returns a polars DataFrame whose columns match framekit's
canonical fields (``input``, ``output``, ``context``, ``history``), so that a trace file
goes straight into :func:`framekit.evaluate_dataframe` without a mapping.

Files
-----
``.parquet`` / ``.pq``
    One span per row: Phoenix's ``get_spans_dataframe()`` saved with ``to_parquet``
    (columns ``context.trace_id``, ``context.span_id``, ``attributes.input.value``,
    ``attributes.retrieval.documents`` ...) or fully flattened columns
    (``attributes.retrieval.documents.0.document.content``), or an ``attributes`` column
    holding a struct or a JSON string.
``.json``
    A list of spans, ``{"spans": [...]}``, ``{"data": [...]}`` (Phoenix REST) or an OTLP
    request ``{"resourceSpans": [{"scopeSpans": [{"spans": [...]}]}]}``.
``.jsonl`` / ``.ndjson``
    One span (or one OTLP request, as the OpenTelemetry Collector file exporter writes)
    per line.

A pandas or polars DataFrame of spans (Phoenix's ``get_spans_dataframe()``) is accepted too.

Span fields
-----------
Trace id: ``context.trace_id``, ``trace_id`` or ``traceId``; span id: ``context.span_id``,
``span_id`` or ``spanId``; parent: ``parent_id``, ``parentSpanId`` (null or ``""`` for a
root); ``name``; kind: the ``openinference.span.kind`` attribute, else ``span_kind``;
``start_time`` (ISO string, datetime, or ``startTimeUnixNano``); status: ``status_code``
or ``status.code`` (``OK``, ``ERROR``, ``UNSET``).

Attributes may be a nested dict (``{"input": {"value": ...}}``), a dict of dotted keys
(``{"input.value": ...}``), Phoenix's mix (``{"retrieval.documents": [{"document.content":
...}]}``), ``attributes.*`` columns, or OTLP's ``[{"key": ..., "value": {"stringValue":
...}}]``; all are flattened to OpenInference's dotted keys before reading:

- ``openinference.span.kind``, ``session.id``
- ``input.value``, ``input.mime_type``, ``output.value``, ``output.mime_type``
- ``retrieval.documents.N.document.content`` (RETRIEVER)
- ``reranker.output_documents.N.document.content``, ``reranker.query`` (RERANKER)
- ``llm.input_messages.N.message.role`` / ``.message.content`` (or
  ``.message.contents.M.message_content.text``), and the same for ``llm.output_messages``

Rules
-----
Text of a value
    ``input.value`` / ``output.value`` is used as is, unless it is a JSON object (its
    mime type is ``application/json``, or missing and the text parses as an object). Then
    the text is taken from, in order: a ``messages`` list (the last user message for an
    input, the last assistant message for an output), OpenAI ``choices[0].message``, then
    the first present key of ``query, question, input, prompt, user_input, text, content,
    message`` (input) or ``output, answer, response, result, text, content, message``
    (output), recursively. When nothing matches (tool arguments such as
    ``{"sku": "X300"}``), the JSON string is kept.
The last LLM span
    The LLM span that started last among those carrying input (or output) messages.
``level="trace"`` (one row per trace)
    The root is the span without a parent; in a partial export, the earliest span whose
    parent is not in the file. ``input``: the root's ``input.value`` text unless blank,
    else the last user message of the last LLM span. ``output``: the root's
    ``output.value`` text unless blank, else the last assistant message of the last LLM
    span, else that span's ``output.value``. ``history``: the messages of the last LLM
    span (or, when no LLM span has messages, the root's JSON ``messages``) that come
    before its last user message, leaving out ``system``/``developer`` messages and empty
    ones (tool calls). ``context``: the reranked documents when the trace has a RERANKER
    span, else the documents of its RETRIEVER spans; in start order, repeats dropped.
    ``session_id``: the root's ``session.id``, else the first span's that has one.
    ``status_code`` and ``start_time``: the root's.
``level="span"`` (one row per retrieval step)
    RETRIEVER spans (context = ``retrieval.documents``), RERANKER spans (context =
    ``reranker.output_documents``) and TOOL spans with a non-empty ``output.value``
    (context = ``[output.value]``). ``input`` is the trace's input (the user's question,
    as at trace level); ``query`` is the span's own ``input.value`` text (a reranker
    without one: ``reranker.query``).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Literal

import polars as pl

from framekit._errors import InputError

__all__ = ["SPAN_SCHEMA", "TRACE_SCHEMA", "TraceFormatError", "load"]

_STR = pl.String()
_MESSAGE = pl.Struct({"role": _STR, "content": _STR})
_TIME = pl.Datetime("us", "UTC")

#: Columns and dtypes of ``load(..., level="trace")``.
TRACE_SCHEMA = pl.Schema(
    {
        "trace_id": _STR,
        "span_id": _STR,
        "session_id": _STR,
        "start_time": _TIME,
        "input": _STR,
        "output": _STR,
        "history": pl.List(_MESSAGE),
        "context": pl.List(_STR),
        "status_code": _STR,
    }
)
#: Columns and dtypes of ``load(..., level="span")``.
SPAN_SCHEMA = pl.Schema(
    {
        "trace_id": _STR,
        "span_id": _STR,
        "span_kind": _STR,
        "name": _STR,
        "input": _STR,
        "query": _STR,
        "context": pl.List(_STR),
        "start_time": _TIME,
    }
)


class TraceFormatError(InputError):
    """A span export that cannot be read: names the file and what is missing or malformed."""


_TRACE_ID = ("context.trace_id", "trace_id", "traceId", "context.traceId")
_SPAN_ID = ("context.span_id", "span_id", "spanId", "context.spanId")
_PARENT_ID = ("parent_id", "parentSpanId", "parent_span_id", "parentId")
_START = ("start_time", "startTimeUnixNano", "start_time_unix_nano", "startTime")
_STATUS = ("status_code", "status.code", "status.status_code", "status")
_SKIP = frozenset({"attributes", "events", "links", "resource"})
# Attributes that are JSON text by convention: a decoded object is re-encoded, not flattened.
_JSON_LEAVES = frozenset({"input.value", "output.value"})
_STATUS_NAMES = {"0": "UNSET", "1": "OK", "2": "ERROR"}
_ROLES = {
    "human": "user", "humanmessage": "user", "ai": "assistant", "aimessage": "assistant",
    "model": "assistant", "systemmessage": "system", "toolmessage": "tool",
}  # fmt: skip
_NOT_HISTORY = frozenset({"system", "developer"})
_INPUT_KEYS = ("query", "question", "input", "prompt", "user_input", "text", "content", "message")
_OUTPUT_KEYS = ("output", "answer", "response", "result", "text", "content", "message")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# (units per second, smallest plausible value): a 2001+ date in ns is above 1e18, in s 1e9
_UNITS = ((10**9, 1e17), (10**6, 1e14), (10**3, 1e11), (1, 0.0))


@dataclass
class _Span:
    trace_id: str
    span_id: str
    parent_id: str | None
    name: str | None
    kind: str
    start: datetime | None
    status: str | None
    attrs: dict[str, Any]  # OpenInference dotted keys -> scalar (or list of scalars)
    order: int  # position in the file, the tie-breaker everywhere

    @property
    def sort_key(self) -> tuple[bool, datetime, int]:
        return (self.start is None, self.start or _EPOCH, self.order)


def load(
    source: str | os.PathLike[str] | Any,
    level: Literal["trace", "span"] = "trace",
) -> pl.DataFrame:
    """Load a Phoenix / OpenTelemetry span export as one row per trace or per retrieval step.

    Parameters
    ----------
    source
        Path to a ``.parquet``, ``.json`` or ``.jsonl`` span export, or a pandas or
        polars DataFrame with one span per row (Phoenix's ``get_spans_dataframe()``).
    level
        ``"trace"``: one row per trace with the columns of :data:`TRACE_SCHEMA`
        (``input``, ``output``, ``history``, ``context`` ...). ``"span"``: one row per
        RETRIEVER, RERANKER or informative TOOL span with the columns of
        :data:`SPAN_SCHEMA` (``input`` is the user's question, ``query`` the span's own).

    Returns
    -------
    polars.DataFrame
        Rows in start-time order; the dtypes of the schema even when empty.

    Raises
    ------
    TraceFormatError
        Unknown extension, malformed JSON (with its line), a span without trace or span id.

    Examples
    --------
    >>> from importlib.resources import files
    >>> import framekit.traces as traces
    >>> path = files("framekit") / "data" / "sample_traces.jsonl"
    >>> df = traces.load(path)
    >>> df.columns
    ['trace_id', 'span_id', 'session_id', 'start_time', 'input', 'output', 'history', 'context', 'status_code']
    >>> traces.load(path, level="span").select("span_kind", "query").head(2)
    shape: (2, 2)
    ┌───────────┬─────────────────────────────────┐
    │ span_kind ┆ query                           │
    │ ---       ┆ ---                             │
    │ str       ┆ str                             │
    ╞═══════════╪═════════════════════════════════╡
    │ RETRIEVER ┆ When was the Eiffel Tower buil… │
    │ RETRIEVER ┆ Eiffel Tower height             │
    └───────────┴─────────────────────────────────┘
    """
    if level not in ("trace", "span"):
        raise ValueError(f"level must be 'trace' or 'span', not {level!r}")
    traces = _group(_read(source))
    if level == "trace":
        rows = [_trace_row(spans) for spans in traces]
        return pl.DataFrame(rows, schema=TRACE_SCHEMA, orient="row")
    steps = [row for spans in traces for row in _span_rows(spans)]
    return pl.DataFrame(steps, schema=SPAN_SCHEMA, orient="row")


# --- reading -------------------------------------------------------------------------------


def _read(source: Any) -> list[_Span]:
    if isinstance(source, pl.DataFrame):
        return _from_frame(source, "DataFrame")
    if type(source).__module__.startswith("pandas"):
        if source.index.name is not None and source.index.name not in source.columns:
            source = source.reset_index()  # Phoenix's query_spans() keeps the span id there
        _check_columns([str(c) for c in source.columns], "DataFrame")
        records = source.to_dict("records")
        return [_span(row, f"row {i}", "DataFrame", i) for i, row in enumerate(records)]
    path = Path(os.fspath(source)) if not hasattr(source, "read_bytes") else source
    name = str(path)
    suffix = Path(path.name).suffix.lower()
    if suffix not in (".parquet", ".pq", ".json", ".jsonl", ".ndjson"):
        raise TraceFormatError(
            f"{name}: unknown extension {suffix or '(none)'!r}; "
            "expected .parquet, .json or .jsonl (.ndjson)"
        )
    if not path.is_file():
        raise FileNotFoundError(f"{name}: no such span export")
    if suffix in (".parquet", ".pq"):
        try:
            frame = pl.read_parquet(path.read_bytes())
        except Exception as exc:  # polars raises several types for a corrupt file
            raise TraceFormatError(f"{name}: not a readable Parquet file ({exc})") from exc
        return _from_frame(frame, name)
    text = path.read_bytes().decode("utf-8-sig")
    records = _jsonl_records(text, name) if suffix != ".json" else _json_records(text, name)
    return [_span(rec, where, name, i) for i, (where, rec) in enumerate(records)]


def _from_frame(frame: pl.DataFrame, name: str) -> list[_Span]:
    columns = list(frame.columns)
    if isinstance(context := frame.schema.get("context"), pl.Struct):
        columns += [f"context.{f.name}" for f in context.fields]
    _check_columns(columns, name)
    return [_span(row, f"row {i}", name, i) for i, row in enumerate(frame.iter_rows(named=True))]


def _check_columns(columns: list[str], name: str) -> None:
    if not set(columns) & set(_SPAN_ID):
        shown = ", ".join(columns[:12]) + (" ..." if len(columns) > 12 else "")
        raise TraceFormatError(
            f"{name}: no span id column (expected one of {', '.join(_SPAN_ID)}); "
            f"columns: {shown or '(none)'}"
        )


def _json_records(text: str, name: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(
            f"{name}: malformed JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    if isinstance(doc, dict):
        doc = next((doc[k] for k in ("spans", "data") if isinstance(doc.get(k), list)), doc)
    items = doc if isinstance(doc, list) else [doc]
    single = isinstance(doc, dict) and any(k in doc for k in ("context", *_SPAN_ID))
    if isinstance(doc, dict) and not (_is_otlp(doc) or single):
        raise TraceFormatError(
            f'{name}: expected a list of spans, {{"spans": [...]}} or OTLP '
            f'{{"resourceSpans": [...]}}; found an object with keys {sorted(doc)[:8]}'
        )
    for i, item in enumerate(items):
        for span in _expand(item, f"span {i}", name):
            yield f"span {i}", span


def _jsonl_records(text: str, name: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceFormatError(
                f"{name}: malformed JSON on line {lineno} (column {exc.colno}): {exc.msg}"
            ) from exc
        for span in _expand(item, f"line {lineno}", name):
            yield f"line {lineno}", span


def _is_otlp(item: Mapping[str, Any]) -> bool:
    return "resourceSpans" in item or "resource_spans" in item


def _expand(item: Any, where: str, name: str) -> Iterator[Mapping[str, Any]]:
    """Yield the spans of one record: itself, or every span of an OTLP request."""
    if not isinstance(item, Mapping):
        raise TraceFormatError(
            f"{name}: {where}: expected a span object, found {type(item).__name__}"
        )
    if not _is_otlp(item):
        yield item
        return
    for resource in item.get("resourceSpans") or item.get("resource_spans") or []:
        for scope in resource.get("scopeSpans") or resource.get("scope_spans") or []:
            yield from scope.get("spans") or []


def _span(record: Mapping[str, Any], where: str, name: str, order: int) -> _Span:
    top: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    for key, value in record.items():
        if value is None:  # most cells of a wide Phoenix table
            continue
        if key == "attributes":
            _flatten(_decode_attributes(value, where, name), "", attrs)
        elif key.startswith("attributes."):
            _flatten(value, key[11:], attrs)
        elif key not in _SKIP:
            _flatten(value, key, top)
    trace_id, span_id = _pick(top, _TRACE_ID), _pick(top, _SPAN_ID)
    for value, what, keys in ((trace_id, "trace", _TRACE_ID), (span_id, "span", _SPAN_ID)):
        if value is None or value == "":
            raise TraceFormatError(
                f"{name}: {where}: span has no {what} id (expected one of {', '.join(keys)})"
            )
    parent = _pick(top, _PARENT_ID)
    kind = attrs.get("openinference.span.kind") or top.get("span_kind") or "UNKNOWN"
    return _Span(
        trace_id=str(trace_id),
        span_id=str(span_id),
        parent_id=str(parent) if parent not in (None, "") else None,
        name=None if top.get("name") is None else str(top["name"]),
        kind=str(kind).upper(),
        start=_time(_pick(top, _START), where, name),
        status=_status(_pick(top, _STATUS)),
        attrs=attrs,
        order=order,
    )


def _decode_attributes(value: Any, where: str, name: str) -> Any:
    if isinstance(value, str):  # an attributes column stored as JSON text
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise TraceFormatError(f"{name}: {where}: attributes are not valid JSON") from exc
    if isinstance(value, list) and all(isinstance(kv, Mapping) and "key" in kv for kv in value):
        return {kv["key"]: _any_value(kv.get("value")) for kv in value}  # OTLP key/value list
    return value


def _any_value(value: Any) -> Any:
    """Unwrap an OTLP ``AnyValue`` ({"stringValue": ...}, {"arrayValue": {"values": ...}})."""
    if not isinstance(value, Mapping) or not value:
        return value
    kind, inner = next(iter(value.items()))
    kind = kind.replace("_", "").lower()
    if kind == "arrayvalue":
        return [_any_value(v) for v in (inner or {}).get("values", [])]
    if kind == "kvlistvalue":
        return {kv["key"]: _any_value(kv.get("value")) for kv in (inner or {}).get("values", [])}
    if kind == "intvalue":
        return int(inner)
    return inner


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    """Flatten nested dicts and lists of dicts into OpenInference dotted keys."""
    if value is None:
        return
    if isinstance(value, str):  # most values: checked first, this runs once per cell
        out[prefix] = value
    elif isinstance(value, (Mapping, list, tuple)):
        if prefix in _JSON_LEAVES:
            out[prefix] = json.dumps(value)
        elif isinstance(value, Mapping):
            for key, inner in value.items():
                _flatten(inner, f"{prefix}.{key}" if prefix else str(key), out)
        elif any(isinstance(v, (Mapping, list, tuple)) for v in value):
            for i, inner in enumerate(value):
                _flatten(inner, f"{prefix}.{i}", out)
        else:
            out[prefix] = list(value)
    elif hasattr(value, "tolist"):  # numpy arrays and scalars from pandas
        _flatten(value.tolist(), prefix, out)
    elif not _missing(value):
        out[prefix] = value


def _missing(value: Any) -> bool:
    # pandas fills the cells of spans that lack an attribute with NaN, NaT or NA
    if isinstance(value, float):
        return math.isnan(value)
    return type(value).__name__ in ("NaTType", "NAType")


def _pick(values: Mapping[str, Any], keys: Iterable[str]) -> Any:
    return next((values[k] for k in keys if k in values), None)


def _time(value: Any, where: str, name: str) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return aware.astimezone(timezone.utc)
    text = str(value).strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        # Unix time in s, ms, us or ns: OTLP writes nanoseconds, other tools the rest
        number = float(text)
        per_second = next(p for p, floor in _UNITS if number >= floor)
        if text.isdigit():  # integer arithmetic: a float loses the microseconds of ns times
            return _EPOCH + timedelta(microseconds=int(text) * 10**6 // per_second)
        return datetime.fromtimestamp(number / per_second, tz=timezone.utc)
    # Python 3.10's fromisoformat takes neither "Z" nor fractions other than 3 or 6 digits
    iso = re.sub(r"\.(\d+)", _micros, text.replace("Z", "+00:00").replace("z", "+00:00"))
    try:
        return _time(datetime.fromisoformat(iso), where, name)
    except ValueError:
        raise TraceFormatError(f"{name}: {where}: unreadable start_time {text!r}") from None


def _micros(fraction: re.Match[str]) -> str:
    return "." + fraction[1][:6].ljust(6, "0")


def _status(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).upper().rsplit(".", 1)[-1].removeprefix("STATUS_CODE_")
    return _STATUS_NAMES.get(text, text)


# --- assembling ----------------------------------------------------------------------------


def _group(spans: list[_Span]) -> list[list[_Span]]:
    """Spans per trace (duplicates dropped), traces ordered by their root's start."""
    by_trace: dict[str, dict[str, _Span]] = {}
    for span in spans:
        by_trace.setdefault(span.trace_id, {}).setdefault(span.span_id, span)
    traces = [sorted(group.values(), key=lambda s: s.sort_key) for group in by_trace.values()]
    return sorted(traces, key=lambda t: _root(t).sort_key)


def _root(spans: list[_Span]) -> _Span:
    ids = {s.span_id for s in spans}
    # A partial export can lose the root: then the earliest span whose parent is absent.
    return next(
        (s for s in spans if s.parent_id is None),
        next((s for s in spans if s.parent_id not in ids), spans[0]),
    )


def _trace_row(spans: list[_Span]) -> tuple[Any, ...]:
    root = _root(spans)
    question, history = _question_and_history(spans, root)
    session = root.attrs.get("session.id") or _pick_attr(spans, "session.id")
    return (
        root.trace_id,
        root.span_id,
        None if session is None else str(session),
        root.start,
        question,
        _answer(spans, root),
        history,
        _trace_context(spans),
        root.status,
    )


def _span_rows(spans: list[_Span]) -> Iterator[tuple[Any, ...]]:
    question: str | None = None
    for span in spans:
        if span.kind == "RETRIEVER":
            context = _documents(span.attrs, "retrieval.documents")
        elif span.kind == "RERANKER":
            context = _documents(span.attrs, "reranker.output_documents")
        elif span.kind == "TOOL" and str(span.attrs.get("output.value") or "").strip():
            context = [str(span.attrs["output.value"])]
        else:
            continue
        if question is None:  # computed once per trace, only for traces with a step
            question = _question_and_history(spans, _root(spans))[0] or ""
        query = _value_text(span.attrs, "input")
        if query is None and span.kind == "RERANKER":
            query = span.attrs.get("reranker.query")
        row = (span.trace_id, span.span_id, span.kind, span.name, question or None, query)
        yield (*row, context, span.start)


def _pick_attr(spans: list[_Span], key: str) -> Any:
    return next((s.attrs[key] for s in spans if s.attrs.get(key) is not None), None)


def _last_llm(spans: list[_Span], direction: str) -> list[tuple[str | None, str]] | None:
    for span in reversed(spans):
        if span.kind == "LLM" and (messages := _messages(span.attrs, direction)):
            return messages
    return None


def _question_and_history(
    spans: list[_Span], root: _Span
) -> tuple[str | None, list[dict[str, str | None]]]:
    messages = _last_llm(spans, "input")
    if messages is None:
        messages = _json_messages(root.attrs.get("input.value"))
    last_user = max((i for i, (role, _) in enumerate(messages) if role == "user"), default=None)
    question = _value_text(root.attrs, "input")
    if not (question and question.strip()) and last_user is not None:
        question = messages[last_user][1]
    earlier = messages[:last_user] if last_user is not None else []
    history = [
        {"role": role, "content": content}
        for role, content in earlier
        if role not in _NOT_HISTORY and content.strip()
    ]
    return question, history


def _answer(spans: list[_Span], root: _Span) -> str | None:
    answer = _value_text(root.attrs, "output")
    if answer and answer.strip():
        return answer
    outputs = _last_llm(spans, "output")
    if outputs:
        replies = [c for role, c in outputs if role in (None, "assistant") and c.strip()]
        return replies[-1] if replies else outputs[-1][1]
    llm = next((s for s in reversed(spans) if s.kind == "LLM"), None)
    return None if llm is None else _value_text(llm.attrs, "output")


def _trace_context(spans: list[_Span]) -> list[str]:
    # The reranker's output is what the generator saw; without one, all retrieved documents.
    kind, key = ("RERANKER", "reranker.output_documents")
    if not any(s.kind == kind for s in spans):
        kind, key = ("RETRIEVER", "retrieval.documents")
    docs = (doc for s in spans if s.kind == kind for doc in _documents(s.attrs, key))
    return list(dict.fromkeys(docs))


def _indexed(attrs: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """``{prefix}.N.rest`` keys as {N: {rest: value}}."""
    items: dict[int, dict[str, Any]] = {}
    start = len(prefix) + 1
    for key, value in attrs.items():
        if key.startswith(prefix) and key[len(prefix) : start] == ".":
            index, _, rest = key[start:].partition(".")
            if index.isdigit():
                items.setdefault(int(index), {})[rest] = value
    return dict(sorted(items.items()))


def _documents(attrs: Mapping[str, Any], prefix: str) -> list[str]:
    docs = (item.get("document.content") for item in _indexed(attrs, prefix).values())
    return [str(doc) for doc in docs if doc is not None and str(doc).strip()]


def _messages(attrs: Mapping[str, Any], direction: str) -> list[tuple[str | None, str]]:
    messages = []
    for fields in _indexed(attrs, f"llm.{direction}_messages").values():
        content = fields.get("message.content")
        if content is None:  # multimodal form: message.contents.M.message_content.text
            parts = _indexed(fields, "message.contents").values()
            content = "\n".join(
                str(p["message_content.text"]) for p in parts if p.get("message_content.text")
            )
        messages.append((_role(fields.get("message.role")), str(content)))
    return messages


def _role(role: Any) -> str | None:
    if role is None:
        return None
    text = str(role).lower()
    return _ROLES.get(text, text)


# --- text out of JSON values ---------------------------------------------------------------


def _value_text(attrs: Mapping[str, Any], which: str) -> str | None:
    """The text of ``input.value`` / ``output.value`` (see "Text of a value" above)."""
    value = attrs.get(f"{which}.value")
    if value is None:
        return None
    text = str(value)
    mime = str(attrs.get(f"{which}.mime_type") or "").lower()
    if not text.lstrip().startswith("{") or (mime and "json" not in mime):
        return text
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return text
    found = _json_text(parsed, "user" if which == "input" else "assistant", depth=0)
    return found if found is not None else text


def _json_text(value: Any, role: str, depth: int) -> str | None:
    if isinstance(value, str):
        return value
    if depth > 4 or not isinstance(value, Mapping):
        return None
    if isinstance(value.get("messages"), list):
        said = [c for r, c in _message_list(value["messages"]) if r == role and c.strip()]
        if said:
            return said[-1]
    choices = value.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        message = choices[0].get("message") or {}
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            return content
    for key in _INPUT_KEYS if role == "user" else _OUTPUT_KEYS:
        if key in value and (found := _json_text(value[key], role, depth + 1)) is not None:
            return found
    return None


def _json_messages(value: Any) -> list[tuple[str | None, str]]:
    """The ``messages`` of a JSON ``input.value`` (the root's request), else nothing."""
    if not isinstance(value, str) or not value.lstrip().startswith("{"):
        return []
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        return []
    found = parsed.get("messages") if isinstance(parsed, dict) else None
    return _message_list(found) if isinstance(found, list) else []


def _message_list(items: list[Any]) -> list[tuple[str | None, str]]:
    """Chat messages as (role, text): OpenAI dicts, ``{"type": "human"}`` or LangChain's."""
    if items and all(isinstance(i, list) for i in items):
        items = [m for batch in items for m in batch]  # LangChain batches: [[msg, ...]]
    messages = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kwargs = item.get("kwargs")
        fields: Mapping[str, Any] = kwargs if isinstance(kwargs, Mapping) else item
        role = fields.get("role") or fields.get("type")
        if role is None and isinstance(item.get("id"), list) and item["id"]:
            role = item["id"][-1]  # LangChain's serialized class path, e.g. [..., "HumanMessage"]
        messages.append((_role(role), _content_text(fields.get("content"))))
    return messages


def _content_text(content: Any) -> str:
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        texts = (p.get("text") if isinstance(p, Mapping) else p for p in content)
        return "\n".join(str(t) for t in texts if isinstance(t, str))
    return "" if content is None else str(content)
