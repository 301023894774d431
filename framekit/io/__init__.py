"""Parquet larger than memory, and DuckDB: the machinery of ``fk.evaluate_parquet``.

:func:`framekit.evaluate_parquet` (in :mod:`framekit.parquet`, which picks the engine)
scores a Parquet file (or glob, or list of files) slice by slice:

- Slices follow the row groups (merged when tiny, split when huge), read with
  ``pl.scan_parquet(...).slice(offset, n)``; only the columns the mapping needs are read
  for scoring, so peak memory follows the slice size, not the file size.
- Each finished slice's result columns go to a *part* in a hidden directory next to the
  destination (``.<name>.framekit-parts/part-00000.parquet``), written under a temporary
  name and renamed into place only when complete. A manifest there records what the parts
  belong to: the sources' identity (path, size, mtime) and a fingerprint of the evaluators,
  mapping and judges. A re-run with the same manifest skips the finished slices, and the
  unfinished ones cost nothing for answers already in the response cache.
- When every slice is done, the input columns (read again in small batches) and the
  parts are streamed into one file under a temporary name, which is then renamed onto
  the destination: no half-written file ever has the destination's name, and an existing
  destination stays as it was until the new one is complete.

DuckDB: ``fk.evaluate_sql`` (and a relation passed as ``source``) first copies the query's
result to a temporary Parquet file (DuckDB streams it), then proceeds as above.
``register`` puts a scored frame (without copying it) or a Parquet file in front of a
DuckDB connection as a view.

Where each part lives:

- ``_evaluate``: :func:`run_parquet`, the local engine: the slice-by-slice loop of this
  process.
- ``_job``: :class:`ParquetJob` and its :class:`ParquetOptions`, one run's checks,
  manifest, parts, assembly and summary, shared with the Ray engine (``framekit.ray``),
  which scores the slices elsewhere.
- ``_sources``: source files, schema, row groups, the slice plan.
- ``_columns``: the columns scoring reads, and the checks made before any write.
- ``_fingerprint``: the run's identity recorded in the manifest.
- ``_parts``: the parts directory, its manifest and lock (what makes a re-run resume).
- ``_assemble``: the final, atomic write of the destination.
- ``_run``: :class:`ParquetRun`, stats summed over slices, the progress bar.
- ``_duckdb``: SQL queries as sources, and ``register``.
"""

# Besides __all__, every name framekit.io had without a leading underscore stays here
# (framekit.cli, framekit.engine.dryrun and the tests use the source and slicing helpers).
from framekit._provenance import read as read_provenance
from framekit.io._assemble import ASSEMBLY_BATCH_ROWS, OUTPUT_ROW_GROUP_ROWS, write_parquet
from framekit.io._columns import needed_columns, validate_inputs
from framekit.io._duckdb import register, run_sql
from framekit.io._evaluate import run_parquet
from framekit.io._fingerprint import run_fingerprint
from framekit.io._job import ParquetJob, ParquetOptions
from framekit.io._plan import plan_parquet
from framekit.io._run import ParquetRun
from framekit.io._sources import (
    MAX_SLICE_BYTES,
    MAX_SLICE_ROWS,
    MIN_SLICE_ROWS,
    SourceLike,
    plan_slices,
    resolve_sources,
    scan_sources,
)

__all__ = [
    "ParquetOptions",
    "ParquetRun",
    "read_provenance",
    "register",
    "run_parquet",
    "write_parquet",
]
