"""Scores as Phoenix span annotations: the frame, and sending it to a Phoenix server."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from typing import Any, Literal
from urllib.parse import quote

import polars as pl

from framekit._errors import InputError, PhoenixError
from framekit.traces._endpoint import Destination
from framekit.traces._scored import (
    ExportResult,
    as_polars,
    evaluator_names,
    report_skipped,
    span_column,
    succeeded,
)

#: Columns and dtypes of :func:`to_annotations` (Phoenix's span-annotation fields).
ANNOTATION_SCHEMA = pl.Schema(
    {
        "span_id": pl.String(),
        "name": pl.String(),
        "annotator_kind": pl.String(),
        "label": pl.String(),
        "score": pl.Float64(),
        "explanation": pl.String(),
        "metadata": pl.Struct({"trace_id": pl.String(), "passed": pl.Boolean()}),
        "identifier": pl.String(),
    }
)
_RETRIED = frozenset({408, 425, 429, 500, 502, 503, 504})


def annotation_rows(
    scored: Any,
    evaluators: Sequence[Any] | None = None,
    *,
    annotator_kind: str = "LLM",
    identifier: str = "",
) -> tuple[pl.DataFrame, dict[str, int]]:
    """The annotation frame and the failed rows left out, per evaluator."""
    if annotator_kind not in ("LLM", "CODE", "HUMAN"):
        raise InputError(f"annotator_kind must be LLM, CODE or HUMAN, not {annotator_kind!r}")
    frame = as_polars(scored)
    names = evaluator_names(frame, evaluators)
    span = span_column(frame)
    trace = pl.col("trace_id") if "trace_id" in frame.columns else pl.lit(None, pl.String)
    parts, skipped = [], {}
    for name in names:
        ok = succeeded(frame, name, span)
        skipped[name] = frame.height - ok.height
        label = pl.col(f"{name}_label") if f"{name}_label" in frame.columns else pl.lit(None)
        explain = f"{name}_explanation"
        passed = pl.col(f"{name}_passed") if f"{name}_passed" in frame.columns else pl.lit(None)
        parts.append(
            ok.select(
                pl.col(span).cast(pl.String).alias("span_id"),
                pl.lit(name).alias("name"),
                pl.lit(annotator_kind).alias("annotator_kind"),
                label.cast(pl.String).alias("label"),
                pl.col(f"{name}_score").cast(pl.Float64).alias("score"),
                (pl.col(explain) if explain in frame.columns else pl.lit(None))
                .cast(pl.String)
                .alias("explanation"),
                pl.struct(
                    trace.cast(pl.String).alias("trace_id"),
                    passed.cast(pl.Boolean).alias("passed"),
                ).alias("metadata"),
                pl.lit(identifier).alias("identifier"),
            )
        )
    out = pl.concat(parts) if parts else pl.DataFrame(schema=ANNOTATION_SCHEMA)
    return out.cast(dict(ANNOTATION_SCHEMA)), skipped  # type: ignore[arg-type]


def to_annotations(
    scored: Any,
    evaluators: Sequence[Any] | None = None,
    *,
    annotator_kind: Literal["LLM", "CODE", "HUMAN"] = "LLM",
    identifier: str = "",
) -> pl.DataFrame:
    """Scores as Phoenix span annotations: one row per (span, evaluator).

    Parameters
    ----------
    scored
        A frame scored by :func:`framekit.evaluate_dataframe` from a table of
        :func:`framekit.traces.load` (it needs ``span_id`` and the ``<name>_score``,
        ``_label``, ``_explanation``, ``_passed``, ``_error`` columns), or its Parquet path.
    evaluators
        Evaluators (or their names) to export; default every evaluator in the frame.
    annotator_kind
        Phoenix's ``annotator_kind``: ``"LLM"`` (a judge), ``"CODE"`` or ``"HUMAN"``.
    identifier
        Phoenix's annotation ``identifier``: Phoenix keeps one annotation per (span, name,
        identifier), so sending again replaces rather than duplicates.

    Returns
    -------
    polars.DataFrame
        Columns of :data:`ANNOTATION_SCHEMA`: ``span_id``, ``name`` (the evaluator),
        ``annotator_kind``, ``label``, ``score``, ``explanation``, ``metadata``
        (``trace_id``, ``passed``) and ``identifier``; ``df.to_pandas()`` goes straight into
        Phoenix's ``client.spans.log_span_annotations_dataframe``. Failed rows (an error or
        no score) are left out and counted in a ``UserWarning``.

    Examples
    --------
    >>> import polars as pl
    >>> import framekit as fk
    >>> scored = pl.DataFrame({"span_id": ["a1", "b2"], "coherence_score": [1.0, None],
    ...     "coherence_label": ["Completely Yes", None], "coherence_explanation": ["ok", None],
    ...     "coherence_passed": [True, None], "coherence_error": [None, "HTTP 500"]})
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     frame = fk.traces.to_annotations(scored)
    >>> frame.select("span_id", "name", "label", "score").rows()
    [('a1', 'coherence', 'Completely Yes', 1.0)]
    >>> str(caught[0].message)
    '1 failed rows left out of the annotations (coherence: 1)'
    """
    frame, skipped = annotation_rows(
        scored, evaluators, annotator_kind=annotator_kind, identifier=identifier
    )
    report_skipped(skipped)
    return frame


def log_to_phoenix(
    scored: Any,
    endpoint: str | None = None,
    project: str | None = None,
    *,
    evaluators: Sequence[Any] | None = None,
    api_key: str | None = None,
    annotator_kind: Literal["LLM", "CODE", "HUMAN"] = "LLM",
    identifier: str = "",
    chunk_size: int = 100,
    max_retries: int = 6,
    timeout: float = 30.0,
) -> ExportResult:
    """Send scores to a running Phoenix server as span annotations.

    Posts :func:`to_annotations`'s rows to Phoenix's REST API (``POST
    /v1/span_annotations?sync=true``) in chunks of ``chunk_size``. A chunk that meets a
    connection error, a timeout, HTTP 429 or a 5xx is retried up to ``max_retries`` times
    with jittered exponential backoff (honouring ``Retry-After``), as the judge does; any
    other refusal stops at once, and so does a 2xx answer that is not JSON (a login page in
    front of Phoenix). Credentials (the key, ``user:password@`` and credential query
    parameters in ``endpoint``) never appear in an error, a log or the result; user info
    next to a key is refused before anything is sent.

    Parameters
    ----------
    scored
        A scored trace frame (see :func:`to_annotations`) or its Parquet path.
    endpoint
        Phoenix's base URL; default ``$PHOENIX_COLLECTOR_ENDPOINT``, else
        ``http://127.0.0.1:6006``.
    project
        Phoenix annotates spans by id, whatever their project: ``project`` is checked to
        exist (a clear error when it does not) when given.
    evaluators, annotator_kind, identifier
        As for :func:`to_annotations`.
    api_key
        Sent as a bearer token; default ``$PHOENIX_API_KEY``.
    chunk_size, max_retries, timeout
        Annotations per request, retries per chunk, seconds per request.

    Returns
    -------
    ExportResult
        ``sent`` (annotations Phoenix accepted) and ``skipped_failed`` (failed rows left out,
        per evaluator).

    Examples
    --------
    >>> result = fk.traces.log_to_phoenix(scored, "http://127.0.0.1:6006")  # doctest: +SKIP
    >>> result.sent, result.skipped_failed  # doctest: +SKIP
    (40, {'response_relevance': 0, 'coherence': 1})
    """
    import httpx

    if chunk_size < 1:
        raise InputError(f"chunk_size must be >= 1, got {chunk_size}")
    frame, skipped = annotation_rows(
        scored, evaluators, annotator_kind=annotator_kind, identifier=identifier
    )
    base = endpoint or os.environ.get("PHOENIX_COLLECTOR_ENDPOINT") or "http://127.0.0.1:6006"
    base = base.rstrip("/").removesuffix("/v1/traces")
    key = api_key if api_key is not None else os.environ.get("PHOENIX_API_KEY")
    headers = {"accept": "application/json"}
    if key:
        headers["authorization"] = f"Bearer {key}"
    where = Destination.checked(base, "the Phoenix URL", headers, key, "PHOENIX_API_KEY")
    result = ExportResult(skipped_failed=skipped, destination=where.shown)
    with httpx.Client(headers=headers, timeout=timeout) as client:
        if project:
            path = f"/v1/projects/{quote(project, safe='')}"
            _request(client, where, "GET", path, None, max_retries)
        rows = frame.to_dicts()
        for start in range(0, len(rows), chunk_size):
            body = {"data": [_payload(row) for row in rows[start : start + chunk_size]]}
            _request(client, where, "POST", "/v1/span_annotations", body, max_retries)
            result.sent += len(body["data"])
    return result


def _payload(row: dict[str, Any]) -> dict[str, Any]:
    outcome = {k: row[k] for k in ("label", "score", "explanation") if row[k] is not None}
    meta = {k: v for k, v in (row["metadata"] or {}).items() if v is not None}
    return {
        "span_id": row["span_id"],
        "name": row["name"],
        "annotator_kind": row["annotator_kind"],
        "result": outcome,
        "metadata": {"source": "framekit", **meta},
        "identifier": row["identifier"],
    }


def _request(
    client: Any, where: Destination, method: str, path: str, body: Any, max_retries: int
) -> Any:
    import httpx

    # The query is written into the URL: httpx's params= would replace the endpoint's own.
    url = where.at(path + "?sync=true" if method == "POST" else path)
    shown = f"{method} {path}"
    for attempt in range(max_retries + 1):
        wait: float | None = None
        try:
            response = client.request(method, url, json=body)
        except (httpx.TransportError, httpx.TimeoutException) as exc:
            problem = f"{type(exc).__name__}: {exc}"
        else:
            if response.status_code < 400:
                return _json(response, where, shown)
            problem = f"HTTP {response.status_code}: {response.text[:300]}"
            if response.status_code not in _RETRIED:
                raise PhoenixError(
                    where.message(f"Phoenix at {where.shown} refused {shown}: {problem}")
                )
            wait = _retry_after(response.headers.get("retry-after"))
        if attempt == max_retries:
            break
        time.sleep(
            wait if wait is not None else min(30.0, 0.5 * 2**attempt) * random.uniform(0.5, 1)
        )
    raise PhoenixError(
        where.message(
            f"Phoenix at {where.shown}: {shown} failed after {max_retries + 1} tries: {problem}"
        )
    )


def _json(response: Any, where: Destination, shown: str) -> Any:
    """Phoenix's JSON answer; anything else (a login page in front of it) is an error."""
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        kind = response.headers.get("content-type", "").partition(";")[0] or "no content type"
        raise PhoenixError(
            where.message(
                f"Phoenix at {where.shown} answered {shown} with HTTP {response.status_code} "
                f"and {kind}, not Phoenix's JSON API: is this Phoenix's URL, or a login page "
                "in front of it? (check the URL and PHOENIX_API_KEY)"
            )
        ) from None


def _retry_after(value: str | None) -> float | None:
    try:
        return None if value is None else max(0.0, min(float(value), 60.0))
    except ValueError:
        return None


__all__ = ["ANNOTATION_SCHEMA", "log_to_phoenix", "to_annotations"]
