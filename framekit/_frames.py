"""Frames in and out: every supported input kind to polars, and results back to its kind."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from framekit._errors import InputError


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
        # The index is kept aside and restored on the way out, never scored.
        frame = pl.from_pandas(data.reset_index(drop=True), include_index=False)
        assert isinstance(frame, pl.DataFrame)
        return FrameIn(frame, "pandas", data)
    if module == "pyarrow":
        import pyarrow as pa

        if isinstance(data, pa.RecordBatch):
            data = pa.Table.from_batches([data])
        if not isinstance(data, pa.Table):
            raise InputError(f"expected a pyarrow Table, got {type(data).__name__}")
        names = data.column_names
        if len(set(names)) != len(names):
            raise InputError(f"the table has duplicate column names: {sorted(names)}")
        table = pl.from_arrow(data)
        assert isinstance(table, pl.DataFrame)
        return FrameIn(table, "arrow")
    if module in ("duckdb", "_duckdb"):
        # DuckDB hands over Arrow without a copy through polars.
        return FrameIn(data.pl(), "duckdb")
    raise InputError(
        f"cannot evaluate a {type(data).__module__}.{type(data).__name__}; pass a polars "
        "DataFrame or LazyFrame, a pandas DataFrame, a pyarrow Table or a DuckDB relation"
    )


def from_polars(result: pl.DataFrame, frame_in: FrameIn, appended: pl.DataFrame) -> Any:
    """The scored frame in the kind the user passed (pandas keeps its index)."""
    if frame_in.kind != "pandas":
        return result
    original = frame_in.original
    extra = appended.to_pandas(use_pyarrow_extension_array=False)
    # Nullable pandas dtypes keep "null" distinct from 0/False.
    for name, dtype in appended.schema.items():
        if dtype == pl.Boolean:
            extra[name] = extra[name].astype("boolean")
        elif dtype == pl.Int64:
            extra[name] = extra[name].astype("Int64")
        elif dtype == pl.Float64:
            extra[name] = extra[name].astype("Float64")
        elif dtype == pl.String:
            extra[name] = extra[name].astype("string")
    extra.index = original.index
    out = original.copy(deep=False)
    for name in extra.columns:
        out[name] = extra[name]
    return out
