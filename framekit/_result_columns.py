"""The result-column contract: the columns ``evaluate_dataframe`` appends, and how a
scored frame is read back.

Per evaluator ``<name>``: ``<name>_score`` (Float64, null on failure), ``_label``,
``_explanation`` (String), ``_passed`` (Boolean), ``_error`` (String); with
``details=True`` also ``_tokens`` (Int64), ``_cost_usd`` (Float64), ``_cached``
(Boolean), ``_latency_s`` (Float64). An evaluator is recognised in a scored frame by
``<name>_score`` next to ``<name>_error``. This module is the only place those names and
dtypes are written down: the frame layer builds columns from it, ``io`` checks clashes
with it, and the analysis and the command line parse scored frames with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import polars as pl

from framekit._errors import InputError

#: Kind -> dtype of the columns every run appends, in order.
RESULT_COLUMNS: dict[str, pl.DataType] = {
    "score": pl.Float64(),
    "label": pl.String(),
    "explanation": pl.String(),
    "passed": pl.Boolean(),
    "error": pl.String(),
}
#: Kind -> dtype of the columns ``details=True`` adds, in order.
DETAIL_COLUMNS: dict[str, pl.DataType] = {
    "tokens": pl.Int64(),
    "cost_usd": pl.Float64(),
    "cached": pl.Boolean(),
    "latency_s": pl.Float64(),
}


def column(name: str, kind: str) -> str:
    """The name of one result column: ``column("coherence", "score") == "coherence_score"``."""
    return f"{name}_{kind}"


def _name_of(evaluator: Any) -> str:
    return evaluator if isinstance(evaluator, str) else str(evaluator.name)


def result_columns(evaluators: Iterable[Any], details: bool = False) -> list[str]:
    """Names of the columns appended for ``evaluators`` (names or objects with ``.name``).

    Examples
    --------
    >>> result_columns(["coherence"])
    ['coherence_score', 'coherence_label', 'coherence_explanation', 'coherence_passed', 'coherence_error']
    """
    kinds = list(RESULT_COLUMNS) + (list(DETAIL_COLUMNS) if details else [])
    return [column(_name_of(ev), kind) for ev in evaluators for kind in kinds]


def result_schema(evaluators: Iterable[Any], details: bool = False) -> dict[str, pl.DataType]:
    """Column name -> dtype of the appended columns, in order."""
    kinds = {**RESULT_COLUMNS, **(DETAIL_COLUMNS if details else {})}
    return {column(_name_of(ev), k): dtype for ev in evaluators for k, dtype in kinds.items()}


def evaluator_names(columns: Sequence[str]) -> list[str]:
    """Evaluators whose results are among ``columns``, in column order.

    Examples
    --------
    >>> evaluator_names(["q", "coherence_score", "coherence_error", "x_score"])
    ['coherence']
    """
    present = set(columns)
    return [
        c.removesuffix("_score")
        for c in columns
        if c.endswith("_score") and column(c.removesuffix("_score"), "error") in present
    ]


def resolve_evaluators(
    columns: Sequence[str], evaluators: str | Sequence[str] | None = None
) -> list[str]:
    """The evaluators to read from a scored frame: all found, or those asked for.

    Raises :class:`InputError` when none is found or an asked-for one is missing.
    """
    found = evaluator_names(columns)
    if evaluators is None:
        if not found:
            raise InputError(
                "no evaluator results found: expected <name>_score and <name>_error columns; "
                f"columns are {list(columns)}"
            )
        return found
    wanted = [evaluators] if isinstance(evaluators, str) else list(evaluators)
    missing = [name for name in wanted if name not in found]
    if missing:
        raise InputError(f"no results for evaluator(s) {missing}; the frame has {found}")
    return wanted


def score(name: str) -> pl.Expr:
    """The score of evaluator ``name`` as Float64; NaN is treated like null (no score)."""
    return pl.col(column(name, "score")).cast(pl.Float64).fill_nan(None)


#: The columns a summary of a scored file reads (its input columns are not needed).
SUMMARY_KINDS = ("score", "label", "passed", "error", "tokens", "cost_usd")


__all__ = [
    "DETAIL_COLUMNS",
    "RESULT_COLUMNS",
    "SUMMARY_KINDS",
    "column",
    "evaluator_names",
    "resolve_evaluators",
    "result_columns",
    "result_schema",
    "score",
]
