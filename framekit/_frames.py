"""Frames in and out: every supported input kind to polars, and results back to its kind.

Messy input is repaired rather than refused where the repair cannot change meaning:
text that is not valid Unicode (lone surrogates in pandas strings, invalid UTF-8 bytes in
Arrow strings) has the bad characters replaced by U+FFFD, and a pandas column that mixes
types (text and numbers, lists and dicts) is kept as Python objects, each rendered as text
(JSON for non-strings) in the prompt. Duplicate column names are refused: a mapping could
not say which one it means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import polars as pl

from framekit._errors import InputError


def clean_text(text: str) -> str:
    r"""``text`` as valid Unicode: surrogate pairs joined, lone surrogates replaced by U+FFFD.

    Examples
    --------
    >>> clean_text("ok \ud800 \ud83d\ude00") == "ok \ufffd \U0001f600"
    True
    """
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _duplicates(names: list[Any]) -> list[str]:
    seen: set[Any] = set()
    dupes: set[Any] = set()
    for name in names:
        (dupes if name in seen else seen).add(name)
    return sorted(str(d) for d in dupes)


@dataclass
class FrameIn:
    """A polars view of the user's input plus what is needed to hand back the same kind."""

    frame: pl.DataFrame
    kind: str  # "polars" | "pandas" | "arrow" | "duckdb" | "lazy"
    original: Any = None


def to_polars(data: Any) -> FrameIn:
    """Accept a polars DataFrame/LazyFrame, pandas DataFrame, pyarrow Table or DuckDB relation."""
    if isinstance(data, pl.DataFrame):
        return FrameIn(data, "polars")
    if isinstance(data, pl.LazyFrame):
        return FrameIn(data.collect(), "lazy")
    module = type(data).__module__.split(".")[0]
    if module == "pandas":
        import pandas as pd

        if not isinstance(data, pd.DataFrame):
            raise InputError(f"expected a pandas DataFrame, got {type(data).__name__}")
        if data.columns.duplicated().any():
            dupes = sorted({str(c) for c in data.columns[data.columns.duplicated()]})
            raise InputError(f"the frame has duplicate column names: {', '.join(dupes)}")
        return FrameIn(_from_pandas(data), "pandas", data)
    if module == "pyarrow":
        import pyarrow as pa

        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if not isinstance(data, pa.Table):
            raise InputError(f"expected a pyarrow Table, got {type(data).__name__}")
        dupes = _duplicates(data.column_names)
        if dupes:
            raise InputError(f"the table has duplicate column names: {', '.join(dupes)}")
        table = pl.from_arrow(_valid_utf8(data))
        assert isinstance(table, pl.DataFrame)
        return FrameIn(table, "arrow")
    if module in ("duckdb", "_duckdb"):
        dupes = _duplicates(list(data.columns))
        if dupes:
            # DuckDB would rename them (a, a_1): the output would no longer match the query.
            raise InputError(f"the relation has duplicate column names: {', '.join(dupes)}")
        # DuckDB hands over Arrow without a copy through polars.
        return FrameIn(data.pl(), "duckdb")
    raise InputError(
        f"cannot evaluate a {type(data).__module__}.{type(data).__name__}; pass a polars "
        "DataFrame or LazyFrame, a pandas DataFrame, a pyarrow Table or a DuckDB relation"
    )


def _from_pandas(data: Any) -> pl.DataFrame:
    # The index is kept aside and restored on the way out, never scored.
    plain = data.reset_index(drop=True)
    try:
        frame = pl.from_pandas(plain, include_index=False)
    except Exception:  # pyarrow refuses mixed or invalid columns: repair them one by one
        frame = pl.DataFrame([_pandas_column(str(name), plain[name]) for name in plain.columns])
    assert isinstance(frame, pl.DataFrame)
    return frame


def _missing(value: Any) -> bool:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return True
    import pandas as pd

    try:
        return value is pd.NA or value is pd.NaT
    except TypeError:
        return False


def _pandas_column(name: str, column: Any) -> pl.Series:
    try:
        series = pl.from_pandas(column)
        assert isinstance(series, pl.Series)
        return series.alias(name)
    except Exception:
        pass
    values = [
        None if _missing(v) else clean_text(v) if isinstance(v, str) else v for v in column.tolist()
    ]
    if len({type(v) for v in values if v is not None}) <= 1:
        try:
            return pl.Series(name, values)
        except Exception:
            pass
    # Mixed kinds stay Python objects; the prompt layer renders each one as text.
    return pl.Series(name, values, dtype=pl.Object)


def _valid_utf8(table: Any) -> Any:
    """Arrow strings are not checked on the way into polars: repair invalid UTF-8 first."""
    import pyarrow as pa

    try:
        table.validate(full=True)
        return table
    except pa.ArrowInvalid:
        pass
    for i, name in enumerate(table.column_names):
        column = table.column(i)
        try:
            column.validate(full=True)
            continue
        except pa.ArrowInvalid:
            pass
        if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
            raise InputError(f"column {name!r} holds invalid data (not valid UTF-8 text)")
        raw = column.cast(pa.large_binary()).to_pylist()
        fixed = [None if b is None else b.decode("utf-8", "replace") for b in raw]
        table = table.set_column(i, name, pa.array(fixed, type=column.type))
    return table


def pandas_result(original: Any, appended: pl.DataFrame) -> Any:
    """The scored frame for a pandas ``original``: its columns, index kept, then the
    ``appended`` result columns (as nullable pandas dtypes)."""
    extra = to_pandas(appended)
    extra.index = original.index
    # Replaced result columns (overwrite=True) move to the end, as they do in polars.
    out = original.drop(columns=[c for c in extra.columns if c in original.columns])
    for name in extra.columns:
        out[name] = extra[name]
    return out


def to_pandas(frame: pl.DataFrame) -> Any:
    """``frame`` as pandas with nullable dtypes, which keep "null" distinct from 0/False."""
    out = frame.to_pandas(use_pyarrow_extension_array=False)
    nullable = {
        pl.Boolean: "boolean",
        pl.Int64: "Int64",
        pl.Float64: "Float64",
        pl.String: "string",
    }
    for name, dtype in frame.schema.items():
        for polars_type, pandas_type in nullable.items():
            if dtype == polars_type:
                out[name] = out[name].astype(pandas_type)
    return out


def like_input(result: pl.DataFrame, frame_in: FrameIn) -> Any:
    """A result frame (a ranking, a table of figures) as pandas when the user passed pandas,
    else as polars."""
    return to_pandas(result) if frame_in.kind == "pandas" else result
