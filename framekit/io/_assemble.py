"""Writing a scored Parquet file, atomically, with its run record in the metadata.

The destination of a run is assembled from the input columns and the result parts of
its slices (:func:`_assemble`); a frame scored elsewhere is written whole
(:func:`write_parquet`). Either way the file is written under a temporary name and
renamed onto its own only when complete, so no half-written file ever has that name and
an existing destination stays as it was until then.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from framekit._errors import InputError
from framekit._frames import to_polars
from framekit._paths import check_regular_or_new
from framekit._provenance import to_metadata
from framekit.engine.mapping import MappingValue
from framekit.evaluate import evaluate_with_stats
from framekit.evaluators.base import Evaluator
from framekit.io._parts import _Parts

ASSEMBLY_BATCH_ROWS = 16_384  # rows read at a time when the destination is written
OUTPUT_ROW_GROUP_ROWS = 65_536  # row group size of the destination


def _input_batches(files: Sequence[Path], columns: list[str]) -> Iterator[Any]:
    """The input's record batches, in order, a few pages at a time."""
    import pyarrow.parquet as pq

    for path in files:
        with pq.ParquetFile(path) as handle:
            yield from handle.iter_batches(batch_size=ASSEMBLY_BATCH_ROWS, columns=columns)


def _assemble(
    files: Sequence[Path],
    columns: list[str],
    slices: Sequence[tuple[int, int]],
    parts: _Parts,
    destination: Path,
    metadata: dict[bytes, bytes] | None = None,
) -> None:
    """Stream the input columns and the result parts into a temporary file, then rename it.

    The input is read once more here, with pyarrow in batches of ``ASSEMBLY_BATCH_ROWS``
    rows rather than a slice at a time: decoding a whole row group for a slice costs
    several times its size in memory, and this step needs none of polars' work.
    """
    tmp = parts.dir / "assembled.parquet.tmp"
    batches = _input_batches(files, columns)
    try:
        _write_assembled(tmp, batches, slices, parts, metadata)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk gets its space back; no half file stays
        raise
    os.replace(tmp, destination)


def _write_assembled(
    tmp: Path,
    batches: Iterator[Any],
    slices: Sequence[tuple[int, int]],
    parts: _Parts,
    metadata: dict[bytes, bytes] | None,
) -> None:
    """The input batches and the parts, row group by row group, into ``tmp``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pending = None
    buffered: list[Any] = []
    writer: pq.ParquetWriter | None = None

    def flush() -> None:
        nonlocal writer
        table = pa.concat_tables(buffered).replace_schema_metadata(None)
        buffered.clear()
        if writer is None:
            # The run record goes into the file's key-value metadata (framekit._provenance).
            schema = table.schema.with_metadata(metadata) if metadata else table.schema
            writer = pq.ParquetWriter(tmp, schema, compression="zstd")
        elif not table.schema.equals(writer.schema, check_metadata=False):
            # e.g. string in one file, large_string in another
            table = table.cast(writer.schema.remove_metadata())
        writer.write_table(table, row_group_size=table.num_rows)

    try:
        for i, (_, length) in enumerate(slices):
            results = pq.read_table(parts.part(i))
            done = 0
            while done < length:
                if pending is None or pending.num_rows == 0:
                    pending = next(batches)
                take = min(pending.num_rows, length - done)
                piece = pa.Table.from_batches([pending.slice(0, take)])
                pending = pending.slice(take)
                for name in results.column_names:
                    piece = piece.append_column(
                        results.schema.field(name), results.column(name).slice(done, take)
                    )
                buffered.append(piece)
                done += take
                if sum(t.num_rows for t in buffered) >= OUTPUT_ROW_GROUP_ROWS:
                    flush()
        if buffered:
            flush()
    finally:
        if writer is not None:
            writer.close()


async def _write_empty(
    scan: pl.LazyFrame,
    evs: Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None,
    details: bool,
    drop: Sequence[str],
    dest: Path,
    parts: _Parts,
    metadata: dict[bytes, bytes] | None = None,
) -> None:
    # No rows: the frame layer gives the typed, empty result columns without any call.
    empty = scan.collect().drop(drop)
    scored, _ = await evaluate_with_stats(
        empty, evs, mapping, judge="local", cache=False, progress=False, details=details
    )
    import pyarrow.parquet as pq

    tmp = parts.dir / "assembled.parquet.tmp"
    table = scored.to_arrow()
    pq.write_table(table.replace_schema_metadata(metadata) if metadata else table, tmp)
    os.replace(tmp, dest)


def write_parquet(
    scored: Any,
    path: str | os.PathLike[str],
    provenance: Mapping[str, Any] | None = None,
) -> Path:
    """Write a scored frame to Parquet with its run record in the file's metadata.

    ``framekit report`` reads the record back and shows it at the top of the HTML report,
    so a file found next month still says which judge, evaluators and mapping made it.

    Parameters
    ----------
    scored
        A frame returned by ``evaluate_dataframe`` (polars, pandas, Arrow...).
    path
        The Parquet file to write (replaced if it exists).
    provenance
        The run record; default ``fk.last_run().provenance``, the latest run's.

    Returns
    -------
    pathlib.Path
        ``path``, now holding the frame and its run record.

    Examples
    --------
    >>> import framekit as fk
    >>> scored = fk.evaluate_dataframe(df, [fk.evaluators.Coherence()])  # doctest: +SKIP
    >>> fk.io.write_parquet(scored, "scored.parquet")  # doctest: +SKIP
    PosixPath('scored.parquet')
    """
    import pyarrow.parquet as pq

    from framekit.engine.stats import last_run

    if provenance is None:
        stats = last_run()
        provenance = stats.provenance if stats is not None else None
    if provenance is None:
        raise InputError(
            "no run record to write: run fk.evaluate_dataframe first, or pass provenance="
        )
    table = to_polars(scored).frame.to_arrow()
    table = table.replace_schema_metadata(
        {**(table.schema.metadata or {}), **to_metadata(provenance)}
    )
    target = Path(path)
    check_regular_or_new(target, "path")
    tmp = target.with_name(f".{target.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, target)
    return target
