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
``.json.gz`` / ``.jsonl.gz`` / ``.ndjson.gz``
    The same, gzipped (decompressed while read). Parquet compresses itself: no ``.gz``.

An export split over several files loads as one (a trace may span files): pass a glob
(``**`` recurses), a directory (its supported files, not its subdirectories) or a list of
paths. Files are read in sorted path order (a list: in its own order), so equal start
times and repeated spans resolve the same way on every machine::

    fk.traces.load("exports/**/*.jsonl.gz")

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

Where each part lives:

- ``_read``: files (plain or gzipped; globs, directories, lists), frames, JSON / JSONL
  and OTLP records into spans (``_Span``), attributes flattened to dotted keys;
  :class:`TraceFormatError`.
- ``_assemble``: spans grouped into traces, and the trace- and span-level rows.
- ``_text``: text and chat messages out of JSON ``input.value`` / ``output.value``.
"""

from __future__ import annotations

import os
from typing import Any, Literal

import polars as pl

from framekit._errors import InputError
from framekit.traces._assemble import _group, _span_rows, _trace_row
from framekit.traces._read import TraceFormatError, _read

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


def load(
    source: str | os.PathLike[str] | Any,
    level: Literal["trace", "span"] = "trace",
) -> pl.DataFrame:
    """Load a Phoenix / OpenTelemetry span export as one row per trace or per retrieval step.

    Parameters
    ----------
    source
        Path to a ``.parquet``, ``.json`` or ``.jsonl`` span export (JSON ones may be
        gzipped: ``.jsonl.gz``), a glob, a directory or a list of paths read as one export,
        or a pandas or polars DataFrame with one span per row (Phoenix's
        ``get_spans_dataframe()``).
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
        Unknown extension, malformed JSON (with its line), unreadable gzip, a glob matching
        no file, a span without trace or span id.

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
        raise InputError(f"level must be 'trace' or 'span', not {level!r}")
    traces = _group(_read(source))
    if level == "trace":
        rows = [_trace_row(spans) for spans in traces]
        return pl.DataFrame(rows, schema=TRACE_SCHEMA, orient="row")
    steps = [row for spans in traces for row in _span_rows(spans)]
    return pl.DataFrame(steps, schema=SPAN_SCHEMA, orient="row")
