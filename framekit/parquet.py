"""``fk.evaluate_parquet`` and ``fk.evaluate_sql``: a Parquet run, on the engine asked for.

A Parquet run's machinery (slices, the parts that let a re-run resume, the atomic
assembly of the destination) is :mod:`framekit.io`. Who scores the slices is the
engine: this process (:func:`framekit.io.run_parquet`) or a pool of Ray workers
(:func:`framekit.ray.evaluate_parquet`). The choice is made here, above both, so that
neither of them knows the other.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from framekit._aio import run_sync
from framekit._errors import InputError
from framekit.engine.cache import Cache
from framekit.engine.mapping import MappingValue
from framekit.evaluate import OnError
from framekit.evaluators.base import Evaluator
from framekit.io import ParquetOptions, ParquetRun, SourceLike, run_parquet, run_sql
from framekit.judges.resolve import JudgeLike


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
    max_cost_usd: float | None = None,
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
    max_cost_usd
        One budget in US dollars over every slice (as for
        :func:`framekit.evaluate_dataframe`): the rows left when it is reached carry an
        error saying so in the destination, and the same call with a higher budget scores
        exactly those (the rest come from the cache). Also on Ray (one budget for the
        cluster).
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
    options = ParquetOptions(
        judge, cache, on_error, progress, details, overwrite, slice_rows, max_cost_usd
    )
    if engine == "ray":
        from framekit.ray import evaluate_parquet as on_ray

        return on_ray(source, destination, evaluators, mapping, options=options, **ray_options)
    if engine != "local" or ray_options:
        raise InputError(f"engine must be 'local' or 'ray', got {engine!r} {ray_options or ''}")
    return run_sync(run_parquet(source, destination, evaluators, mapping, options))


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
        ``slice_rows``, ``max_cost_usd``, as for :func:`evaluate_parquet`.

    Examples
    --------
    >>> run = evaluate_sql(
    ...     "select question, docs from 'runs.parquet' where day = '2024-06-01'",
    ...     "scored.parquet", [RetrievalRelevance()], {"input": "question", "context": "docs"},
    ... )  # doctest: +SKIP
    """
    return evaluate_parquet(run_sql(sql, con), destination, evaluators, mapping, **options)
