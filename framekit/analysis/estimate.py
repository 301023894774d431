"""``fk.estimate``: a pass rate or mean that holds, from a few human labels and many judge scores.

Prediction-powered inference with power tuning, PPI++ (Angelopoulos, Duchi and Zrnic
2023, "PPI++: Efficient Prediction-Powered Inference", arXiv:2311.01453; PPI itself:
Angelopoulos, Bates, Fannjiang, Jordan and Zrnic 2023, Science 382:669). With ``y`` the
human values on the ``n`` labelled rows, ``f`` the judge's values on those rows and ``u``
its values on the ``N`` unlabelled rows::

    lambda   = clip(cov(y, f) / ((1 + n/N) * var(f, u)), 0, 1)
    estimate = lambda * mean(u) + mean(y - lambda * f)
    se       = sqrt(var(lambda * u) / N + var(y - lambda * f) / n)
    interval = estimate -+ z * se

(``cov`` over the labelled rows, ``var(f, u)`` the sample variance of all judge values;
the interval's variances are population variances, as in the reference implementation.)
The second term corrects the judge's bias with the labelled rows, so the estimate is
unbiased however wrong the judge is; lambda weighs the judge by how well it tracks people
(0: the classical estimate from the labels alone; 1: plain PPI). The formulas are those
of ``ppi-python`` (``ppi_mean_ci`` with ``lam=None``), which the tests match to 1e-9; it
is not a dependency (it brings numba, statsmodels and scikit-learn for these few lines).

At the boundary, :func:`estimate` reads these intervals with two rules for values in
[0, 1] (pass rates, rubric scores, booleans; not other numbers):

- an interval is clipped to [0, 1], the only values the mean can take;
- an interval of zero width becomes Wilson's score interval for the mean (see
  :func:`wilson_interval`) with ``n`` the rows behind it (the labelled ones for PPI). A
  zero width comes from a sample with no spread (50 labels all "Completely Yes"): its
  variance, 0, is an estimate, and not one to build an interval on. Then lambda is 0 (no
  covariance), so PPI is the classical mean of the labels, and Wilson's interval is the
  one a statistician would give for that proportion: 50 of 50 gives [0.929, 1.0], where
  the normal interval gives [1.0, 1.0]. It holds for any variable in [0, 1], not only
  0/1 ones, because such a variable's variance is at most ``mean * (1 - mean)`` (the
  Bhatia-Davis bound), the variance Wilson's interval assumes.

Other numbers with no spread keep their zero-width interval and a warning saying so.
Infinite human values are refused (:class:`framekit.InputError` naming the rows): a mean
over them is not a number.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from statistics import NormalDist
from typing import Any

import numpy as np
import polars as pl

from framekit import _result_columns as result_columns
from framekit._errors import InputError
from framekit._frames import to_polars
from framekit.analysis import _outcome as outcome
from framekit.analysis._rubric import check_labels, is_label_dtype, pass_mark, rubric_of

__all__ = ["MIN_LABELLED", "classical_mean", "estimate", "ppi_mean", "wilson_interval"]

#: Fewer labelled rows than this give no interval: a normal interval from a handful of
#: rows would claim a precision it does not have.
MIN_LABELLED = 10
_STATISTICS = ("pass_rate", "mean")
METHODS = ("ppi", "classical", "judge_only")


def _z(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence must be between 0 and 1, got {confidence!r}")
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def ppi_mean(
    y: Any, f: Any, u: Any, confidence: float = 0.95
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """PPI++ estimate of a mean and its interval, along the last axis.

    Parameters
    ----------
    y, f
        Human values and judge values on the labelled rows, shape ``(..., n)``.
    u
        Judge values on the unlabelled rows, shape ``(..., N)``.
    confidence
        Interval level.

    Returns
    -------
    estimate, ci_low, ci_high, lam
        Arrays of shape ``(...)`` (numpy scalars for 1-d input). A judge whose values never vary carries no information:
        lambda is 0 there (the classical interval). Without unlabelled rows, lambda is 0.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.array([1.0, 0.0, 1.0, 1.0]); f = np.array([1.0, 0.0, 0.0, 1.0])
    >>> est, low, high, lam = ppi_mean(y, f, np.array([1.0, 1.0, 0.0, 1.0, 0.0, 1.0]))
    >>> round(float(est), 4), round(float(lam), 4)
    (0.7969, 0.2812)
    """
    y, f, u = (np.asarray(a, dtype=np.float64) for a in (y, f, u))
    n, big_n = y.shape[-1], u.shape[-1]
    if big_n == 0:
        point, low, high = classical_mean(y, confidence)
        return point, low, high, np.zeros(y.shape[:-1])[()]
    centred = (y - y.mean(-1, keepdims=True)) * (f - f.mean(-1, keepdims=True))
    both = np.concatenate([f, u], axis=-1)
    spread = both.var(-1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        lam = centred.mean(-1) / ((1.0 + n / big_n) * spread)
    lam = np.clip(np.where(spread > 0, lam, 0.0), 0.0, 1.0)
    weighted = lam[..., None]
    rectifier = y - weighted * f
    point = lam * u.mean(-1) + rectifier.mean(-1)
    se = np.sqrt((weighted * u).var(-1) / big_n + rectifier.var(-1) / n)
    low, high = _interval(point, se, confidence)
    return point[()], low, high, lam[()]


def classical_mean(y: Any, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The mean of ``y`` and its normal interval (population standard deviation, as
    ``ppi-python``'s ``classical_mean_ci``), along the last axis.

    Examples
    --------
    >>> est, low, high = classical_mean([0.0, 1.0, 1.0, 1.0])
    >>> float(est), round(float(low), 4), round(float(high), 4)
    (0.75, 0.3257, 1.1743)
    """
    y = np.asarray(y, dtype=np.float64)
    point = y.mean(-1)
    low, high = _interval(point, y.std(-1) / np.sqrt(y.shape[-1]), confidence)
    return np.asarray(point)[()], low, high


