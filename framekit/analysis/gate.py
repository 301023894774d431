"""``fk.gate``: turn a scored frame into one pass/fail decision for tests and CI."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from framekit._errors import InputError
from framekit._frames import to_polars
from framekit.analysis._rubric import evaluator_names

__all__ = ["GateResult", "gate"]


@dataclass(frozen=True)
class GateResult:
    """The outcome of :func:`gate`: truthy when every check passed.

    Attributes
    ----------
    passed
        Whether every check met its bar.
    table
        One row per check: ``evaluator, check (pass_rate | mean | failure_rate),
        required, actual, n, n_failed, passed``.
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
        lines = [
            f"{r['evaluator']}: {r['check']} {_fmt(r['actual'])} "
            f"{'>' if r['check'] == 'failure_rate' else '<'} required {r['required']:g} "
            f"({r['n']} rows, {r['n_failed']} failed)"
            for r in self.failures.iter_rows(named=True)
        ]
        return "gate failed:\n  " + "\n  ".join(lines)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def gate(
    scored: Any,
    min_pass_rate: Mapping[str, float] | None = None,
    min_mean: Mapping[str, float] | None = None,
    *,
    max_failure_rate: Mapping[str, float] | None = None,
) -> GateResult:
    """Check a scored frame against minimum pass rates and mean scores.

    A row whose evaluation failed (``<name>_error`` set) counts against the pass rate: a
    judge outage must not let a release through. The mean is over scored rows; the failure
    rate (optional) bounds the share of failed rows.

    Parameters
    ----------
    scored
        A frame with framekit's result columns.
    min_pass_rate
        Evaluator name -> the lowest acceptable share of rows with ``<name>_passed``.
    min_mean
        Evaluator name -> the lowest acceptable mean ``<name>_score``.
    max_failure_rate
        Evaluator name -> the highest acceptable share of failed rows.

    Returns
    -------
    GateResult
        Truthy when all checks pass; ``table`` has one row per check.

    Raises
    ------
    InputError
        No checks, an evaluator without results, or a bar outside [0, 1].

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
      relevance: mean 0.667 < required 0.9 (3 rows, 0 failed)
    """
    frame = to_polars(scored).frame
    checks = [
        ("pass_rate", min_pass_rate or {}),
        ("mean", min_mean or {}),
        ("failure_rate", max_failure_rate or {}),
    ]
    if not any(bars for _, bars in checks):
        raise InputError("gate needs at least one bar: min_pass_rate, min_mean or max_failure_rate")
    found = evaluator_names(frame)
    rows = []
    for check, bars in checks:
        for name, required in bars.items():
            if name not in found:
                raise InputError(f"no results for evaluator {name!r}; the frame has {found}")
            if not 0.0 <= float(required) <= 1.0:
                raise InputError(f"{name}: the {check} bar must be in [0, 1], got {required}")
            rows.append(_check(frame, name, check, float(required)))
    table = pl.DataFrame(
        rows,
        schema={
            "evaluator": pl.String,
            "check": pl.String,
            "required": pl.Float64,
            "actual": pl.Float64,
            "n": pl.Int64,
            "n_failed": pl.Int64,
            "passed": pl.Boolean,
        },
        orient="row",
    )
    return GateResult(passed=bool(table["passed"].all()), table=table)


def _check(frame: pl.DataFrame, name: str, check: str, required: float) -> tuple[Any, ...]:
    n = frame.height
    n_failed = int(frame[f"{name}_error"].is_not_null().sum())
    score = frame[f"{name}_score"]
    actual: float | None
    if check == "pass_rate":
        passed_col = f"{name}_passed"
        if passed_col not in frame.columns:
            raise InputError(f"a pass-rate bar needs {passed_col!r} in the frame")
        actual = float(frame[passed_col].fill_null(False).sum()) / n if n else None
    elif check == "mean":
        mean = score.mean()
        actual = None if mean is None else float(mean)  # type: ignore[arg-type]
    else:
        actual = n_failed / n if n else None
    if actual is None:
        ok = False
    elif check == "failure_rate":
        ok = actual <= required
    else:
        ok = actual >= required
    return (name, check, required, actual, n, n_failed, ok)
