"""Where the rows come from: the source files, their schema, and the slices scored in turn.

A source is a Parquet file, a glob, a directory or a list of them; it is expanded and
checked once (:func:`resolve_sources`), then read through one LazyFrame
(:func:`scan_sources`) in the slices :func:`plan_slices` lays over the row groups.
"""

from __future__ import annotations

import glob as globlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Union

import polars as pl

from framekit._errors import InputError
from framekit._paths import check_utf8_name

SourceLike = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]], Any]

#: Slicing bounds when ``slice_rows`` is None (row-group sized slices).
MIN_SLICE_ROWS = 10_000  # consecutive smaller row groups are merged up to this
# Scoring a slice holds its mapped values as Python objects (a few times their Arrow
# size), so slices stay near 100,000 rows: about 250 MB of peak RSS for short texts.
MAX_SLICE_ROWS = 100_000  # larger row groups are split
MAX_SLICE_BYTES = 64 * 2**20  # ... and so are row groups above this uncompressed size

_PARQUET_MAGIC = b"PAR1"


def _is_glob(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def resolve_sources(source: SourceLike) -> list[Path]:
    """Expand a path, glob, directory or list of them into Parquet files (checked).

    Raises :class:`InputError` for a missing file, an empty glob, or a file that is not
    Parquet, naming the path.

    Examples
    --------
    >>> resolve_sources("no/such/file.parquet")
    Traceback (most recent call last):
    ...
    framekit.InputError: no such file: 'no/such/file.parquet'
    """
    if isinstance(source, (str, os.PathLike)):
        items: list[Any] = [source]
    else:
        try:
            items = list(source)
        except TypeError:
            raise InputError(
                f"source must be a path, a glob or a list of paths, not {type(source).__name__}"
            ) from None
    if not items:
        raise InputError("no source file given")
    files: list[Path] = []
    for item in items:
        text = os.fspath(item)
        if os.path.isdir(text):
            found = sorted(globlib.glob(os.path.join(text, "**", "*.parquet"), recursive=True))
            if not found:
                raise InputError(f"directory {text!r} holds no .parquet file")
        elif not os.path.exists(text) and _is_glob(text):
            found = sorted(p for p in globlib.glob(text, recursive=True) if os.path.isfile(p))
            if not found:
                raise InputError(f"no file matches {text!r}")
        elif not os.path.exists(text):
            raise InputError(f"no such file: {text!r}")
        else:
            found = [text]
        files += [Path(p).resolve() for p in found]
    unique = list(dict.fromkeys(files))
    for path in unique:
        _check_parquet(path)
    return unique


def _check_parquet(path: Path) -> None:
    check_utf8_name(path, "source")
    # The magic bytes give a clear message before pyarrow or polars give a cryptic one.
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 4))
            tail = fh.read(4)
    except OSError as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    if size < 12 or head != _PARQUET_MAGIC or tail != _PARQUET_MAGIC:
        raise InputError(
            f"{str(path)!r} is not a Parquet file (it does not start and end with 'PAR1'); "
            "convert it first, e.g. pl.read_csv(...).write_parquet(...)"
        )


def _schema_of(files: Sequence[Path]) -> pl.Schema:
    schemas = []
    for path in files:
        try:
            schemas.append(pl.read_parquet_schema(path))
        except Exception as exc:  # polars raises several kinds for a corrupt footer
            raise InputError(f"cannot read the Parquet schema of {str(path)!r}: {exc}") from None
    first = schemas[0]
    for path, schema in zip(files[1:], schemas[1:]):
        if dict(schema) != dict(first):
            differ = sorted(set(schema.items()) ^ set(first.items()), key=str)
            raise InputError(
                f"{str(path)!r} does not have the columns and types of {str(files[0])!r} "
                f"(differences: {', '.join(f'{n}: {t}' for n, t in differ[:4])})"
            )
    return pl.Schema(first)


