"""The run record in Parquet files: a label for the input, and ``write_parquet``."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from framekit._errors import InputError
from framekit._frames import to_polars
from framekit._provenance import read as _read
from framekit._provenance import to_metadata


def source_label(source: Any) -> str:
    """What was scored, in a few words: file paths, or the SQL query of a relation."""
    query = getattr(source, "sql_query", None)
    if callable(query):
        try:
            return "DuckDB query: " + " ".join(str(query()).split())
        except Exception:  # a relation that cannot show its query is still a relation
            return "a DuckDB relation"
    if isinstance(source, (str, os.PathLike)):
        return str(source)
    files = [str(p) for p in source] if isinstance(source, Sequence) else [str(source)]
    if len(files) > 3:
        return ", ".join(files[:3]) + f" and {len(files) - 3} more files"
    return ", ".join(files)


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
        The path written.

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
    tmp = target.with_name(f".{target.name}.tmp")
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, target)
    return target


def read_provenance(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The run record stored in a Parquet file by framekit, or ``None``.

    Examples
    --------
    >>> import framekit as fk
    >>> fk.io.read_provenance("scored.parquet")["judges"]  # doctest: +SKIP
    [{'kind': 'llm', 'model': 'openai/gpt-4o-mini', 'temperature': 0.0, ...}]
    """
    return _read(path)
