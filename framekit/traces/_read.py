"""Reading a span export into spans: files, frames, JSON / JSONL and OTLP records.

Every record becomes a :class:`_Span` whose attributes are flattened to OpenInference's
dotted keys (see the :mod:`framekit.traces` docstring for the shapes read).
"""

from __future__ import annotations

import glob
import gzip
import io
import json
import math
import os
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import IO, Any

import polars as pl

from framekit._errors import GenAIFormatError, SpanExportNotFound, TraceFormatError
from framekit.traces._genai import GENAI_JSON_LEAVES, has_genai, merge_genai

_TRACE_ID = ("context.trace_id", "trace_id", "traceId", "context.traceId")
_SPAN_ID = ("context.span_id", "span_id", "spanId", "context.spanId")
_PARENT_ID = ("parent_id", "parentSpanId", "parent_span_id", "parentId")
_START = ("start_time", "startTimeUnixNano", "start_time_unix_nano", "startTime")
_STATUS = ("status_code", "status.code", "status.status_code", "status")
_SKIP = frozenset({"attributes", "events", "links", "resource"})
# Attributes that are JSON text by convention: a decoded object is re-encoded, not flattened.
_JSON_LEAVES = frozenset({"input.value", "output.value", *GENAI_JSON_LEAVES})
# The attributes the rows are built from; the rest is dropped as each span is read, so a
# large export holds only what it needs.
_KEEP = (
    "openinference.span.kind",
    "session.id",
    "input.",
    "output.",
    "retrieval.documents.",
    "reranker.",
    "llm.input_messages.",
    "llm.output_messages.",
    "llm.tools.",
    "tool.name",
    "llm.invocation_parameters",
)
_STATUS_NAMES = {"0": "UNSET", "1": "OK", "2": "ERROR"}
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_PARQUET = (".parquet", ".pq")
_JSON = (".json", ".jsonl", ".ndjson")
_SUFFIXES = (*_PARQUET, *_JSON, *(f"{s}.gz" for s in _JSON))
_EXPECTED = ".parquet, .json or .jsonl (.ndjson), the JSON ones optionally gzipped (.gz)"
_PARQUET_BATCH = 8192
_MAX_RECORD = 64 * 2**20  # a record spread over lines is given up on past 64 MiB
_GLOB_MAGIC = re.compile(r"[*?[]")
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
    order: int  # position in the export (file by file), the tie-breaker everywhere

    @property
    def sort_key(self) -> tuple[bool, datetime, int]:
        return (self.start is None, self.start or _EPOCH, self.order)


def _read(source: Any) -> Iterator[_Span]:
    """The spans of a source, one at a time, numbered in export order (file by file)."""
    if isinstance(source, pl.DataFrame):
        yield from _from_frame(source, "DataFrame")
        return
    if type(source).__module__.startswith("pandas"):
        if source.index.name is not None and source.index.name not in source.columns:
            source = source.reset_index()  # Phoenix's query_spans() keeps the span id there
        _check_columns([str(c) for c in source.columns], "DataFrame")
        records = source.to_dict("records")
        yield from (_span(row, f"row {i}", "DataFrame", i) for i, row in enumerate(records))
        return
    count = 0
    for path in _paths(source):
        for span in _read_file(path):
            # numbered across files: ties break in file order, then line order
            span.order = count
            count += 1
            yield span


def _paths(source: Any) -> list[Any]:
    """The files a source names: a list's items, a directory's exports, a glob's matches."""
    if isinstance(source, (list, tuple)):
        if not source:
            raise TraceFormatError("no span export given: the list of paths is empty")
        return [path for item in source for path in _paths(item)]
    if not isinstance(source, (str, os.PathLike)) and hasattr(source, "read_bytes"):
        return [source]  # an importlib.resources Traversable: read as is, never globbed
    pattern = os.fspath(source)
    path = Path(pattern)
    if path.is_dir():
        files = _glob(os.path.join(glob.escape(pattern), "*"))
        found = [f for f in files if _suffix(f.name) in _SUFFIXES]  # skip READMEs, .crc ...
        if not found:
            raise TraceFormatError(f"{pattern}: no span export in this directory ({_EXPECTED})")
        return found
    # An existing file is read as named, even when its name holds "[" or "*".
    if path.exists() or not _GLOB_MAGIC.search(pattern):
        return [path]
    if not (found := _glob(pattern)):
        raise TraceFormatError(f"{pattern}: no file matches this pattern")
    return found


def _glob(pattern: str) -> list[Path]:
    # Sorted: the listing order of the file system must not change ties or duplicates.
    return sorted(Path(p) for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))


def _suffix(filename: str) -> str:
    """The extension that decides the format: ``.jsonl``, or ``.jsonl.gz`` when gzipped."""
    path = Path(filename)
    if path.suffix.lower() != ".gz":
        return path.suffix.lower()
    return Path(path.stem).suffix.lower() + ".gz"


