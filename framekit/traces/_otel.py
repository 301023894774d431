"""Scores as OpenTelemetry ``gen_ai.evaluation.result`` events parented to each span."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import polars as pl

from framekit._dependencies import import_optional
from framekit._errors import InputError, OTLPExportError
from framekit._paths import check_regular_or_new
from framekit._urls import join_path
from framekit.traces._endpoint import Destination
from framekit.traces._phoenix import annotation_rows
from framekit.traces._scored import ExportResult, as_polars, span_column

EVENT_NAME = "gen_ai.evaluation.result"
_SCOPE = {"name": "framekit"}
_LINE_RECORDS = 1000  # records per OTLP request: one line of the JSONL file each


def _records(frame: pl.DataFrame, now: int) -> Iterator[dict[str, Any]]:
    """The OTLP/JSON log records (events) of an annotation frame."""
    for row in frame.iter_rows(named=True):
        trace = (row["metadata"] or {}).get("trace_id")
        attributes = {
            "gen_ai.evaluation.name": row["name"],
            "gen_ai.evaluation.score.value": row["score"],
            "gen_ai.evaluation.score.label": row["label"],
            "gen_ai.evaluation.explanation": row["explanation"],
            "framekit.evaluation.passed": (row["metadata"] or {}).get("passed"),
        }
        record: dict[str, Any] = {
            "timeUnixNano": str(now),
            "observedTimeUnixNano": str(now),
            "eventName": EVENT_NAME,
            "severityNumber": 9,  # INFO
            "spanId": row["span_id"],
            "attributes": [
                {"key": k, "value": _any_value(v)} for k, v in attributes.items() if v is not None
            ],
        }
        if trace:
            record["traceId"] = trace
        yield record


def _any_value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def _request(records: list[dict[str, Any]]) -> dict[str, Any]:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "framekit"}}]}
    scope_logs = [{"scope": _SCOPE, "logRecords": records}]
    return {"resourceLogs": [{"resource": resource, "scopeLogs": scope_logs}]}


_ID_DIGITS = (("span_id", "span", 16), ("trace_id", "trace", 32))


def _check_ids(frame: pl.DataFrame, source: pl.DataFrame) -> None:
    """OTLP ids are hex: 16 digits for a span, 32 for a trace (a trace id may be missing).

    Checked before anything is written or sent; the message names the row of ``source``
    (the scored table) holding the first bad id.
    """
    ids = frame.select(
        pl.col("span_id"), pl.col("metadata").struct.field("trace_id").alias("trace_id")
    )
    for column, kind, digits in _ID_DIGITS:
        bad = ids.filter(~pl.col(column).str.contains(f"^[0-9a-fA-F]{{{digits}}}$"))
        if bad.height:
            span, value = bad["span_id"][0], bad[column][0]
            rows = source.with_row_index("_row").filter(
                pl.col(span_column(source)).cast(pl.String) == span
            )
            row = f"row {rows['_row'][0]}: " if rows.height else ""
            raise InputError(
                f"{row}{column} {value!r} is not an OpenTelemetry {kind} id ({digits} hex "
                "digits): these scores cannot be parented to their spans"
            )


def to_otel_events(
    scored: Any,
    path_or_endpoint: str | os.PathLike[str] | None = None,
    *,
    endpoint: str | None = None,
    evaluators: Sequence[Any] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> ExportResult:
    """Write scores as ``gen_ai.evaluation.result`` events, each parented to its span.

    Every successful (span, evaluator) score becomes one OpenTelemetry event (a log
    record named ``gen_ai.evaluation.result`` carrying the span's ``traceId`` and
    ``spanId``) with the GenAI semantic-convention attributes
    ``gen_ai.evaluation.name``, ``gen_ai.evaluation.score.value``,
    ``gen_ai.evaluation.score.label`` and ``gen_ai.evaluation.explanation`` (plus
    ``framekit.evaluation.passed``). Failed rows are left out and counted.

    Parameters
    ----------
    scored
        A scored trace frame (see :func:`to_annotations`) or its Parquet path; its
        ``span_id`` (and ``trace_id``) must be OpenTelemetry hex ids.
    path_or_endpoint
        A file: written as OTLP/JSON, one ``ExportLogsServiceRequest`` per line of up to
        1000 records (the OpenTelemetry Collector file exporter's format; a ``.json`` file
        gets a single request), atomically. An ``http(s)://`` URL: as ``endpoint``.
    endpoint
        An OTLP/HTTP endpoint (``http://host:4318`` or its ``/v1/logs``): the events are
        exported with the OpenTelemetry SDK (``pip install 'framekit[otel]'``).
    evaluators
        Evaluators (or names) to export; default all in the frame.
    headers, timeout
        For the endpoint: extra HTTP headers (e.g. an authorization) and seconds per export.
        Credentials in the endpoint (``user:password@``, ``?sig=``...) or in headers (these
        and ``$OTEL_EXPORTER_OTLP_HEADERS``) are sent and never shown; user info next to an
        ``Authorization`` header is an :class:`InputError`, before anything is sent.

    Returns
    -------
    ExportResult
        ``sent`` events and ``skipped_failed`` rows per evaluator.

    Examples
    --------
    >>> import json, tempfile, polars as pl, framekit as fk
    >>> scored = pl.DataFrame({"trace_id": ["0af7651916cd43dd8448eb211c80319c"],
    ...     "span_id": ["b7ad6b7169203331"], "coherence_score": [0.75],
    ...     "coherence_label": ["Generally Yes"], "coherence_explanation": ["clear"],
    ...     "coherence_passed": [True], "coherence_error": [None]})
    >>> path = tempfile.mkdtemp() + "/events.jsonl"
    >>> fk.traces.to_otel_events(scored, path).sent
    1
    >>> line = json.loads(open(path).readline())
    >>> record = line["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
    >>> record["eventName"], record["spanId"], record["attributes"][1]
    ('gen_ai.evaluation.result', 'b7ad6b7169203331', {'key': 'gen_ai.evaluation.score.value', 'value': {'doubleValue': 0.75}})
    """
    target = os.fspath(path_or_endpoint) if path_or_endpoint is not None else None
    if target is not None and target.startswith(("http://", "https://")):
        if endpoint is not None:
            raise InputError("give the endpoint once: as path_or_endpoint or as endpoint=")
        endpoint, target = target, None
    if target is None and endpoint is None:
        raise InputError("to_otel_events needs a file path or an endpoint")
    source = as_polars(scored)
    frame, skipped = annotation_rows(source, evaluators)
    _check_ids(frame, source)
    result = ExportResult(sent=frame.height, skipped_failed=skipped)
    if target is not None:
        check_regular_or_new(target, "path")
        _write(frame, Path(target))
        result.destination = target
    if endpoint is not None:
        result.destination = _export(frame, endpoint, headers or {}, timeout)
    return result


def _write(frame: pl.DataFrame, path: Path) -> None:
    records = list(_records(frame, time.time_ns()))
    step = (len(records) or 1) if path.suffix.lower() == ".json" else _LINE_RECORDS
    chunks = [records[i : i + step] for i in range(0, len(records), step)] or [[]]
    partial = path.with_name(path.name + ".partial")
    path.parent.mkdir(parents=True, exist_ok=True)
    with partial.open("w", encoding="utf-8") as out:
        for chunk in chunks:
            out.write(json.dumps(_request(chunk), ensure_ascii=False) + "\n")
    os.replace(partial, path)  # nothing half-written at the destination


def _export(frame: pl.DataFrame, endpoint: str, headers: dict[str, str], timeout: float) -> str:
    """Send the events with the SDK; returns the endpoint as it may be shown."""
    import_optional(
        "opentelemetry.exporter.otlp.proto.http._log_exporter",
        extra="otel",
        purpose="exporting to an OTLP endpoint",
    )
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExportResult
    from opentelemetry.sdk.resources import Resource

    path = urlsplit(endpoint).path.rstrip("/")
    url = endpoint if path.endswith("/v1/logs") else join_path(endpoint, "/v1/logs")
    sources = "headers= or $OTEL_EXPORTER_OTLP_HEADERS"
    where = Destination.checked(url, "the OTLP endpoint", _sent_headers(headers), None, sources)
    import requests

    failed: list[int] = []
    not_otlp: list[str] = []
    session = requests.Session()

    def _answer_kind(response: Any, *args: Any, **kwargs: Any) -> None:
        # A 2xx page in front of the collector (a login form) is a success to the SDK.
        kind = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if response.ok and kind.startswith("text/"):
            not_otlp.append(f"HTTP {response.status_code} and {kind}")

    session.hooks["response"].append(_answer_kind)

    class _Counting(OTLPLogExporter):  # the SDK only logs a failed export: count them
        def export(self, batch: Any) -> Any:
            outcome = super().export(batch)
            if outcome != LogRecordExportResult.SUCCESS:
                failed.append(len(batch))
            return outcome

    exporter = _Counting(endpoint=url, headers=headers, timeout=timeout, session=session)
    # A provider of our own: the application's global logging setup is left untouched.
    provider = LoggerProvider(resource=Resource.create({"service.name": "framekit"}))
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter))
    logger = provider.get_logger("framekit")
    now = time.time_ns()
    for row in frame.iter_rows(named=True):
        meta = row["metadata"] or {}
        parent = trace.SpanContext(
            trace_id=int(meta.get("trace_id") or "0" * 32, 16),
            span_id=int(row["span_id"], 16),
            is_remote=True,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )
        attributes = {
            "gen_ai.evaluation.name": row["name"],
            "gen_ai.evaluation.score.value": row["score"],
            "gen_ai.evaluation.score.label": row["label"],
            "gen_ai.evaluation.explanation": row["explanation"],
            "framekit.evaluation.passed": meta.get("passed"),
        }
        logger.emit(
            timestamp=now,
            context=trace.set_span_in_context(trace.NonRecordingSpan(parent)),
            event_name=EVENT_NAME,
            attributes={k: v for k, v in attributes.items() if v is not None},
        )
    try:
        flushed = provider.force_flush(int(timeout * 1000))
    finally:
        provider.shutdown()
    if not_otlp:
        raise OTLPExportError(
            f"the OTLP endpoint {where.shown} answered with {not_otlp[0]}, not OTLP: is this "
            "the collector's URL, or a login page in front of it? (check the URL and headers)"
        )
    if failed or not flushed:
        lost = sum(failed) if failed else "some"
        raise OTLPExportError(
            f"OTLP export to {where.shown}: {lost} of {frame.height} events not accepted"
        )
    return where.shown


def _sent_headers(headers: dict[str, str]) -> dict[str, str]:
    """The headers the SDK's exporter sends: its environment variables', then ``headers``."""
    from opentelemetry.util.re import parse_env_headers

    env = os.environ.get("OTEL_EXPORTER_OTLP_LOGS_HEADERS") or os.environ.get(
        "OTEL_EXPORTER_OTLP_HEADERS", ""
    )
    sent = {k.lower(): v for k, v in parse_env_headers(env, liberal=True).items()}
    sent.update({k.lower(): v for k, v in headers.items()})
    return sent
