"""The result-column contract: the columns ``evaluate_dataframe`` appends, and how a
scored frame is read back.

Per evaluator ``<name>``: ``<name>_score`` (Float64, null on failure), ``_label``,
``_explanation`` (String), ``_passed`` (Boolean), ``_confidence`` (Float64 in [0, 1], null
when the judge gives none), ``_error`` (String, always last); with
``details=True`` also ``_tokens`` (Int64), ``_cost_usd`` (Float64), ``_cached``
(Boolean), ``_latency_s`` (Float64), ``_judge`` (String: the model whose verdict stands,
which for a cascade names the stage that decided), and for an evaluator whose verdicts
carry findings (``has_details``: Groundedness, ContextRecall) ``_details`` (String, JSON).
An evaluator is recognised in a scored frame by ``<name>_score`` next to ``<name>_error``.
This module is the only place those names and
dtypes are written down: the frame layer builds columns from it, ``io`` checks clashes
with it, and the analysis and the command line parse scored frames with it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import polars as pl

from framekit._errors import InputError, did_you_mean

#: Kind -> dtype of the columns every run appends, in order.
RESULT_COLUMNS: dict[str, pl.DataType] = {
    "score": pl.Float64(),
    "label": pl.String(),
    "explanation": pl.String(),
    "passed": pl.Boolean(),
    "confidence": pl.Float64(),
    "error": pl.String(),
}
#: Kind -> dtype of the columns ``details=True`` adds, in order.
DETAIL_COLUMNS: dict[str, pl.DataType] = {
    "tokens": pl.Int64(),
    "cost_usd": pl.Float64(),
    "cached": pl.Boolean(),
    "latency_s": pl.Float64(),
    "judge": pl.String(),
}
#: The column ``details=True`` adds for an evaluator with ``has_details``: its verdict's
#: findings as JSON text (Groundedness's claim list).
FINDINGS_COLUMNS: dict[str, pl.DataType] = {"details": pl.String()}


def column(name: str, kind: str) -> str:
    """The name of one result column: ``column("coherence", "score") == "coherence_score"``."""
    return f"{name}_{kind}"


def _name_of(evaluator: Any) -> str:
    return evaluator if isinstance(evaluator, str) else str(evaluator.name)


def _kinds(evaluator: Any, details: bool) -> dict[str, pl.DataType]:
    if not details:
        return RESULT_COLUMNS
    findings = FINDINGS_COLUMNS if getattr(evaluator, "has_details", False) else {}
    return {**RESULT_COLUMNS, **DETAIL_COLUMNS, **findings}


def result_columns(evaluators: Iterable[Any], details: bool = False) -> list[str]:
    """Names of the columns appended for ``evaluators`` (names or objects with ``.name``).

    Examples
    --------
    >>> result_columns(["coherence"])
    ['coherence_score', 'coherence_label', 'coherence_explanation', 'coherence_passed', 'coherence_confidence', 'coherence_error']
    """
    return [column(_name_of(ev), kind) for ev in evaluators for kind in _kinds(ev, details)]


def result_schema(evaluators: Iterable[Any], details: bool = False) -> dict[str, pl.DataType]:
    """Column name -> dtype of the appended columns, in order."""
    return {
        column(_name_of(ev), k): dtype
        for ev in evaluators
        for k, dtype in _kinds(ev, details).items()
    }


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
        raise InputError(
            f"no results for evaluator(s) {missing}; the frame has {found}."
            + did_you_mean(missing[0], found)
        )
    return wanted


def score(name: str) -> pl.Expr:
    """The score of evaluator ``name`` as Float64; NaN is treated like null (no score)."""
    return pl.col(column(name, "score")).cast(pl.Float64).fill_nan(None)


#: The columns a summary of a scored file reads (its input columns are not needed).
SUMMARY_KINDS = ("score", "label", "passed", "error", "tokens", "cost_usd")

_TEXT = "text (String)"
#: Kind -> (does a dtype hold it, what it must be). An all-null column (dtype Null) holds
#: any kind: a file whose every row failed may be written that way.
_READABLE: dict[str, tuple[Any, str]] = {
    "score": (lambda t: t.is_numeric(), "a number (Float64)"),
    "label": (lambda t: t in (pl.String, pl.Categorical) or isinstance(t, pl.Enum), _TEXT),
    "explanation": (lambda t: t == pl.String, _TEXT),
    "passed": (lambda t: t == pl.Boolean, "Boolean"),
    "confidence": (lambda t: t.is_numeric(), "a number in [0, 1] (Float64)"),
    "error": (lambda t: t in (pl.String, pl.Categorical), _TEXT),
    "tokens": (lambda t: t.is_integer(), "an integer (Int64)"),
    "cost_usd": (lambda t: t.is_numeric(), "a number (Float64)"),
    "cached": (lambda t: t == pl.Boolean, "Boolean"),
    "latency_s": (lambda t: t.is_numeric(), "a number (Float64)"),
    "details": (lambda t: t == pl.String, _TEXT),
    "judge": (lambda t: t in (pl.String, pl.Categorical), _TEXT),
}


def check_dtypes(
    schema: Mapping[str, pl.DataType], names: Iterable[str], kinds: Iterable[str]
) -> None:
    """Raise :class:`InputError` naming the first result column whose dtype a reader
    cannot read as its kind (a ``_score`` stored as String, a ``_passed`` as text...).

    Only the columns present are checked: readers say themselves which ones they need.

    Examples
    --------
    >>> check_dtypes({"c_score": pl.String()}, ["c"], ["score"])
    Traceback (most recent call last):
    ...
    framekit.InputError: column 'c_score' holds String, but framekit's _score columns hold a number (Float64): convert it, or score the file again
    """
    kinds = list(kinds)
    for name in names:
        for kind in kinds:
            col = column(name, kind)
            dtype = schema.get(col)
            if dtype is None or dtype == pl.Null:
                continue
            holds, wanted = _READABLE[kind]
            if not holds(dtype):
                raise InputError(
                    f"column {col!r} holds {dtype}, but framekit's _{kind} columns hold "
                    f"{wanted}: convert it, or score the file again"
                )


# -- the pairs frame of a pairwise run -------------------------------------------------

#: Kind -> dtype of the columns a pairwise run gives each evaluator, per pair row, after
#: the key column(s) and the two groups (``a``, ``b``) facing each other.
PAIR_COLUMNS: dict[str, pl.DataType] = {
    "winner": pl.String(),  # a's or b's group name, or TIE
    "ab": pl.String(),  # the verdict with a shown first: "A", "B" or "tie"
    "ba": pl.String(),  # the verdict with b shown first
    "consistent": pl.Boolean(),  # both orders named the same group
    "confidence": pl.Float64(),
    "explanation": pl.String(),
    "error": pl.String(),
}
#: The two columns naming the groups of a pair, and the winner of a pair neither won.
PAIR_A, PAIR_B, TIE = "a", "b", "tie"


def pair_evaluator_names(columns: Sequence[str]) -> list[str]:
    """Evaluators of a pairs frame (``<name>_winner`` next to ``<name>_error``), in order.

    Examples
    --------
    >>> pair_evaluator_names(["q", "a", "b", "preference_winner", "preference_error"])
    ['preference']
    """
    present = set(columns)
    return [
        c.removesuffix("_winner")
        for c in columns
        if c.endswith("_winner") and column(c.removesuffix("_winner"), "error") in present
    ]


def resolve_pair_evaluator(columns: Sequence[str], evaluator: str | None) -> str:
    """The one evaluator of a pairs frame to read: ``evaluator``, or the only one there.

    Raises :class:`InputError` when there is none, when it is missing, or when the frame
    holds several and none was named.
    """
    found = pair_evaluator_names(columns)
    if evaluator is not None:
        if evaluator not in found:
            raise InputError(
                f"no pairwise results for evaluator {evaluator!r}; the frame has {found}."
                + did_you_mean(evaluator, found)
            )
        return evaluator
    if not found:
        raise InputError(
            "not a pairs frame: expected <name>_winner and <name>_error columns (from "
            f"evaluate_pairwise); columns are {list(columns)}"
        )
    if len(found) > 1:
        raise InputError(
            f"the pairs frame holds several evaluators {found}: choose one with evaluator="
        )
    return found[0]


__all__ = [
    "DETAIL_COLUMNS",
    "FINDINGS_COLUMNS",
    "PAIR_A",
    "PAIR_B",
    "PAIR_COLUMNS",
    "RESULT_COLUMNS",
    "SUMMARY_KINDS",
    "check_dtypes",
    "column",
    "evaluator_names",
    "pair_evaluator_names",
    "resolve_evaluators",
    "resolve_pair_evaluator",
    "result_columns",
    "result_schema",
    "score",
    "TIE",
]
