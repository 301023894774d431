"""The entry points: ``evaluate_parquet``, ``aevaluate_parquet`` and ``evaluate_sql``.

Each slice of the sources is scored by :func:`framekit.evaluate.evaluate_with_stats` and its
result columns saved as a part; a re-run with the same manifest skips the finished
slices. When every slice is done, the input columns and the parts are written to the
destination in one atomic step.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from framekit._aio import run_sync
from framekit._errors import InputError
from framekit._result_columns import result_columns as _result_columns
from framekit.engine.cache import Cache, resolve_cache
from framekit.engine.prepare import MappingValue
from framekit.evaluate import OnError, evaluate_with_stats
from framekit.evaluators.base import Evaluator
from framekit.io._assemble import _write_empty
from framekit.io._batch import submit_all_slices
from framekit.io._duckdb import _is_duckdb_relation, _materialised, run_sql
from framekit.io._job import ParquetJob
from framekit.io._provenance import source_label
from framekit.io._run import ParquetRun
from framekit.io._sources import (
    SourceLike,
    resolve_sources,
    scan_sources,
)
from framekit.judges.judge import JudgeLike, resolve_judge


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
    job = ParquetJob(
        files,
        destination,
        evaluators,
        mapping,
        on_error=opts.on_error,
        details=opts.details,
        overwrite=opts.overwrite,
        slice_rows=opts.slice_rows,
        progress=opts.progress,
    )
    evs = job.evaluators
    # Resolved once: one judge (one announcement, one limiter identity), one open cache.
    resolved_judge = resolve_judge(opts.judge)
    resolved_cache = resolve_cache(opts.cache)
    done = job.open(resolved_judge, identity, cache=resolved_cache)
    scan = scan_sources(files)

    def read(offset: int, length: int) -> pl.DataFrame:
        return scan.select(job.columns).slice(offset, length).collect()

    try:
        await submit_all_slices(
            resolved_judge,
            job.slices,
            done,
            read,
            evaluators=evs,
            mapping=mapping,
            cache=resolved_cache,
            details=opts.details,
            overwrite=opts.overwrite,
        )
        for i, (offset, length) in enumerate(job.slices):
            if i in done:
                continue
            # This slice's own statistics, never fk.last_run(): another thread's run may
            # have finished in between.
            scored, stats = await evaluate_with_stats(
                read(offset, length),
                evs,
                mapping,
                judge=resolved_judge,
                cache=resolved_cache,
                progress=job.bar.report if job.bar is not None else False,
                details=opts.details,
                overwrite=opts.overwrite,
            )
            job.file_slice(i, scored.select(_result_columns(evs, opts.details)), stats)
            del scored
        metadata = job.metadata(resolved_judge, label)
        if job.slices:
            job.write(metadata)
        else:
            await _write_empty(
                scan, evs, mapping, opts.details, job.clash, job.dest, job.parts, metadata
            )
            job.parts.remove()
    finally:
        job.close()
    return job.finish()
