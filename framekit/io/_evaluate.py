"""The entry points: ``evaluate_parquet``, ``aevaluate_parquet`` and ``evaluate_sql``.

Each slice of the sources is scored by :func:`framekit.frame.aevaluate_dataframe` and its
result columns saved as a part; a re-run with the same manifest skips the finished
slices. When every slice is done, the input columns and the parts are written to the
destination in one atomic step.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from framekit._aio import run_sync
from framekit._errors import InputError
from framekit._mapping import MappingValue
from framekit._provenance import to_metadata
from framekit._result_columns import result_columns as _result_columns
from framekit.engine.cache import Cache, resolve_cache
from framekit.engine.jobs import JudgeResolver, check_evaluators
from framekit.engine.provenance import build_record
from framekit.engine.stats import record_last
from framekit.evaluators.base import Evaluator
from framekit.frame import EvaluationFailed, OnError, aevaluate_dataframe
from framekit.io._assemble import _assemble, _write_empty
from framekit.io._batch import submit_all_slices
from framekit.io._columns import needed_columns, validate_inputs
from framekit.io._duckdb import _is_duckdb_relation, _materialised, run_sql
from framekit.io._fingerprint import _file_identity, run_fingerprint
from framekit.io._parts import _MANIFEST_FORMAT, _Parts
from framekit.io._provenance import source_label
from framekit.io._run import ParquetRun, _add_stats, _failed_rows, _last_stats, _RowBar
from framekit.io._sources import (
    SourceLike,
    _row_groups,
    _schema_of,
    plan_slices,
    resolve_sources,
    scan_sources,
)
from framekit.judges.base import JudgeLike
from framekit.judges.resolve import resolve_judge


def evaluate_parquet(
    source: SourceLike,
    destination: str | os.PathLike[str],
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    judge: JudgeLike | None = None,
    cache: Cache | str | bool | None = None,
    on_error: OnError = "record",
    progress: bool = True,
    details: bool = False,
    overwrite: bool = False,
    slice_rows: int | None = None,
    engine: str = "local",
    **ray_options: Any,
) -> ParquetRun:
    """Score a Parquet file larger than memory, slice by slice, into a new Parquet file.

    The destination holds every input column and row, in order, then the result columns
    of :func:`framekit.evaluate_dataframe`. It appears only when complete (written under a
    temporary name, then renamed). An interrupted run leaves its finished slices in
    ``.<destination name>.framekit-parts/`` beside the destination; running the same call
    again skips them, and answers already in the cache are not paid for twice (with
    ``cache=False`` the unfinished slices are paid for again).

    Parameters
    ----------
    source
        A Parquet file, a glob (``"logs/*.parquet"``), a directory of Parquet files, a
        list of those (same columns and types), or a DuckDB relation.
    destination
        The Parquet file to write (replaced if it exists; parent directories created).
    evaluators, mapping, judge, cache, on_error, details, overwrite
        As for :func:`framekit.evaluate_dataframe`. With ``on_error="raise"`` the
        destination is still written, then :class:`framekit.EvaluationFailed` is raised
        (its ``.frame`` is a LazyFrame over the destination).
    progress
        One progress bar over every row of the input, and a summary line at the end.
    slice_rows
        Rows per slice; ``None`` follows the row groups (tiny ones merged, ones above
        100,000 rows or 64 MiB split). Peak memory grows with the slice size.
    engine
        ``"local"`` (this process) or ``"ray"``: the slices are scored by a pool of Ray
        workers under one shared rate limit (needs ``framekit[ray]``); ``**ray_options``
        (``address``, ``workers``, ``num_cpus``, ``shared_limit``) go to
        :func:`framekit.ray.evaluate_parquet`.

    Returns
    -------
    ParquetRun
        Rows, slices, skipped (already finished) slices, rows with errors, and the
        :class:`framekit.RunStats` totals of this run (also in ``fk.last_run()``).

    Examples
    --------
    >>> import framekit as fk
    >>> from framekit.evaluators import RetrievalRelevance
    >>> run = fk.evaluate_parquet(
    ...     "logs/*.parquet", "scored.parquet", [RetrievalRelevance()],
    ...     {"input": "question", "context": "docs"}, judge="openai/gpt-4o-mini",
    ... )  # doctest: +SKIP
    >>> run.rows, run.skipped_slices, run.stats.requests_sent  # doctest: +SKIP
    (2000000, 0, 1500)
    """
    if engine == "ray":
        # framekit.ray is an entry point above io (it drives io's slices on Ray): looked
        # up by name at call time, like a plugin, so that io never depends on it.
        on_ray = importlib.import_module("framekit.ray").evaluate_parquet
        return on_ray(source, destination, evaluators, mapping, judge=judge, cache=cache,
                      on_error=on_error, progress=progress, details=details,
                      overwrite=overwrite, slice_rows=slice_rows, **ray_options)  # type: ignore[no-any-return]  # fmt: skip
    if engine != "local" or ray_options:
        raise InputError(f"engine must be 'local' or 'ray', got {engine!r} {ray_options or ''}")
    return run_sync(
        aevaluate_parquet(
            source,
            destination,
            evaluators,
            mapping,
            judge=judge,
            cache=cache,
            on_error=on_error,
            progress=progress,
            details=details,
            overwrite=overwrite,
            slice_rows=slice_rows,
        )
    )


async def aevaluate_parquet(
    source: SourceLike,
    destination: str | os.PathLike[str],
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    judge: JudgeLike | None = None,
    cache: Cache | str | bool | None = None,
    on_error: OnError = "record",
    progress: bool = True,
    details: bool = False,
    overwrite: bool = False,
    slice_rows: int | None = None,
) -> ParquetRun:
    """Awaitable :func:`evaluate_parquet` (same parameters and result)."""
    opts = _Options(judge, cache, on_error, progress, details, overwrite, slice_rows)
    dest = Path(destination)
    if _is_duckdb_relation(source):
        with _materialised(source, dest) as (path, identity):
            label = source_label(source)
            return await _evaluate_files([path], identity, dest, evaluators, mapping, opts, label)
    return await _evaluate_files(resolve_sources(source), None, dest, evaluators, mapping, opts)


def evaluate_sql(
    sql: str,
    destination: str | os.PathLike[str],
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    con: Any = None,
    **options: Any,
) -> ParquetRun:
    """Score the result of a DuckDB query, streamed, into a Parquet file.

    The query's result is first copied to a temporary Parquet file beside the
    destination (DuckDB streams it, so it may be larger than memory); then this is
    :func:`evaluate_parquet`, including resuming after an interruption.

    Parameters
    ----------
    sql
        A DuckDB query, e.g. ``"select * from 'logs/*.parquet' where strategy = 'dense'"``.
    destination, evaluators, mapping
        As for :func:`evaluate_parquet`.
    con
        A DuckDB connection whose tables and views the query may use (default: a new
        in-memory connection).
    **options
        ``judge``, ``cache``, ``on_error``, ``progress``, ``details``, ``overwrite``,
        ``slice_rows``, as for :func:`evaluate_parquet`.

    Examples
    --------
    >>> run = evaluate_sql(
    ...     "select question, docs from 'runs.parquet' where day = '2024-06-01'",
    ...     "scored.parquet", [RetrievalRelevance()], {"input": "question", "context": "docs"},
    ... )  # doctest: +SKIP
    """
    return evaluate_parquet(run_sql(sql, con), destination, evaluators, mapping, **options)


@dataclass(frozen=True)
class _Options:
    judge: JudgeLike | None
    cache: Cache | str | bool | None
    on_error: OnError
    progress: bool
    details: bool
    overwrite: bool
    slice_rows: int | None


async def _evaluate_files(
    files: list[Path],
    identity: Any,
    destination: Path,
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None,
    opts: _Options,
    label: str | None = None,
) -> ParquetRun:
    started = time.perf_counter()
    evs = check_evaluators(evaluators)
    if opts.on_error not in ("record", "raise"):
        raise InputError(f"on_error must be 'record' or 'raise', got {opts.on_error!r}")
    dest = destination.absolute()
    _check_destination(dest, files)
    schema = _schema_of(files)
    clash = validate_inputs(schema, evs, mapping, opts.overwrite, opts.details)
    slices = plan_slices(_row_groups(files), opts.slice_rows)
    # At least one column, or a slice would have no height.
    columns = needed_columns(schema, mapping, evs) or list(schema)[:1]

    # Resolved once: one judge (one announcement, one limiter identity), one open cache.
    resolved_judge = resolve_judge(opts.judge)
    resolved_cache = resolve_cache(opts.cache)
    manifest = {
        "format": _MANIFEST_FORMAT,
        "sources": identity if identity is not None else _file_identity(files),
        "slices": [list(s) for s in slices],
        "run": run_fingerprint(
            evs, mapping, resolved_judge, details=opts.details, overwrite=opts.overwrite
        ),
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    parts = _Parts(dest)
    done = parts.open(manifest)
    scan = scan_sources(files)
    total_rows = sum(n for _, n in slices)
    run = ParquetRun(dest, total_rows, len(slices), len(done), sum(slices[i][1] for i in done))
    bar = _RowBar(total_rows, run.skipped_rows, len(evs)) if opts.progress and total_rows else None
    try:
        await submit_all_slices(
            resolved_judge,
            slices,
            done,
            lambda offset, length: scan.select(columns).slice(offset, length).collect(),
            evaluators=evs,
            mapping=mapping,
            cache=resolved_cache,
            details=opts.details,
            overwrite=opts.overwrite,
        )
        for i, (offset, length) in enumerate(slices):
            if i in done:
                continue
            frame = scan.select(columns).slice(offset, length).collect()
            scored = await aevaluate_dataframe(
                frame,
                evs,
                mapping,
                judge=resolved_judge,
                cache=resolved_cache,
                on_error="record",
                progress=bar.report if bar is not None else False,
                details=opts.details,
                overwrite=opts.overwrite,
            )
            del frame
            slice_stats = _last_stats()
            parts.write(i, scored.select(_result_columns(evs, opts.details)))
            del scored
            _add_stats(run.stats, slice_stats)
            if bar is not None:
                bar.advance(length, run.stats.failures)
        if bar is not None:
            bar.close()
            bar = None
        resolver = JudgeResolver(resolved_judge)
        record = build_record(
            evs,
            [resolver(ev) for ev in evs],
            mapping,
            run.stats,
            source=label or source_label(files),
        )
        run.stats.provenance = record
        if not slices:
            await _write_empty(
                scan, evs, mapping, opts.details, clash, dest, parts, to_metadata(record)
            )
        else:
            if identity is None and _file_identity(files) != manifest["sources"]:
                raise InputError("a source file changed while it was being scored; run again")
            kept = [c for c in schema if c not in clash]
            _assemble(files, kept, slices, parts, dest, to_metadata(record))
        parts.remove()
    finally:
        if bar is not None:
            bar.close()
        parts.close()
    run.failed_rows = _failed_rows(dest, evs)
    run.elapsed_s = run.stats.elapsed_s = time.perf_counter() - started
    record_last(run.stats)
    if opts.progress:
        print(run.summary(), file=sys.stderr)
    if opts.on_error == "raise" and run.failed_rows:
        raise EvaluationFailed(
            f"{run.failed_rows} rows have errors; see the *_error columns of {dest}",
            pl.scan_parquet(dest),
        )
    return run


def _check_destination(destination: Path, files: Sequence[Path]) -> None:
    if destination.is_dir():
        raise InputError(f"destination {str(destination)!r} is a directory; name a file")
    if destination.resolve() in files:
        raise InputError(f"destination {str(destination)!r} is also a source; write elsewhere")
