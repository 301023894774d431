"""The dry run of :func:`framekit.evaluate_parquet`: plan a Parquet source slice by slice.

The planning itself is the engine's (:func:`framekit.engine.dryrun.plan_requests`); this
module only reads the source as ``evaluate_parquet`` would: the same checks before
anything is read, only the mapped columns, the same slices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import polars as pl

from framekit._errors import InputError
from framekit.engine.cache import Cache
from framekit.engine.dryrun import RequestPlan, plan_requests
from framekit.engine.mapping import MappingValue
from framekit.evaluators.base import Evaluator, check_evaluators
from framekit.io._columns import needed_columns, validate_inputs
from framekit.io._duckdb import _is_duckdb_relation
from framekit.io._sources import (
    MAX_SLICE_ROWS,
    _row_groups,
    _schema_of,
    plan_slices,
    read_slice,
    resolve_sources,
)
from framekit.judges.resolve import JudgeLike


def plan_parquet(
    source: Any,
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    judge: JudgeLike | None = None,
    cache: Cache | str | bool | None = None,
    slice_rows: int | None = None,
    overwrite: bool = True,
    details: bool = False,
) -> RequestPlan:
    """:func:`plan_requests` over a Parquet source (or DuckDB relation), slice by slice,
    reading only the mapped columns, as :func:`framekit.evaluate_parquet` would.

    With ``overwrite=False`` (what the real run is given), result columns that already
    exist in the source are refused here too, before the real run would refuse them.

    Examples
    --------
    >>> plan = plan_parquet("runs/*.parquet", [RetrievalRelevance()],
    ...                     {"input": "question", "context": "docs"})  # doctest: +SKIP
    >>> print(plan.describe())  # doctest: +SKIP
    """
    evs = check_evaluators(evaluators)
    if _is_duckdb_relation(source):
        to_reader = getattr(source, "to_arrow_reader", None) or source.fetch_record_batch
        try:
            reader = to_reader(MAX_SLICE_ROWS)
        except Exception as exc:  # duckdb.Error: the query itself failed
            raise InputError(f"the SQL query failed: {str(exc).splitlines()[0]}") from None

        def batches() -> Iterable[pl.DataFrame]:
            for batch in reader:
                frame = pl.from_arrow(batch)
                assert isinstance(frame, pl.DataFrame)
                yield frame

        empty = pl.from_arrow(reader.schema.empty_table())
        assert isinstance(empty, pl.DataFrame)
        schema = empty.schema
        validate_inputs(schema, evs, mapping, overwrite=overwrite, details=details)
        return plan_requests(batches(), evs, mapping, judge=judge, cache=cache)
    files = resolve_sources(source)
    schema = _schema_of(files)
    validate_inputs(schema, evs, mapping, overwrite=overwrite, details=details)
    columns = needed_columns(schema, mapping, evs)
    slices = plan_slices(_row_groups(files), slice_rows)
    frames = (read_slice(files, columns, offset, length) for offset, length in slices)
    return plan_requests(frames, evs, mapping, judge=judge, cache=cache)