def wilson_interval(mean: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a mean of ``n`` values in [0, 1].

    The interval of every ``p`` that a score test at this level would not reject, with
    the variance ``p * (1 - p)``: never of zero width, never outside [0, 1]. For a 0/1
    variable it is the usual Wilson interval of a proportion; for another variable in
    [0, 1] it is conservative (its variance is at most ``mean * (1 - mean)``).

    Examples
    --------
    >>> low, high = wilson_interval(1.0, 50)
    >>> round(low, 4), high
    (0.9287, 1.0)
    """
    z = _z(confidence)
    z2n = z * z / n
    centre = (mean + z2n / 2.0) / (1.0 + z2n)
    half = z / (1.0 + z2n) * math.sqrt(mean * (1.0 - mean) / n + z2n / (4.0 * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def _interval(point: Any, se: Any, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    z = _z(confidence)
    return np.asarray(point - z * se)[()], np.asarray(point + z * se)[()]


def estimate(
    scored: Any,
    human: str,
    evaluator: str,
    statistic: str = "pass_rate",
    by: str | None = None,
    *,
    confidence: float = 0.95,
    rubric: Mapping[str, float] | Any = None,
    threshold: float | None = None,
) -> pl.DataFrame:
    """The evaluator's pass rate or mean score as people would give it, with an interval.

    Three figures side by side: the prediction-powered estimate (PPI++, see the module
    docstring), which uses the human values where there are some and the judge's on every
    row; the classical estimate from the labelled rows alone; and the judge's own figure
    over every scored row, which is precise but carries the judge's bias.

    Parameters
    ----------
    scored
        A scored frame (polars, pandas, Arrow) holding the evaluator's result columns and
        the ``human`` column.
    human
        People's values; null (or NaN) where a row was not labelled. Labels (strings) are
        read on the evaluator's rubric; booleans or 0/1 give a pass rate; numbers a mean.
    evaluator
        The evaluator whose judge values (``_passed`` for a pass rate, ``_score`` for a
        mean) predict the human ones.
    statistic
        ``"pass_rate"`` (the share of rows people would pass) or ``"mean"`` (the mean of
        the human values: a label's rubric score, or the numbers as they are).
    by
        A column to estimate per group of.
    confidence
        Interval level (0.95: a 95 % interval).
    rubric
        Label -> score for human labels the judge never chose, or the evaluator.
    threshold
        The pass mark of a human label (its rubric score >= threshold passes). Default:
        the lowest score among the rows the judge passed.

    Returns
    -------
    polars.DataFrame
        One row per method (and group): ``evaluator``, the ``by`` column, ``method``
        (``ppi``, ``classical``, ``judge_only``), ``estimate``, ``ci_low``, ``ci_high``,
        ``n_labelled`` (human values used), ``n_total`` (rows used) and ``lam`` (PPI++'s
        weight on the judge; null for the other methods). Rows whose evaluation failed have
        no judge value: PPI and the judge's figure leave them out (the classical figure
        keeps their human values). A group with fewer than ``MIN_LABELLED`` labelled rows
        gets null ``ppi`` and ``classical`` figures, with a warning naming it.

    Raises
    ------
    InputError
        A missing column or evaluator, an unknown statistic, no labelled rows or fewer
        than ``MIN_LABELLED``, a label outside the rubric or a pass-rate value that is not
        0/1 (naming the row), or a human column of another type.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({
    ...     "human": [True, False, True, True, False, True, True, False, True, True,
    ...               None, None, None, None],
    ...     "relevance_score": [1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0,
    ...                         1.0, 0.0, 1.0, 1.0],
    ...     "relevance_passed": [True, True, True, False, False, True, True, False, True,
    ...                          True, True, False, True, True],
    ...     "relevance_error": [None] * 14,
    ... })
    >>> out = estimate(df, human="human", evaluator="relevance")
    >>> out.select("method", "n_labelled", "n_total").rows()
    [('ppi', 10, 14), ('classical', 10, 10), ('judge_only', 0, 14)]
    """
    frame = to_polars(scored).frame
    if statistic not in _STATISTICS:
        raise InputError(f"statistic {statistic!r}: choose one of {_STATISTICS}")
    _z(confidence)
    for column in (human, by):
        if column is not None and column not in frame.columns:
            raise InputError(f"column {column!r} is not in the frame; columns: {frame.columns}")
    name = result_columns.resolve_evaluators(frame.columns, evaluator)[0]
    judged_column = "passed" if statistic == "pass_rate" else "score"
    if result_columns.column(name, judged_column) not in frame.columns:
        raise InputError(f"a {statistic} needs {name}_{judged_column} in the frame")
    values = frame.select(
        _judge_values(name, statistic).alias("f"),
        *([pl.col(by).alias("group")] if by else []),
    ).with_columns(y=_human_values(frame, human, name, statistic, rubric, threshold))
    labelled = int(values["y"].is_not_null().sum())
    if labelled == 0:
        raise InputError(f"no row of {human!r} holds a value: label some rows first")
    rows: list[dict[str, Any]] = []
    groups = values.group_by("group", maintain_order=True) if by else [((None,), values)]
    for key, part in groups:
        group = {} if by is None else {by: key[0]}
        rows.extend(
            {"evaluator": name, **group, **row}
            for row in _methods(part, confidence, by is not None, key[0], human)
        )
    schema: dict[str, Any] = {
        "evaluator": pl.String,
        **({by: frame.schema[by]} if by else {}),
        "method": pl.String,
        "estimate": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
        "n_labelled": pl.Int64,
        "n_total": pl.Int64,
        "lam": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema, orient="row")


def _methods(
    part: pl.DataFrame, confidence: float, grouped: bool, key: Any, human: str
) -> list[dict[str, Any]]:
    y_all = part["y"].drop_nulls().to_numpy()
    # Pass rates, rubric scores and judge scores lie in [0, 1]: the boundary rules apply.
    unit = bool(((y_all >= 0.0) & (y_all <= 1.0)).all())
    paired = part.filter(pl.col("y").is_not_null() & pl.col("f").is_not_null())
    y, f = paired["y"].to_numpy(), paired["f"].to_numpy()
    u = part.filter(pl.col("y").is_null())["f"].drop_nulls().to_numpy()
    judged = part["f"].drop_nulls().to_numpy()
    rows: list[dict[str, Any]] = []
    if len(y) < MIN_LABELLED:
        message = (
            f"only {len(y)} row(s) of {human!r} carry both a human value and a judge "
            f"value; an interval needs at least {MIN_LABELLED}"
        )
        if not grouped:
            raise InputError(message)
        warnings.warn(
            f"group {key!r}: {message}; its ppi and classical figures are null", stacklevel=3
        )
        rows.append(_row("ppi", None, len(y), len(y) + len(u)))
        rows.append(_row("classical", None, len(y_all), len(y_all)))
    else:
        point, low, high, lam = ppi_mean(y, f, u, confidence)
        ppi = _bounded((point, low, high), len(y), confidence, unit, human)
        rows.append(_row("ppi", ppi, len(y), len(y) + len(u), float(lam)))
        classical = _bounded(classical_mean(y_all, confidence), len(y_all), confidence, unit, human)
        rows.append(_row("classical", classical, len(y_all), len(y_all)))
    judge = (
        _bounded(classical_mean(judged, confidence), len(judged), confidence, True, "the judge")
        if len(judged)
        else None
    )
    rows.append(_row("judge_only", judge, 0, len(judged)))
    return rows


def _bounded(
    figures: Any, n: int, confidence: float, unit: bool, whose: str
) -> tuple[float, float, float]:
    """An interval read with the boundary rules of the module docstring: for values in
    [0, 1], clipped to [0, 1], and Wilson's interval where it has zero width."""
    point, low, high = (float(v) for v in figures)
    if high > low:
        return (point, max(low, 0.0), min(high, 1.0)) if unit else (point, low, high)
    if unit:
        return (point, *wilson_interval(point, n, confidence))
    warnings.warn(
        f"the {n} values of {whose!r} behind this estimate are all {point:g}: with no "
        "spread its interval has zero width; read it as a point, or label more rows",
        stacklevel=4,
    )
    return point, low, high


def _row(
    method: str, figures: Any, n_labelled: int, n_total: int, lam: float | None = None
) -> dict[str, Any]:
    point, low, high = (None, None, None) if figures is None else (float(v) for v in figures)
    return {
        "method": method,
        "estimate": point,
        "ci_low": low,
        "ci_high": high,
        "n_labelled": n_labelled,
        "n_total": n_total,
        "lam": lam,
    }


def _judge_values(name: str, statistic: str) -> pl.Expr:
    """The judge's value per row (null where the evaluation failed)."""
    if statistic == "pass_rate":
        value = pl.col(result_columns.column(name, "passed")).cast(pl.Float64)
    else:
        value = result_columns.score(name)
    return pl.when(~outcome.is_error(name)).then(value)


def _human_values(
    frame: pl.DataFrame,
    human: str,
    name: str,
    statistic: str,
    rubric: Any,
    threshold: float | None,
) -> pl.Series:
    """The human value per row as Float64 (null: not labelled), checked row by row."""
    dtype = frame.schema[human]
    column = frame[human]
    if dtype == pl.Boolean:
        if statistic == "mean":
            raise InputError(f"{human!r} holds booleans (pass/fail): use statistic='pass_rate'")
        return column.cast(pl.Float64)
    if is_label_dtype(dtype):
        scale = rubric_of(frame, name, rubric)
        check_labels(frame, human, name, scale)
        scores = [
            None if label is None else scale.scores[scale.code(label) or 0]
            for label in column.cast(pl.String)
        ]
        value = pl.Series(scores, dtype=pl.Float64)
        if statistic == "mean":
            return value
        mark = pass_mark(frame, name, threshold)
        if mark is None:
            raise InputError(
                f"cannot tell {name}'s pass mark from the frame (no row passed): give threshold="
            )
        return (value >= mark).cast(pl.Float64)
    if not dtype.is_numeric():
        raise InputError(
            f"human column {human!r} holds {dtype}: give labels, booleans, 0/1 or numbers"
        )
    value = column.cast(pl.Float64).fill_nan(None)
    infinite = value.is_infinite().fill_null(False)
    if infinite.any():
        rows = infinite.arg_true().to_list()
        shown = ", ".join(str(r) for r in rows[:5]) + (
            f" (+{len(rows) - 5} more)" if len(rows) > 5 else ""
        )
        raise InputError(
            f"human column {human!r} holds infinite values at row{'s' if len(rows) > 1 else ''} "
            f"{shown}; a {statistic.replace('_', ' ')} needs finite numbers (null for a row "
            "not labelled)"
        )
    if statistic == "pass_rate":
        bad = value.is_not_null() & ~value.is_in([0.0, 1.0])
        if bad.any():
            row = int(bad.arg_max() or 0)
            raise InputError(
                f"row {row}: {human} = {value[row]!r}; a pass rate needs 0/1 (or booleans, "
                "or labels); use statistic='mean' for other numbers"
            )
    return value
