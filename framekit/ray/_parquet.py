"""``evaluate_parquet(..., engine="ray")``: the slices of a Parquet run, scored on Ray.

The same run as :func:`framekit.evaluate_parquet` (same slice plan, manifest, parts
directory, atomic assembly, so the same destination file) with the slices scored by a
pool of Ray actors instead of this process. The driver files each slice's results as a
part the moment they arrive; the parts are the run's record of what is finished, written
beside the output. A killed run, started again, skips the finished slices; the
unfinished ones cost nothing for answers already in the cache (every answer is written to
it as it arrives), so only the calls in flight at the kill are paid twice. Workers read
the sources by path, so on several machines the sources, the destination's directory and
(to share answers) the cache must be on a shared filesystem.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl
import ray
import ray.data

from framekit._errors import InputError
from framekit._mapping import MappingValue
from framekit._provenance import to_metadata
from framekit.engine.cache import Cache
from framekit.engine.jobs import JudgeResolver, check_evaluators
from framekit.engine.provenance import build_record
from framekit.engine.stats import record_last
from framekit.evaluators.base import Evaluator
from framekit.frame import EvaluationFailed, OnError
from framekit.io import (
    ParquetRun,
    SourceLike,
    needed_columns,
    plan_slices,
    resolve_sources,
    run_fingerprint,
    validate_inputs,
)
from framekit.io._assemble import _assemble
from framekit.io._evaluate import _check_destination
from framekit.io._fingerprint import _file_identity
from framekit.io._parts import _MANIFEST_FORMAT, _Parts
from framekit.io._provenance import source_label
from framekit.io._run import _add_stats, _failed_rows, _RowBar
from framekit.io._sources import _row_groups, _schema_of
from framekit.judges.base import JudgeLike
from framekit.ray._dataset import ensure_ray, pool_settings, run_spec
from framekit.ray._scorer import ROW_COL, SLICE_COL, STATS_COL, SliceScorer


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
    address: str | None = None,
    workers: int | None = None,
    num_cpus: float | None = None,
    shared_limit: bool = True,
) -> ParquetRun:
    """:func:`framekit.evaluate_parquet` with the slices scored by Ray workers.

    Parameters
    ----------
    source, destination, evaluators, mapping, judge, cache, on_error, progress, details, \
overwrite, slice_rows
        As for :func:`framekit.evaluate_parquet` (a DuckDB relation is not accepted).
        A slice is the unit of work a worker takes and of resuming.
    address
        The Ray cluster to connect to (``"auto"``, ``"ray://head:10001"``); ``None``
        uses the current connection or starts a local instance.
    workers, num_cpus, shared_limit
        As for :func:`framekit.ray.evaluate_dataset`.

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
    started = time.perf_counter()
    evs = check_evaluators(evaluators)
    if on_error not in ("record", "raise"):
        raise InputError(f"on_error must be 'record' or 'raise', got {on_error!r}")
    if not isinstance(source, (str, os.PathLike, list, tuple)):
        raise InputError("engine='ray' takes Parquet files or globs, not a DuckDB relation")
    files = resolve_sources(source)
    dest = Path(destination).absolute()
    _check_destination(dest, files)
    schema = _schema_of(files)
    clash = validate_inputs(schema, evs, mapping, overwrite, details)
    slices = plan_slices(_row_groups(files), slice_rows)
    if not slices:
        # Nothing to send to a cluster: the local engine writes the empty file.
        from framekit.io import evaluate_parquet as local

        return local(
            files,
            dest,
            evs,
            mapping,
            judge=judge,
            cache=cache,
            on_error=on_error,
            progress=progress,
            details=details,
            overwrite=overwrite,
        )
    columns = needed_columns(schema, mapping, evs) or list(schema)[:1]

    ensure_ray(address)
    spec = run_spec(evs, mapping, judge, cache, details, overwrite, shared_limit)
    size, cpus = pool_settings(spec.judge, workers, num_cpus)
    manifest = {
        "format": _MANIFEST_FORMAT,
        "sources": _file_identity(files),
        "slices": [list(s) for s in slices],
        "run": run_fingerprint(evs, mapping, spec.judge, details=details, overwrite=overwrite),
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    parts = _Parts(dest)
    done = parts.open(manifest)
    total_rows = sum(n for _, n in slices)
    run = ParquetRun(dest, total_rows, len(slices), len(done), sum(slices[i][1] for i in done))
    bar = _RowBar(total_rows, run.skipped_rows, len(evs)) if progress else None
    todo = [
        {"slice": i, "offset": offset, "length": length}
        for i, (offset, length) in enumerate(slices)
        if i not in done
    ]
    try:
        if todo:
            ds = ray.data.from_items(todo, override_num_blocks=len(todo)).map_batches(
                SliceScorer,
                fn_constructor_args=(spec, [str(f) for f in files], columns),
                batch_size=1,
                batch_format="pyarrow",
                compute=ray.data.ActorPoolStrategy(size=min(size, len(todo))),
                num_cpus=cpus,
            )
            _file_parts(ds, dict(enumerate(slices)), parts, run, bar)
        if bar is not None:
            bar.close()
            bar = None
        if _file_identity(files) != manifest["sources"]:
            raise InputError("a source file changed while it was being scored; run again")
        resolver = JudgeResolver(judge)
        record = build_record(
            evs, [resolver(ev) for ev in evs], mapping, run.stats, source=source_label(files)
        )
        run.stats.provenance = record
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
    if progress:
        print(run.summary(), file=sys.stderr)
    if on_error == "raise" and run.failed_rows:
        raise EvaluationFailed(
            f"{run.failed_rows} rows have errors; see the *_error columns of {dest}",
            pl.scan_parquet(dest),
        )
    return run


def _file_parts(
    ds: ray.data.Dataset,
    slices: dict[int, tuple[int, int]],
    parts: _Parts,
    run: ParquetRun,
    bar: _RowBar | None,
) -> None:
    """Write each slice's results as its part as soon as all its rows have arrived."""
    pending: dict[int, list[pl.DataFrame]] = {}
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        frame = pl.from_arrow(batch)
        assert isinstance(frame, pl.DataFrame)
        for (index,), rows in frame.group_by(SLICE_COL):
            i = int(index)  # type: ignore[call-overload]
            pending.setdefault(i, []).append(rows)
            have = sum(f.height for f in pending[i])
            if have < slices[i][1]:
                continue
            whole = pl.concat(pending.pop(i)).sort(ROW_COL)
            for blob in whole[STATS_COL].drop_nulls():
                _add_stats(run.stats, pickle.loads(blob))
            parts.write(i, whole.drop(SLICE_COL, ROW_COL, STATS_COL))
            if bar is not None:
                bar.advance(slices[i][1], run.stats.failures)
