"""What one evaluation of one row counts as: an error, below threshold, or passed.

Every reader of a scored frame (the summary, ``framekit report`` in text and HTML, the
rows table, ``fk.gate`` and ``framekit gate``, ``fk.agreement``) takes its counts from
here, so they cannot disagree on the same file:

- **error**: the evaluation failed: ``<name>_error`` is set, or there is no score
  (null or NaN) to read. An error is never averaged, and it never passes.
- **below threshold**: it scored, and ``<name>_passed`` is not true.
- **passed**: it scored, and ``<name>_passed`` is true.

The pass rate is over *all* rows: passed / rows, an error counting as not passed, so a
judge outage lowers it instead of leaving a few lucky rows to speak for the run.
"""

from __future__ import annotations

from collections.abc import Collection

import polars as pl

from framekit import _result_columns as contract

#: The three outcomes, as the rows table and its filter name them; SCORED stands for the
#: last two in a frame without ``_passed``.
ERROR, BELOW, PASSED, SCORED = "error", "below threshold", "passed", "scored"


def is_error(name: str) -> pl.Expr:
    """True where the evaluation of ``name`` failed (an error set, or no score).

    Examples
    --------
    >>> df = pl.DataFrame({"c_score": [1.0, None, float("nan")],
    ...                    "c_error": [None, "timeout", None]})
    >>> df.select(is_error("c")).to_series().to_list()
    [False, True, True]
    """
    return pl.col(contract.column(name, "error")).is_not_null() | contract.score(name).is_null()


def scored(name: str) -> pl.Expr:
    """The score of ``name`` where the row is not an error, else null (what means read)."""
    return pl.when(~is_error(name)).then(contract.score(name)).alias(f"{name}_score")


def passed(name: str) -> pl.Expr:
    """True where ``name`` scored and passed; never null (an error does not pass)."""
    return pl.col(contract.column(name, "passed")).fill_null(False) & ~is_error(name)


def error_count(name: str) -> pl.Expr:
    """The number of rows whose evaluation of ``name`` is an error."""
    return is_error(name).sum().cast(pl.Int64)


def pass_rate(name: str, columns: Collection[str]) -> pl.Expr:
    """Passed rows / all rows (an error counts as not passed); null without ``_passed``.

    The one definition of the pass rate: the summary, the report and the gate use it.

    Examples
    --------
    >>> df = pl.DataFrame({"c_score": [1.0, 0.0, None], "c_passed": [True, False, None],
    ...                    "c_error": [None, None, "timeout"]})
    >>> round(df.select(pass_rate("c", df.columns)).item(), 3)  # 1 of 3, not 1 of 2
    0.333
    """
    if contract.column(name, "passed") not in columns:
        return pl.lit(None, pl.Float64).alias("pass_rate")
    return (passed(name).sum() / pl.len()).cast(pl.Float64).alias("pass_rate")


def status(name: str, columns: Collection[str]) -> pl.Expr:
    """``"error"``, ``"below threshold"`` or ``"passed"`` per row (``"scored"`` when the
    frame has no ``_passed`` column to say which)."""
    if contract.column(name, "passed") not in columns:
        outcome = pl.lit(SCORED)
    else:
        outcome = pl.when(passed(name)).then(pl.lit(PASSED)).otherwise(pl.lit(BELOW))
    return pl.when(is_error(name)).then(pl.lit(ERROR)).otherwise(outcome).alias("status")


__all__ = [
    "BELOW",
    "ERROR",
    "PASSED",
    "SCORED",
    "error_count",
    "is_error",
    "pass_rate",
    "passed",
    "scored",
    "status",
]
