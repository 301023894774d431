"""Which input columns scoring reads, and the checks made before anything is written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from framekit._errors import InputError
from framekit._result_columns import result_columns as _result_columns
from framekit.engine.mapping import MappingValue, computed_fields, mapping_sources
from framekit.evaluators.base import COLUMN_ALIASES, FIELD_ALIASES, Evaluator


def needed_columns(
    schema: pl.Schema,
    mapping: Mapping[str, MappingValue] | None,
    evaluators: Sequence[Evaluator],
) -> list[str]:
    """The input columns scoring reads: mapped columns, an expression's roots, and every
    column when a callable mapping needs the whole row."""
    wanted = {f for ev in evaluators for f in ev.fields}
    if mapping is None:
        # As mapping_sources: columns named like a field, or like an unambiguous alias.
        named = {c: FIELD_ALIASES[c] if c in COLUMN_ALIASES else c for c in schema}
        return [c for c in schema if named[c] in wanted]
    columns: set[str] = set()
    for name, source in mapping.items():
        if FIELD_ALIASES.get(name, name) not in wanted:
            continue
        if isinstance(source, str):
            columns.add(source)
        elif isinstance(source, pl.Expr):
            try:
                roots = source.meta.root_names()
            except Exception:
                return list(schema)
            if not roots or source.meta.is_regex_projection():
                return list(schema)
            columns.update(roots)
        else:  # a callable receives the whole row as a dict
            return list(schema)
    return [c for c in schema if c in columns]


def validate_inputs(
    schema: pl.Schema,
    evaluators: Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None,
    overwrite: bool,
    details: bool,
) -> list[str]:
    """Raise :class:`InputError` for a bad mapping, a missing field or a column clash,
    before any file is written or any judge is called. Returns the clashing columns."""
    empty = pl.DataFrame(schema=schema)
    needed = {f for ev in evaluators for f in ev.fields}
    sources = mapping_sources(empty.columns, mapping, needed)
    # An expression is tried on no rows: a bad one fails here, before anything is written.
    computed_fields(empty, {n: s for n, s in sources.items() if isinstance(s, pl.Expr)})
    for ev in evaluators:
        ev.check_fields(set(sources), empty.columns)
    clash = [c for c in _result_columns(evaluators, details) if c in schema]
    if clash and not overwrite:
        raise InputError(
            f"result column {clash[0]!r} already exists in the input; pass overwrite=True "
            "(--overwrite) to replace it"
        )
    return clash
