"""Resolving ``mapping=`` into one column per canonical field, and fitting field values
to a judge's context window.

A mapping value is a column name, a polars expression, or a callable that receives the
row as a dict. Problems with the mapping itself are raised before any judge call; a
callable that fails on one row fails only that row.

Long texts: a record whose text fields together exceed the judge's character budget is
cut to fit (see :func:`fit_record`) rather than failed, and says so in its explanation;
the budget comes from the judge's context window (``framekit.frame.char_budget``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from framekit._errors import MappingError
from framekit._frames import clean_text
from framekit.evaluators.base import FIELDS
from framekit.judges.structured import one_line

MappingValue = str | pl.Expr | Callable[[dict[str, Any]], Any]


@dataclass
class ResolvedFields:
    """Field name -> column of values, plus per-row errors from callables."""

    columns: dict[str, pl.Series]
    row_errors: dict[str, dict[int, str]] = field(default_factory=dict)

    @property
    def available(self) -> set[str]:
        return set(self.columns)


def _columns_text(frame: pl.DataFrame) -> str:
    return ", ".join(repr(c) for c in frame.columns) or "(none)"


def resolve_mapping(
    frame: pl.DataFrame, mapping: Mapping[str, MappingValue] | None, needed: set[str]
) -> ResolvedFields:
    """Resolve the fields in ``needed`` (others in the mapping are ignored)."""
    if mapping is None:
        mapping = {f: f for f in FIELDS if f in frame.columns}
    elif not isinstance(mapping, Mapping):
        raise MappingError(
            f"mapping must be a dict of field -> column, got {type(mapping).__name__}"
        )
    unknown = [k for k in mapping if k not in FIELDS]
    if unknown:
        raise MappingError(
            f"mapping key {unknown[0]!r} is not a field; fields are {', '.join(FIELDS)} "
            f"(map a field to a column: {{'input': 'question'}})"
        )
    resolved = ResolvedFields({})
    for name, source in mapping.items():
        if name not in needed:
            continue
        if isinstance(source, str):
            if source not in frame.columns:
                raise MappingError(
                    f"mapping {name!r} -> {source!r}: no column {source!r}. "
                    f"Available columns: {_columns_text(frame)}"
                )
            resolved.columns[name] = frame.get_column(source)
        elif isinstance(source, pl.Expr):
            try:
                resolved.columns[name] = frame.select(source.alias(name)).to_series()
            except Exception as exc:  # polars raises many kinds; all mean a bad expression
                raise MappingError(
                    f"mapping {name!r}: the expression failed: {one_line(str(exc), 200)}. "
                    f"Available columns: {_columns_text(frame)}"
                ) from None
            if resolved.columns[name].len() != frame.height:
                raise MappingError(
                    f"mapping {name!r}: the expression gives {resolved.columns[name].len()} "
                    f"values for {frame.height} rows"
                )
        elif callable(source):
            values: list[Any] = []
            errors: dict[int, str] = {}
            for i, row in enumerate(frame.iter_rows(named=True)):
                try:
                    value = source(row)
                    values.append(clean_text(value) if isinstance(value, str) else value)
                except Exception as exc:
                    values.append(None)
                    errors[i] = (
                        f"mapping for {name!r} raised {type(exc).__name__}: {one_line(str(exc), 120)}"
                    )
            resolved.columns[name] = _series(name, values)
            if errors:
                resolved.row_errors[name] = errors
        else:
            raise MappingError(
                f"mapping {name!r}: expected a column name, a polars expression or a "
                f"callable, got {type(source).__name__}"
            )
    return resolved


def _series(name: str, values: list[Any]) -> pl.Series:
    """Values of one kind as a typed column; mixed kinds (or odd ones) as Python objects."""
    if len({type(v) for v in values if v is not None}) <= 1:
        try:
            return pl.Series(name, values, strict=False)
        except Exception:  # polars cannot type them (ragged structs, custom objects...)
            pass
    return pl.Series(name, values, dtype=pl.Object)


def text_size(value: Any) -> int:
    """Characters of text in a field value: a string, or the strings of a list."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, (list, tuple)):
        return sum(text_size(v if not isinstance(v, Mapping) else v.get("content")) for v in value)
    return 0


def _shares(sizes: list[int], budget: int) -> list[int]:
    """Per-item limits within ``budget``: short items keep all, long ones split the rest."""
    limits = [0] * len(sizes)
    left = budget
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    for k, i in enumerate(order):
        limits[i] = min(sizes[i], left // (len(sizes) - k))
        left -= limits[i]
    return limits


TRUNCATION_MARK = "\n[... cut by framekit to fit the judge's context window ...]"


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + TRUNCATION_MARK
    if isinstance(value, (list, tuple)):
        limits = _shares([text_size([v]) for v in value], limit)
        out = []
        for item, lim in zip(value, limits):
            if isinstance(item, Mapping) and isinstance(item.get("content"), str):
                item = {**item, "content": _cut(item["content"], lim)}
            elif isinstance(item, str):
                item = _cut(item, lim)
            out.append(item)
        return out
    return value


def fit_record(record: dict[str, Any], budget: int) -> str | None:
    """Cut the text fields of ``record`` (in place) to ``budget`` characters in total.

    Fields shorter than an even share keep everything; the longer ones share the rest, and
    each cut text ends with a visible mark so the judge knows it is partial. Returns the
    note for the explanation column, or ``None`` when nothing was cut.

    Examples
    --------
    >>> record = {"input": "short question", "output": "x" * 100}
    >>> fit_record(record, 50)
    "[framekit: cut to fit the judge's context window: output 100 -> 36 characters]"
    >>> len(record["output"]) > 36, record["input"]
    (True, 'short question')
    """
    sizes = {f: text_size(v) for f, v in record.items()}
    if sum(sizes.values()) <= budget:
        return None
    limits = dict(zip(sizes, _shares(list(sizes.values()), budget)))
    cuts = []
    for f, size in sizes.items():
        if size > limits[f]:
            record[f] = _cut(record[f], limits[f])
            cuts.append(f"{f} {size:,} -> {limits[f]:,}")
    return f"[framekit: cut to fit the judge's context window: {'; '.join(cuts)} characters]"
