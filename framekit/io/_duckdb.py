"""DuckDB: a query's result as a Parquet source, and ``register`` for querying results.

A relation is copied to a temporary Parquet file (DuckDB streams it) that is then scored
like any other source; :func:`register` puts a scored frame (without copying it) or a
Parquet file in front of a DuckDB connection as a view.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from framekit._errors import InputError
from framekit.io._sources import _is_glob


def _is_duckdb_relation(value: Any) -> bool:
    return type(value).__module__.split(".")[0] in ("duckdb", "_duckdb") and hasattr(
        value, "to_parquet"
    )


def _quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def run_sql(sql: str, con: Any = None) -> Any:
    """The DuckDB relation of ``sql`` (on ``con`` or a new in-memory connection).

    A query DuckDB rejects (syntax, missing file or table) raises :class:`InputError`.
    """
    import duckdb

    connection = con if con is not None else duckdb.connect()
    try:
        return connection.sql(sql)
    except duckdb.Error as exc:
        raise InputError(f"the SQL query failed: {str(exc).splitlines()[0]}") from None


@contextlib.contextmanager
def _materialised(relation: Any, destination: Path) -> Iterator[tuple[Path, Any]]:
    """The relation copied to a temporary Parquet file next to the destination.

    The query is run again on every call (its inputs may have changed); its result's
    sha256 is the source identity, so a re-run over the same data resumes.
    """
    import duckdb

    # Beside the destination (same disk, room for big data) when that directory exists;
    # an input error must not leave a new directory behind.
    parent = destination.absolute().parent
    where = parent if parent.is_dir() else Path(tempfile.gettempdir())
    tmpdir = Path(tempfile.mkdtemp(prefix=f".{destination.name}.framekit-sql-", dir=where))
    try:
        path = tmpdir / "input.parquet"
        try:
            relation.to_parquet(str(path), compression="zstd", row_group_size=100_000)
        except duckdb.Error as exc:
            raise InputError(f"the SQL query failed: {str(exc).splitlines()[0]}") from None
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        yield path, [["duckdb", h.hexdigest()]]
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def _as_paths(value: Any) -> list[str] | None:
    """A path, or a non-empty list of paths, as strings; ``None`` for anything else."""
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    if (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(v, (str, os.PathLike)) for v in value)
    ):
        return [os.fspath(v) for v in value]
    return None


def register(con: Any, name: str, scored_or_path: Any) -> Any:
    """Make a scored frame or a Parquet file queryable in DuckDB as the view ``name``.

    A polars DataFrame is handed over as Arrow without copying the data (polars' string
    views are shared with DuckDB; registering the DataFrame itself would copy it). A
    path or glob becomes ``CREATE OR REPLACE VIEW name AS SELECT * FROM read_parquet(...)``,
    so nothing is read until queried. pandas frames, Arrow tables and LazyFrames are
    registered as they are.

    Parameters
    ----------
    con
        A ``duckdb.DuckDBPyConnection``.
    name
        The view's name.
    scored_or_path
        A frame (polars, pandas, Arrow, LazyFrame), or a Parquet path or glob (str or
        Path), or a list of them.

    Returns
    -------
    The connection, for chaining.

    Examples
    --------
    >>> import duckdb, polars as pl
    >>> con = duckdb.connect()
    >>> scored = pl.DataFrame({"strategy": ["a", "b"], "coherence_score": [1.0, 0.5]})
    >>> _ = register(con, "scored", scored)
    >>> con.sql("select avg(coherence_score) from scored").fetchall()
    [(0.75,)]
    """
    paths = _as_paths(scored_or_path)
    if paths is not None:
        for text in paths:
            if not _is_glob(text) and not os.path.exists(text):
                raise InputError(f"no such file: {text!r}")
        listed = ", ".join(_quote_literal(p) for p in paths)
        con.execute(
            f"CREATE OR REPLACE VIEW {_quote_ident(name)} AS SELECT * FROM read_parquet([{listed}])"
        )
        return con
    obj = scored_or_path
    if isinstance(obj, pl.DataFrame):
        # The newest compat level keeps string views, which DuckDB reads in place.
        obj = obj.to_arrow(compat_level=pl.CompatLevel.newest())
    con.register(name, obj)
    return con