def _row_groups(files: Sequence[Path]) -> list[tuple[int, int]]:
    """(rows, uncompressed bytes) of every row group of every file, in order."""
    import pyarrow.parquet as pq

    groups = []
    for path in files:
        meta = pq.read_metadata(path)
        for i in range(meta.num_row_groups):
            rg = meta.row_group(i)
            groups.append((rg.num_rows, rg.total_byte_size))
    return groups


def plan_slices(
    groups: Sequence[tuple[int, int]], slice_rows: int | None = None
) -> list[tuple[int, int]]:
    """(offset, length) of each slice over the concatenated files.

    With ``slice_rows`` the slices are that long (the last one shorter). Without, a slice
    is a row group; consecutive row groups under ``MIN_SLICE_ROWS`` rows are merged and a
    row group above ``MAX_SLICE_ROWS`` rows or ``MAX_SLICE_BYTES`` is split evenly.

    Examples
    --------
    >>> plan_slices([(100, 1000), (100, 1000)], slice_rows=150)
    [(0, 150), (150, 50)]
    >>> plan_slices([(240_000, 10**6)])
    [(0, 80000), (80000, 80000), (160000, 80000)]
    """
    total = sum(rows for rows, _ in groups)
    if slice_rows is not None:
        if slice_rows < 1:
            raise InputError(f"slice_rows must be >= 1, got {slice_rows}")
        return [(off, min(slice_rows, total - off)) for off in range(0, total, slice_rows)]
    slices: list[tuple[int, int]] = []
    offset = pending_rows = pending_bytes = 0
    for rows, size in groups:
        if rows == 0:
            continue
        if pending_rows and (
            pending_rows + rows > MIN_SLICE_ROWS or pending_bytes + size > MAX_SLICE_BYTES
        ):
            slices.append((offset, pending_rows))
            offset += pending_rows
            pending_rows = pending_bytes = 0
        if rows >= MIN_SLICE_ROWS:
            pieces = max(-(-rows // MAX_SLICE_ROWS), -(-size // MAX_SLICE_BYTES), 1)
            step = -(-rows // pieces)
            for start in range(0, rows, step):
                slices.append((offset + start, min(step, rows - start)))
            offset += rows
        else:
            pending_rows += rows
            pending_bytes += size
    if pending_rows:
        slices.append((offset, pending_rows))
    return slices


def read_slice(
    files: Sequence[Path], columns: Sequence[str], offset: int, length: int
) -> pl.DataFrame:
    """Rows ``offset`` to ``offset + length`` of the files' ``columns``.

    A Parquet string column may hold bytes that are not UTF-8 (a writer that cast binary
    data to string without checking it); polars refuses to read them. That is said in
    one line naming the column (:func:`collect_text`), not as polars' ``ComputeError``.
    """
    scan = scan_sources(files).select(list(columns)).slice(offset, length)
    return collect_text(scan, files)


def collect_text(frame: pl.LazyFrame, files: Sequence[Path]) -> pl.DataFrame:
    """``frame.collect()``; a string column holding invalid UTF-8 is an :class:`InputError`
    naming the column and the file (the columns are read one by one to find it)."""
    try:
        return frame.collect()
    except pl.exceptions.ComputeError as exc:
        if "utf-8" not in str(exc).lower():
            raise
        failed = exc
    bad = []
    for name in frame.collect_schema().names():
        try:
            frame.select(name).collect()
        except pl.exceptions.ComputeError:
            bad.append(name)
    where = repr(str(files[0])) if len(files) == 1 else f"one of {len(files)} source files"
    if not bad:  # only the whole read fails: say what polars said, on one line
        raise InputError(f"{where}: {' '.join(str(failed).split())}") from None
    raise InputError(
        f"column {bad[0]!r} of {where} is a string column holding bytes that are not valid "
        "UTF-8; repair the file first (decode those bytes with errors='replace', or store "
        "the column as binary, which framekit reads with bad bytes replaced)"
    ) from None


def scan_sources(files: Sequence[Path]) -> pl.LazyFrame:
    """A LazyFrame over the files (globs already expanded, so none are re-globbed)."""
    return pl.scan_parquet(
        [str(p) for p in files], glob=False, hive_partitioning=False, cache=False
    )
