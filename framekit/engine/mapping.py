"""The mapping: one column of values per canonical field, from a frame.

Resolving a mapping needs the frame's column names only (:func:`mapping_sources`); the
rows are read here only for a field mapped to an expression or a callable
(:func:`computed_fields`): a field mapped to a column is that column as it is.

A mapping value is a column name, a polars expression, or a callable taking the row as a
dict (a callable that raises fails only its row, :attr:`ResolvedFields.row_errors`).
Without a mapping, columns named like the fields (or like an unambiguous alias) are read.
Problems with the mapping itself (a missing column, a bad expression, an unknown field)
raise :class:`~framekit.MappingError` here, before any judge call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from framekit._errors import InputError, MappingError, did_you_mean, one_line
from framekit._frames import clean_text
from framekit.evaluators.base import COLUMN_ALIASES, FIELD_ALIASES, FIELDS, canonical_fields

MappingValue = str | pl.Expr | Callable[[dict[str, Any]], Any]


@dataclass
class ResolvedFields:
    """Field name -> column of values, plus per-row errors from callables."""

    columns: dict[str, pl.Series]
    row_errors: dict[str, dict[int, str]] = field(default_factory=dict)

    @property
    def available(self) -> set[str]:
        return set(self.columns)

    def add(self, other: ResolvedFields) -> None:
        """Take ``other``'s columns and row errors too."""
        self.columns.update(other.columns)
        self.row_errors.update(other.row_errors)


def _columns_text(columns: Sequence[str]) -> str:
    return ", ".join(repr(c) for c in columns) or "(none)"


def mapping_sources(
    columns: Sequence[str], mapping: Mapping[str, MappingValue] | None, needed: set[str]
) -> dict[str, MappingValue]:
    """Field -> its source (a column name, an expression or a callable), for the fields
    in ``needed``, checked against the frame's column names alone: a missing column, an
    unknown field or a source of another kind raises :class:`~framekit.MappingError`.

    Examples
    --------
    >>> mapping_sources(["question", "answer"], {"input": "question"}, {"input", "output"})
    {'input': 'question'}
    """
    if mapping is None:
        mapping = {f: f for f in FIELDS if f in columns}
        # Columns named as other projects name the fields (user_query, ...) fill the rest.
        for alias in COLUMN_ALIASES:
            canonical = FIELD_ALIASES[alias]
            if canonical not in mapping and alias in columns:
                mapping[canonical] = alias
    elif not isinstance(mapping, Mapping):
        raise MappingError(
            f"mapping must be a dict of field -> column, got {type(mapping).__name__}"
        )
    unknown = [k for k in mapping if k not in FIELDS and k not in FIELD_ALIASES]
    if unknown:
        raise MappingError(
            f"mapping key {unknown[0]!r} is not a field; fields are {', '.join(FIELDS)} "
            f"(aliases: {', '.join(FIELD_ALIASES)}; map a field to a column: "
            "{'input': 'question'})"
        )
    try:
        mapping = canonical_fields(mapping, "mapping")
    except InputError as exc:
        raise MappingError(str(exc)) from None
    sources: dict[str, MappingValue] = {}
    for name, source in mapping.items():
        if name not in needed:
            continue
        if isinstance(source, str):
            if source not in columns:
                raise MappingError(
                    f"mapping {name!r} -> {source!r}: no column {source!r}."
                    f"{did_you_mean(source, columns)} "
                    f"Available columns: {_columns_text(columns)}"
                )
        elif not isinstance(source, pl.Expr) and not callable(source):
            raise MappingError(
                f"mapping {name!r}: expected a column name, a polars expression or a "
                f"callable, got {type(source).__name__}"
            )
        sources[name] = source
    return sources


def computed_fields(
    frame: pl.DataFrame, sources: Mapping[str, pl.Expr | Callable[[dict[str, Any]], Any]]
) -> ResolvedFields:
    """The columns of the fields mapped to an expression or a callable: the only
    mapping that reads the rows themselves (a column name is taken as it is)."""
    resolved = ResolvedFields({})
    for name, source in sources.items():
        if isinstance(source, pl.Expr):
            try:
                resolved.columns[name] = frame.select(source.alias(name)).to_series()
            except Exception as exc:  # polars raises many kinds; all mean a bad expression
                raise MappingError(
                    f"mapping {name!r}: the expression failed: {one_line(str(exc), 200)}. "
                    f"Available columns: {_columns_text(frame.columns)}"
                ) from None
            if resolved.columns[name].len() != frame.height:
                raise MappingError(
                    f"mapping {name!r}: the expression gives {resolved.columns[name].len()} "
                    f"values for {frame.height} rows"
                )
            continue
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
    return resolved


def _series(name: str, values: list[Any]) -> pl.Series:
    """Values of one kind as a typed column; mixed kinds (or odd ones) as Python objects."""
    if len({type(v) for v in values if v is not None}) <= 1:
        try:
            return pl.Series(name, values, strict=False)
        except Exception:  # polars cannot type them (ragged structs, custom objects...)
            pass
    return pl.Series(name, values, dtype=pl.Object)
