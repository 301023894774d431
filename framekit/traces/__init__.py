"""Load span exports (OpenInference / Phoenix, OpenTelemetry GenAI) as tables to evaluate,
and send the scores back where the traces live.

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

OpenTelemetry GenAI conventions
-------------------------------
A span with ``gen_ai.*`` (or OpenLLMetry's ``traceloop.*``) attributes is read by the
GenAI semantic conventions; the convention is decided span by span, so one file may mix
both. Its attributes are translated to the OpenInference fields above (a field the span
already has in OpenInference form, as Phoenix writes after converting GenAI spans, wins):

- kind from ``gen_ai.operation.name``: ``chat`` / ``text_completion`` /
  ``generate_content`` -> LLM, ``execute_tool`` -> TOOL, ``invoke_agent`` /
  ``create_agent`` -> AGENT, ``retrieval`` -> RETRIEVER, ``embeddings``; else from
  ``traceloop.span.kind`` (``workflow`` / ``task`` -> CHAIN, ``agent``, ``tool``); a span
  with messages or ``gen_ai.request.model`` and no operation is an LLM span.
- messages, current form: ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON
  ``[{"role", "parts": [{"type": "text", "content"}, {"type": "tool_call", "name"},
  {"type": "tool_call_response", "response"}]}]``), ``gen_ai.system_instructions``
  (a system message first); older form: ``gen_ai.prompt.N.role`` / ``.content`` and
  ``gen_ai.completion.N.role`` / ``.content`` / ``.tool_calls.M.name``. On an AGENT or
  workflow span, the last user and assistant messages are its input and output.
- ``gen_ai.conversation.id`` -> ``session.id``.
- tools: ``gen_ai.tool.name`` (or ``traceloop.entity.name``) -> ``tool.name``,
  ``gen_ai.tool.call.arguments`` / ``gen_ai.tool.call.result`` -> ``input.value`` /
  ``output.value``; ``gen_ai.tool.definitions`` -> ``llm.tools``.
- retrieval: ``gen_ai.retrieval.query.text`` -> ``input.value``,
  ``gen_ai.retrieval.documents`` (JSON ``[{"id", "content"}]`` or strings) -> documents.
- OpenLLMetry's ``traceloop.entity.input`` / ``.output`` -> ``input.value`` /
  ``output.value`` (JSON).

A ``gen_ai.*`` message or document list that is not the JSON the conventions define is a
:class:`TraceFormatError` naming the file, the line, the span and the attribute.

Large exports
-------------
JSONL and Parquet files are read record by record (a single ``.json`` document is parsed
whole), each span keeps only the attributes above, and past 100,000 spans the spans are
spilled to temporary files partitioned by trace id, so memory holds one partition at a
time plus the result (``benchmarks/bench_traces.py``). ``ConsoleSpanExporter`` dumps
(pretty-printed spans one after another, ``0x`` ids) read as JSON lines do.

Scores back out
---------------
:func:`to_annotations` (Phoenix's span-annotation shape), :func:`log_to_phoenix` (a
running Phoenix server, REST API) and :func:`to_otel_events` (``gen_ai.evaluation.result``
events parented to each span, OTLP/JSON or an OTLP endpoint).

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
``level="span"`` (one row per retrieval step, by Phoenix's Retrieval Relevance rules)
    RETRIEVER spans (context = ``retrieval.documents``), RERANKER spans (context =
    ``reranker.output_documents``), TOOL spans with a non-empty ``output.value``
    (context = ``[output.value]``) except side-effect tools (``skip_tools``, default
    :data:`SIDE_EFFECT_TOOLS`: ``send_email``, ``write_file`` ...), and LLM spans that
    declare or call a web-search tool (``web_search=True``; context = the span's answer,
    ``query`` its last user message). ``input`` is the trace's input (the user's question,
    as at trace level); ``query`` is the span's own ``input.value`` text (a reranker
    without one: ``reranker.query``).

Where each part lives:

- ``_read``: files (plain or gzipped; globs, directories, lists), frames, JSON / JSONL
  and OTLP records into spans (``_Span``), attributes flattened to dotted keys;
  :class:`TraceFormatError`.
- ``_assemble``: spans grouped into traces, and the trace- and span-level rows.
- ``_text``: text and chat messages out of JSON ``input.value`` / ``output.value``.
- ``_genai``: GenAI-convention attributes translated to OpenInference keys.
- ``_spill``: spans grouped by trace, spilled to disk past 100,000 spans.
- ``_phoenix`` / ``_otel`` / ``_scored``: scores out as Phoenix annotations and OTel events.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, Literal

import polars as pl

from framekit._errors import InputError, OTLPExportError, PhoenixError, TraceFormatError
from framekit.traces._assemble import (
    SIDE_EFFECT_TOOLS,
    WEB_SEARCH_TOOLS,
    StepRules,
    _root,
    _span_rows,
    _trace_row,
)
from framekit.traces._otel import EVENT_NAME, to_otel_events
from framekit.traces._phoenix import ANNOTATION_SCHEMA, log_to_phoenix, to_annotations
from framekit.traces._read import _read
from framekit.traces._scored import ExportResult
from framekit.traces._spill import grouped

__all__ = [
    "ANNOTATION_SCHEMA",
    "EVENT_NAME",
    "ExportResult",
    "OTLPExportError",
    "PhoenixError",
    "log_to_phoenix",
    "to_annotations",
    "to_otel_events",
    "SIDE_EFFECT_TOOLS",
    "SPAN_SCHEMA",
    "TRACE_SCHEMA",
    "WEB_SEARCH_TOOLS",
    "TraceFormatError",
    "load",
]

_STR = pl.String()
_KEY_TYPES = (pl.Boolean(), pl.Datetime("us", "UTC"), pl.Int64())  # a span's sort_key
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
    *,
    skip_tools: Iterable[str] | None = None,
    web_search: bool = True,
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
    skip_tools
        Span level: TOOL spans whose tool name (``tool.name``, ``gen_ai.tool.name``, else
        the span name) matches one of these shell-style patterns, case-insensitively, are
        not retrieval steps. Default :data:`SIDE_EFFECT_TOOLS` (``send_*``, ``write_*``,
        ``delete_*`` ...: tools that act rather than look something up, as in Phoenix's
        Retrieval Relevance); ``()`` keeps every tool with an output.
    web_search
        Span level: an LLM span that declares or calls a web-search tool
        (:data:`WEB_SEARCH_TOOLS`) is a retrieval step whose context is its answer and
        whose query is its last user message (Phoenix's Retrieval Relevance counts web
        search as retrieval). ``False`` leaves LLM spans out.

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
    if isinstance(skip_tools, str):
        raise InputError("skip_tools takes a list of tool names or patterns, not one string")
    rules = StepRules(
        skip_tools=SIDE_EFFECT_TOOLS if skip_tools is None else tuple(skip_tools),
        web_search=web_search,
    )
    schema = TRACE_SCHEMA if level == "trace" else SPAN_SCHEMA
    # Each batch of traces becomes a small frame at once (Arrow memory, not Python
    # objects), with its sort key as columns: the order is the root's start, then the span's.
    keys = pl.Schema({f"_k{i}": dtype for i, dtype in enumerate(_KEY_TYPES * 2)})
    parts = [pl.DataFrame(schema={**keys, **schema})]
    for batch in grouped(_read(source)):
        rows: list[tuple[Any, ...]] = []
        for spans in batch:
            first = _root(spans).sort_key
            if level == "trace":
                rows.append((*first, *first, *_trace_row(spans)))
            else:
                rows += [(*first, *s.sort_key, *row) for s, row in _span_rows(spans, rules)]
        if rows:
            parts.append(pl.DataFrame(rows, schema={**keys, **schema}, orient="row"))
    frame = pl.concat(parts, rechunk=True)
    return frame.sort(list(keys), maintain_order=True).drop(list(keys))
