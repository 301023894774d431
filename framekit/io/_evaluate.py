"""The local engine of a Parquet run: every slice scored in this process.

Each slice of the sources is scored by :func:`framekit.evaluate.evaluate_with_stats` and
its result columns saved as a part; a re-run with the same manifest skips the finished
slices. When every slice is done, the input columns and the parts are written to the
destination in one atomic step. :func:`framekit.evaluate_parquet` chooses this engine or
Ray's (:mod:`framekit.parquet`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from framekit._aio import note_interrupted
from framekit._provenance import source_label
from framekit._result_columns import result_columns as _result_columns
from framekit.engine.budget import spending_limit
from framekit.engine.cache import resolve_cache
from framekit.engine.mapping import MappingValue
from framekit.engine.stats import RunStats
from framekit.evaluate import evaluate_with_stats
from framekit.evaluators.base import Evaluator
from framekit.io._assemble import _write_empty
from framekit.io._batch import submit_all_slices
from framekit.io._duckdb import _is_duckdb_relation, _materialised
from framekit.io._job import ParquetJob, ParquetOptions
from framekit.io._run import ParquetRun
from framekit.io._sources import (
    SourceLike,
    read_slice,
    resolve_sources,
    scan_sources,
)
from framekit.judges.resolve import resolve_judge


async def run_parquet(
    source: SourceLike,
    destination: str | os.PathLike[str],
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None,
    options: ParquetOptions,
) -> ParquetRun:
    """Score a Parquet source (or DuckDB relation) in this process, slice by slice: the
    local engine of :func:`framekit.evaluate_parquet`."""
    dest = Path(destination)
    with spending_limit(options.max_cost_usd):  # one budget over every slice
        if not _is_duckdb_relation(source):
            files = resolve_sources(source)
            return await _evaluate_files(files, None, dest, evaluators, mapping, options)
        with _materialised(source, dest) as (path, identity):
            label = source_label(source)
            return await _evaluate_files(
                [path], identity, dest, evaluators, mapping, options, label
            )


async def _evaluate_files(
    files: list[Path],
    identity: Any,
    destination: Path,
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None,
    opts: ParquetOptions,
    label: str | None = None,
) -> ParquetRun:
    job = ParquetJob(files, destination, evaluators, mapping, opts)
    evs = job.evaluators
    # Resolved once: one judge (one announcement, one limiter identity), one open cache.
    resolved_judge = resolve_judge(opts.judge)
    resolved_cache = resolve_cache(opts.cache)
    done = job.open(resolved_judge, identity, cache=resolved_cache)
    scan = scan_sources(files)

    def read(offset: int, length: int) -> pl.DataFrame:
        return read_slice(files, job.columns, offset, length)

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
            live = RunStats()
            if job.bar is not None:
                job.bar.stats = live  # its requests in flight, shown as "sending"
            scored, stats = await evaluate_with_stats(
                read(offset, length),
                evs,
                mapping,
                judge=resolved_judge,
                cache=resolved_cache,
                progress=job.bar.report if job.bar is not None else False,
                details=opts.details,
                overwrite=opts.overwrite,
                stats=live,
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
    except asyncio.CancelledError:
        note_interrupted(job.interrupted())  # the slice's own note counts only its answers
        raise
    finally:
        job.close()
    return job.finish()
