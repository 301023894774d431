"""``fk.gate``: turn a scored frame into one pass/fail decision for tests and CI.

A bar is met only over all rows. An error (the evaluation failed: see
:mod:`framekit.analysis._outcome`) counts as not passed for a pass-rate bar, and a mean
bar fails when more rows are errors than ``max_failures`` allows (default 0): a mean
over the one row that scored during an outage says nothing about the release.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import polars as pl

from framekit import _result_columns as contract
from framekit._errors import InputError
from framekit._frames import to_polars
from framekit.analysis import _outcome as outcome

__all__ = ["Bars", "GateResult", "gate"]

#: Evaluator name -> bar, as a mapping or as (name, bar) pairs (a name given twice is an
#: error: a repeated bar would otherwise keep whichever came last).
Bars: TypeAlias = Mapping[str, float] | Iterable[tuple[str, float]]

_SCHEMA = {
    "evaluator": pl.String,
    "check": pl.String,
    "required": pl.Float64,
    "actual": pl.Float64,
    "rows": pl.Int64,
    "errors": pl.Int64,
    "allowed_errors": pl.Int64,
    "passed": pl.Boolean,
}


@dataclass(frozen=True)
class GateResult:
    """The outcome of :func:`gate`: truthy when every check passed.

    Attributes
    ----------
    passed
        Whether every check met its bar.
    table
        One row per check: ``evaluator, check (pass_rate | mean | failure_rate),
        required, actual, rows, errors`` (rows whose evaluation failed),
        ``allowed_errors`` (for a mean bar: ``max_failures``; null for the others, which
        count errors themselves), ``passed``.
    """

    passed: bool
    table: pl.DataFrame

    def __bool__(self) -> bool:
        return self.passed

    @property
    def failures(self) -> pl.DataFrame:
        """The checks that missed their bar."""
        return self.table.filter(~pl.col("passed"))

    def describe(self) -> str:
        """One line per failed check (or one line saying all passed)."""
        if self.passed:
            return f"gate passed: {self.table.height} check(s) met"
        lines = [_explain(r) for r in self.failures.iter_rows(named=True)]
        return "gate failed:\n  " + "\n  ".join(lines)


def _explain(r: dict[str, Any]) -> str:
    """Why one check missed its bar, in one line."""
    errors = f"{r['errors']} error{'' if r['errors'] == 1 else 's'}"
    head = f"{r['evaluator']}: {r['check']}"
    if r["actual"] is None:
        return f"{head} n/a: no scored rows ({r['rows']} rows, {errors})"
    if r["check"] == "failure_rate":
        return f"{head} {r['actual']:.3f} > allowed {r['required']:g} ({r['rows']} rows, {errors})"
    if r["actual"] < r["required"]:
        return f"{head} {r['actual']:.3f} < required {r['required']:g} ({r['rows']} rows, {errors})"
    return (
        f"{head} {r['actual']:.3f} meets {r['required']:g}, but {errors} in {r['rows']} rows "
        f"exceed the {r['allowed_errors']} allowed (max_failures)"
    )


def _bars(option: str, given: Bars | None) -> list[tuple[str, float]]:
    """``given`` as (evaluator, bar) pairs, each checked; ``option`` names it in errors."""
    pairs = list(given.items() if isinstance(given, Mapping) else given or ())
    seen: dict[str, float] = {}
    for name, value in pairs:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InputError(f"{option} for {name!r} must be a number, got {value!r}") from None
        if name in seen:
            raise InputError(
                f"{option} is given twice for {name!r} ({seen[name]:g} and {number:g}): "
                "give each bar once"
            )
        if not 0.0 <= number <= 1.0:
            raise InputError(f"{option} for {name!r} must be in [0, 1], got {value}")
        seen[name] = number
    return list(seen.items())


def gate(
    scored: Any,
    min_pass_rate: Bars | None = None,
    min_mean: Bars | None = None,
    *,
    max_failure_rate: Bars | None = None,
    max_failures: int = 0,
) -> GateResult:
    """Check a scored frame against minimum pass rates and mean scores.

    Every bar is met over all rows. A row whose evaluation failed (``<name>_error`` set,
    or no score) counts as not passed for the pass rate, and a mean bar fails when more
    rows than ``max_failures`` failed: a judge outage must not let a release through.
    The mean is over the rows that scored; the failure rate (optional) bounds the share of
    failed rows.

    Parameters
    ----------
    scored
        A frame with framekit's result columns.
    min_pass_rate
        Evaluator name -> the lowest acceptable share of all rows that passed.
    min_mean
        Evaluator name -> the lowest acceptable mean ``<name>_score``.
    max_failure_rate
        Evaluator name -> the highest acceptable share of failed rows.
    max_failures
        Failed rows a mean bar tolerates per evaluator (default 0).

    Returns
    -------
    GateResult
        Truthy when all checks pass; ``table`` has one row per check.

    Raises
    ------
    InputError
        No checks, an evaluator without results, a bar outside [0, 1], the same bar
        given twice, a negative ``max_failures``, or a result column of the wrong dtype.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"relevance_score": [1.0, 0.0, 1.0],
    ...                    "relevance_passed": [True, False, True],
    ...                    "relevance_error": [None, None, None]})
    >>> bool(gate(df, min_pass_rate={"relevance": 0.6}))
    True
    >>> print(gate(df, min_mean={"relevance": 0.9}).describe())
    gate failed:
      relevance: mean 0.667 < required 0.9 (3 rows, 0 errors)
    >>> outage = pl.DataFrame({"relevance_score": [1.0, None, None],
    ...                        "relevance_passed": [True, None, None],
    ...                        "relevance_error": [None, "timeout", "timeout"]})
    >>> print(gate(outage, min_mean={"relevance": 0.9}).describe())
    gate failed:
      relevance: mean 1.000 meets 0.9, but 2 errors in 3 rows exceed the 0 allowed (max_failures)
    >>> bool(gate(outage, min_mean={"relevance": 0.9}, max_failures=2))
    True
    """
    frame = to_polars(scored).frame
    if isinstance(max_failures, bool) or not isinstance(max_failures, int) or max_failures < 0:
        raise InputError(f"max_failures must be a whole number >= 0, got {max_failures!r}")
    checks = [
        ("pass_rate", _bars("min_pass_rate", min_pass_rate)),
        ("mean", _bars("min_mean", min_mean)),
        ("failure_rate", _bars("max_failure_rate", max_failure_rate)),
    ]
    if not any(bars for _, bars in checks):
        raise InputError("gate needs at least one bar: min_pass_rate, min_mean or max_failure_rate")
    names = list(dict.fromkeys(name for _, bars in checks for name, _ in bars))
    contract.resolve_evaluators(frame.columns, names)
    contract.check_dtypes(frame.schema, names, ("score", "passed", "error"))
    rows = [
        _check(frame, name, check, required, max_failures)
        for check, bars in checks
        for name, required in bars
    ]
    table = pl.DataFrame(rows, schema=_SCHEMA, orient="row")
    return GateResult(passed=bool(table["passed"].all()), table=table)


def _check(
    frame: pl.DataFrame, name: str, check: str, required: float, max_failures: int
) -> tuple[Any, ...]:
    n = frame.height
    errors = int(frame.select(outcome.error_count(name)).item())
    actual: float | None
    allowed: int | None = None
    if check == "pass_rate":
        if contract.column(name, "passed") not in frame.columns:
            raise InputError(f"a pass-rate bar needs {contract.column(name, 'passed')!r}")
        actual = frame.select(outcome.pass_rate(name, frame.columns)).item() if n else None
    elif check == "mean":
        actual = frame.select(outcome.scored(name).mean()).item()
        allowed = max_failures
    else:
        actual = errors / n if n else None
    if actual is None:
        ok = False
    elif check == "failure_rate":
        ok = actual <= required
    else:
        ok = actual >= required and (allowed is None or errors <= allowed)
    return (name, check, required, actual, n, errors, allowed, ok)