def _read_file(path: Any) -> Iterator[_Span]:
    """The spans of one file (a ``Path`` or a ``Traversable``), numbered from 0."""
    name = str(path)
    suffix = _suffix(path.name)
    if suffix not in _SUFFIXES:
        # Parquet compresses its pages itself: a gzipped one is rare enough to refuse
        hint = "; gunzip it first" if suffix.removesuffix(".gz") in _PARQUET else ""
        raise TraceFormatError(
            f"{name}: unknown extension {suffix or '(none)'!r}; expected {_EXPECTED}{hint}"
        )
    if not path.is_file():
        raise SpanExportNotFound(f"{name}: no such span export")
    if suffix in _PARQUET:
        yield from _parquet_spans(path, name)
        return
    with path.open("rb") as raw:
        if not suffix.endswith(".gz"):
            yield from _json_spans(raw, suffix, name)
            return
        try:  # decompressed while read: the errors of a bad file surface mid-parse
            yield from _json_spans(gzip.GzipFile(fileobj=raw), suffix.removesuffix(".gz"), name)
        except (OSError, EOFError, zlib.error) as exc:  # not gzip, truncated, corrupt, bad CRC
            raise TraceFormatError(f"{name}: not a readable gzip file ({exc})") from exc


def _parquet_spans(path: Any, name: str) -> Iterator[_Span]:
    """A Parquet export read one row group batch at a time (bounded memory)."""
    import pyarrow.parquet as pq

    try:
        source = path if isinstance(path, Path) else io.BytesIO(path.read_bytes())
        parquet = pq.ParquetFile(source)
        first = pl.from_arrow(parquet.schema_arrow.empty_table())
    except Exception as exc:  # pyarrow raises several types for a corrupt file
        raise TraceFormatError(f"{name}: not a readable Parquet file ({exc})") from exc
    assert isinstance(first, pl.DataFrame)
    _check_columns(_columns(first), name)
    offset = 0
    for batch in parquet.iter_batches(batch_size=_PARQUET_BATCH):
        frame = pl.from_arrow(batch)
        assert isinstance(frame, pl.DataFrame)
        for i, row in enumerate(frame.iter_rows(named=True), start=offset):
            yield _span(row, f"row {i}", name, i)
        offset += frame.height


def _json_spans(stream: IO[bytes] | gzip.GzipFile, suffix: str, name: str) -> Iterator[_Span]:
    # newline="": lines split at \n, \r\n or \r as before, the text itself left as written
    text = io.TextIOWrapper(stream, encoding="utf-8-sig", newline="")
    if suffix == ".json":
        content = text.read()
        records = _json_records(content, name)
        if _concatenated(content):  # ConsoleSpanExporter: one pretty-printed span after another
            records = _jsonl_records(io.StringIO(content, newline=""), name)
    else:
        records = _jsonl_records(text, name)
    return (_span(rec, where, name, i) for i, (where, rec) in enumerate(records))


def _concatenated(content: str) -> bool:
    try:
        json.loads(content)
    except json.JSONDecodeError as exc:
        return exc.msg == "Extra data"
    return False


def _columns(frame: pl.DataFrame) -> list[str]:
    columns = list(frame.columns)
    if isinstance(context := frame.schema.get("context"), pl.Struct):
        columns += [f"context.{f.name}" for f in context.fields]
    return columns


def _from_frame(frame: pl.DataFrame, name: str) -> Iterator[_Span]:
    _check_columns(_columns(frame), name)
    return (_span(row, f"row {i}", name, i) for i, row in enumerate(frame.iter_rows(named=True)))


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


def _jsonl_records(lines: Iterable[str], name: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """One record per line; a record may span lines (``ConsoleSpanExporter`` pretty-prints)."""
    pending, first = "", 0
    for lineno, line in enumerate(lines, start=1):
        if not pending and not line.strip():
            continue
        pending, first = pending + line, first or lineno
        try:
            item = json.loads(pending)
        except json.JSONDecodeError as exc:
            # Cut short (a record continued on the next line): read on; wrong: stop here.
            if exc.pos >= len(pending.rstrip()) and len(pending) < _MAX_RECORD:
                continue
            raise TraceFormatError(
                f"{name}: malformed JSON on line {first + exc.lineno - 1} (column {exc.colno}): "
                f"{exc.msg}"
            ) from exc
        where = f"line {first}"
        pending, first = "", 0
        for span in _expand(item, where, name):
            yield where, span
    if pending.strip():
        try:
            json.loads(pending)
        except json.JSONDecodeError as exc:
            raise TraceFormatError(
                f"{name}: malformed JSON on line {first} (column {exc.colno}): {exc.msg}"
            ) from exc


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
    if has_genai(attrs):
        try:
            merge_genai(attrs)
        except GenAIFormatError as exc:
            raise TraceFormatError(f"{name}: {where}: span {span_id}: {exc}") from None
    attrs = {k: v for k, v in attrs.items() if k.startswith(_KEEP)}
    parent = _pick(top, _PARENT_ID)
    kind = attrs.get("openinference.span.kind") or top.get("span_kind") or "UNKNOWN"
    return _Span(
        trace_id=_hex(trace_id),
        span_id=_hex(span_id),
        parent_id=_hex(parent) if parent not in (None, "") else None,
        name=None if top.get("name") is None else str(top["name"]),
        kind=str(kind).upper(),
        start=_time(_pick(top, _START), where, name),
        # OTLP/JSON leaves out a default (UNSET) status: it is UNSET, not unknown
        status=_status(_pick(top, _STATUS)) or ("UNSET" if "spanId" in record else None),
        attrs=attrs,
        order=order,
    )


def _hex(value: Any) -> str:
    # ConsoleSpanExporter writes ids as "0x..."; OTLP/JSON and Phoenix as bare hex
    text = str(value)
    return text[2:] if text[:2] in ("0x", "0X") else text


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
