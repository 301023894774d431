"""What every analysis reads: a scored frame as polars, the evaluators in it, named columns.

Shared by summaries, comparisons, plots and the HTML report, so each checks its input
the same way and says the same thing when a column is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeAlias

import polars as pl

from framekit import _result_columns as result_columns
from framekit._errors import InputError
from framekit._frames import to_polars as _frame_to_polars

#: A polars DataFrame or LazyFrame, a pandas DataFrame, a pyarrow Table or a DuckDB relation.
FrameLike: TypeAlias = Any

#: The score of one evaluator as Float64, NaN read as null.
score = result_columns.score


def to_polars(frame: FrameLike) -> pl.DataFrame:
    """Any supported frame as a polars DataFrame (LazyFrames are collected)."""
    return _frame_to_polars(frame).frame


#: The result columns the analysis reads, checked against the contract's dtypes up front.
READ_KINDS = (*result_columns.SUMMARY_KINDS, "explanation")


def resolve_evaluators(frame: pl.DataFrame, evaluators: str | Sequence[str] | None) -> list[str]:
    """The evaluators to analyse: all found in ``frame``, or those asked for.

    Their result columns are checked against the contract first: a ``_score`` stored as
    text is one :class:`InputError` naming the column, not a traceback halfway through.
    """
    names = result_columns.resolve_evaluators(frame.columns, evaluators)
    result_columns.check_dtypes(frame.schema, names, READ_KINDS)
    return names


def resolve_columns(
    frame: pl.DataFrame, columns: str | Sequence[str] | None, what: str
) -> list[str]:
    """``columns`` as a list, each checked to be in ``frame`` (``what`` names the option)."""
    names = [] if columns is None else [columns] if isinstance(columns, str) else list(columns)
    missing = [c for c in names if c not in frame.columns]
    if missing:
        raise InputError(
            f"{what} column(s) {missing} not in the frame; columns are {frame.columns}"
        )
    return names
