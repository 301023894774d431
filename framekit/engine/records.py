"""Identical rows of a frame as one distinct :class:`~framekit._results.Record` each, and
each record readied by its evaluator (:func:`ready_record`).

Per evaluator, the rows whose fields hold the same values are asked about once: a record's
``weight`` counts the rows behind it, and ``inverse`` maps each row back to its record.
polars groups typed columns (:func:`grouped_rows`), so a frame of repeated rows costs its
distinct ones; what it cannot group (no field, a row whose mapping raised, Python objects)
is grouped row by row (:func:`ungrouped_rows`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from framekit._errors import RecordError
from framekit._results import Record
from framekit.evaluators.base import Evaluator

#: The key of rows whose mapping raised, with the error (they are never asked about).
_ROW_ERROR = "row error"


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    return value


def most_text(columns: Mapping[str, pl.Series], names: Sequence[str]) -> int | None:
    """At least as many characters as :func:`~framekit.engine.context_window.text_size` gives any row's ``names`` in
    total, read off typed columns by polars (``None``: a column of another type).

    Examples
    --------
    >>> most_text({"q": pl.Series(["ab", "abcd"]), "d": pl.Series([["x"], ["yy", "z"]])},
    ...           ["q", "d"])
    7
    """
    total = 0
    for name in names:
        column = columns[name]
        if column.dtype == pl.String:
            lengths = column.str.len_chars()
        elif column.dtype == pl.List(pl.String):
            lengths = column.list.eval(pl.element().str.len_chars()).list.sum()
        else:
            return None
        total += int(lengths.max() or 0)  # type: ignore[arg-type]
    return total


def distinct_records(
    columns: Mapping[str, pl.Series],
    names: list[str],
    height: int,
    row_errors: Mapping[int, str] | None = None,
) -> tuple[list[Record], list[int]]:
    """Collapse identical rows into records (their ``weight`` counts the rows), and for
    each row the index of its record.

    A row in ``row_errors`` (its mapping raised) is not a record to ask about: it goes to
    a record holding that error (rows with the same error share one).
    """
    grouped = grouped_rows(columns, names, height, row_errors)
    if grouped is not None:
        weights, inverse, distinct = grouped
        return records_of(distinct, weights), inverse
    return ungrouped_rows(columns, names, height, row_errors)


def ungrouped_rows(
    columns: Mapping[str, pl.Series],
    names: list[str],
    height: int,
    row_errors: Mapping[int, str] | None = None,
) -> tuple[list[Record], list[int]]:
    """:func:`distinct_records` of what :func:`grouped_rows` leaves: no field read, a row whose
    mapping raised, Python objects. Grouped row by row, in Python."""
    row_errors = row_errors or {}
    if not names:  # an evaluator reading no field: every row is the same record
        return ([Record({}, height)], [0] * height) if height else ([], [])
    series = [columns[n] for n in names]
    nested = [s.dtype.is_nested() or s.dtype == pl.Object for s in series]
    lists = [s.to_list() for s in series]
    index: dict[Any, int] = {}
    key: Any
    records: list[Record] = []
    inverse: list[int] = []
    for i, row in enumerate(zip(*lists)):
        failed = row_errors.get(i)
        if failed is not None:
            key = (_ROW_ERROR, failed)
        elif any(nested):
            key = tuple(_hashable(v) if n else v for v, n in zip(row, nested))
        else:
            key = row
        try:
            r = index.get(key)
        except TypeError:  # an unhashable value from a callable mapping: keep the row apart
            r, key = None, object()
        if r is None:
            r = index[key] = len(records)
            fresh = Record(dict(zip(names, row)), 0) if failed is None else Record(None, 0)
            fresh.error = failed
            records.append(fresh)
        records[r].weight += 1
        inverse.append(r)
    return records, inverse


def grouped_rows(
    columns: Mapping[str, pl.Series],
    names: list[str],
    height: int,
    row_errors: Mapping[int, str] | None,
) -> tuple[list[int], list[int], pl.DataFrame] | None:
    """``(weights, inverse, distinct)`` of typed columns, grouped by polars: only the
    distinct rows become Python values, and only when their records are built (a frame
    of repeated rows costs its distinct ones). ``None`` where polars cannot group them
    (no field, a row whose mapping raised, Python objects): :func:`ungrouped_rows` does."""
    series = [columns[n] for n in names]
    if not names or row_errors or not height or any(s.dtype == pl.Object for s in series):
        return None
    frame = pl.DataFrame([s.alias(n) for s, n in zip(series, names)])
    groups = frame.with_row_index("__row").group_by(names, maintain_order=True).agg("__row")
    rows = groups.get_column("__row")
    weights = rows.list.len().to_list()
    spread = groups.select(pl.int_range(pl.len()).alias("record"), "__row").explode("__row")
    inverse = np.empty(frame.height, dtype=np.int64)
    inverse[spread.get_column("__row").to_numpy()] = spread.get_column("record").to_numpy()
    return weights, inverse.tolist(), groups.select(names)


def records_of(distinct: pl.DataFrame, weights: list[int], raw: bool = False) -> list[Record]:
    """One record per distinct row, holding the mapping's values (``raw``: vouched for,
    to be prepared when first read)."""
    names = distinct.columns
    values = [distinct.get_column(n).to_list() for n in names]
    rows = zip(zip(*values), weights)
    return [Record(dict(zip(names, row)), w, raw=raw) for row, w in rows]


def ready_records(ev: Evaluator, records: Sequence[Record], given: Sequence[bool] | None) -> None:
    """:func:`ready_record` each of a share's records, but those the evaluator vouches for
    from the columns (``given``): they stay raw, waiting for the cache, and are readied
    only if it has no answer (a record cut to fit the window is readied all the same)."""
    for record, deferred in zip(records, given or [False] * len(records)):
        if deferred and record.note is None:
            record.raw = True
        else:
            ready_record(ev, record)


def ready_record(ev: Evaluator, record: Record, strict: bool = False) -> None:
    """The evaluator's preparation of one record, in place: the record it will be asked
    about, or settled (its error; a verdict known without a judge). ``strict``: a record
    that cannot be evaluated raises instead."""
    if record.fields is None:
        return  # its rows' mapping raised: the error is already its result
    try:
        ready = ev.prepare(record.fields)
    except RecordError as exc:
        if strict:
            raise
        record.fail(str(exc))
        return
    # (asked only of an evaluator that can know one: the base class never does)
    knows = type(ev).known_verdict is not Evaluator.known_verdict
    known = ev.known_verdict(ready) if knows else None
    if known is None:
        record.fields = ready
        return
    # Scored without a judge (an empty retrieval): nothing to send or cache.
    record.settle(known)
    record.free()
    record.latency_s = 0.0
