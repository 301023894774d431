"""``evaluate_parquet(..., engine="ray")``: the slices of a Parquet run, scored on Ray.

The same run as :func:`framekit.evaluate_parquet` (same slice plan, manifest, parts
directory, atomic assembly, so the same destination file) with the slices scored by a
pool of Ray actors instead of this process. The driver files each slice's results as a
part the moment they arrive; the parts are the run's record of what is finished, written
beside the output. A killed run, started again, skips the finished slices; the
unfinished ones cost nothing for answers already in the cache (every answer is written to
it as it arrives, by a writer thread in groups), so only the calls in flight at the kill
and the answers not yet written (milliseconds' worth) are paid twice. Workers read
the sources by path, so on several machines the sources, the destination's directory and
(to share answers) the cache must be on a shared filesystem.
"""

from __future__ import annotations

import os
import pickle
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import ray
import ray.data

from framekit._aio import run_sync
from framekit._errors import InputError
from framekit.engine.mapping import MappingValue
from framekit.evaluators.base import Evaluator
from framekit.io import (
    ParquetJob,
    ParquetOptions,
    ParquetRun,
    SourceLike,
    resolve_sources,
    run_parquet,
)
from framekit.ray._dataset import ensure_ray, pool_settings, run_spec
from framekit.ray._scorer import ROW_COL, SLICE_COL, STATS_COL, SliceScorer


def evaluate_parquet(
    source: SourceLike,
    destination: str | os.PathLike[str],
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    address: str | None = None,
    workers: int | None = None,
    num_cpus: float | None = None,
    shared_limit: bool = True,
    options: ParquetOptions | None = None,
    **keywords: Any,
) -> ParquetRun:
    """:func:`framekit.evaluate_parquet` with the slices scored by Ray workers.

    Parameters
    ----------
    source, destination, evaluators, mapping
        As for :func:`framekit.evaluate_parquet` (a DuckDB relation is not accepted).
        A slice is the unit of work a worker takes and of resuming.
    address
        The Ray cluster to connect to (``"auto"``, ``"ray://head:10001"``); ``None``
        uses the current connection or starts a local instance.
    workers, num_cpus, shared_limit
        As for :func:`framekit.ray.evaluate_dataset`.
    options, **keywords
        ``judge``, ``cache``, ``on_error``, ``progress``, ``details``, ``overwrite``,
        ``slice_rows``, ``max_cost_usd`` (one budget for every worker) as for :func:`framekit.evaluate_parquet`, as keywords or as one
        :class:`framekit.io.ParquetOptions`.

    Returns
    -------
    ParquetRun
        As :func:`framekit.evaluate_parquet`; its stats are the workers' summed.

    Examples
    --------
    >>> import framekit.ray as fkray
    >>> run = fkray.evaluate_parquet("traces/*.parquet", "scored.parquet",
    ...     [RetrievalRelevance()], {"input": "question", "context": "docs"},
    ...     judge="local", workers=2)  # doctest: +SKIP
    """
    if options is None:
        try:
            options = ParquetOptions(**keywords)
        except TypeError as exc:  # an unknown keyword
            raise InputError(f"framekit.ray.evaluate_parquet: {exc}") from None
    elif keywords:
        raise InputError("give the run's options once: as options= or as keywords")
    if not isinstance(source, (str, os.PathLike, list, tuple)):
        raise InputError("engine='ray' takes Parquet files or globs, not a DuckDB relation")
    files = resolve_sources(source)
    job = ParquetJob(files, Path(destination), evaluators, mapping, options)
    if not job.slices:
        # Nothing to send to a cluster: the local engine writes the empty file.
        return run_sync(run_parquet(files, job.dest, job.evaluators, mapping, options))

    judge, cache = options.judge, options.cache
    details, overwrite = options.details, options.overwrite
    ensure_ray(address)
    spec = run_spec(
        job.evaluators, mapping, judge, cache, details, overwrite, shared_limit,
        options.max_cost_usd,
    )  # fmt: skip
    size, cpus = pool_settings(spec.judge, workers, num_cpus)
    done = job.open(spec.judge)
    todo = [
        {"slice": i, "offset": offset, "length": length}
        for i, (offset, length) in enumerate(job.slices)
        if i not in done
    ]
    try:
        if todo:
            ds = ray.data.from_items(todo, override_num_blocks=len(todo)).map_batches(
                SliceScorer,
                fn_constructor_args=(spec, [str(f) for f in files], job.columns),
                batch_size=1,
                batch_format="pyarrow",
                compute=ray.data.ActorPoolStrategy(size=min(size, len(todo))),
                num_cpus=cpus,
            )
            _file_parts(ds, job)
        job.write(job.metadata(judge))
    finally:
        job.close()
    return job.finish()


def _file_parts(ds: ray.data.Dataset, job: ParquetJob) -> None:
    """File each slice's results as its part as soon as all its rows have arrived."""
    pending: dict[int, list[pl.DataFrame]] = {}
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        frame = pl.from_arrow(batch)
        assert isinstance(frame, pl.DataFrame)
        for (index,), rows in frame.group_by(SLICE_COL):
            i = int(index)  # type: ignore[call-overload]
            pending.setdefault(i, []).append(rows)
            if sum(f.height for f in pending[i]) < job.slices[i][1]:
                continue
            whole = pl.concat(pending.pop(i)).sort(ROW_COL)
            stats = [pickle.loads(blob) for blob in whole[STATS_COL].drop_nulls()]
            job.file_slice(i, whole.drop(SLICE_COL, ROW_COL, STATS_COL), *stats)
