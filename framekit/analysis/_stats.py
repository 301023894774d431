"""Statistics behind ``summarize`` and ``compare``.

Bootstrap intervals of a mean and paired and two-sample bootstrap tests (framekit's own,
in numpy: see below), and, through ``scipy.stats``, the Wilcoxon signed-rank and
Mann-Whitney U tests and Welch and paired t-tests; Holm's correction is a few lines.

scipy is an optional extra (``pip install 'framekit[stats]'``): it is only needed for
``compare(test="wilcoxon" | "t")``, it adds about 140 MB to an installation, and importing
``scipy.stats`` takes several times as long as importing numpy. So it is imported inside
the functions that need it, never when framekit or this module is imported, and the
default bootstrap comparison does not need it at all.

The bootstrap draws a multinomial count per *distinct value* instead of an index per row:
judge scores take a few levels (0, 0.25, ..., 1), so a resample of 100 000 rows costs five
binomial draws, not 100 000 random indices. Both schemes sample the same distribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from framekit._dependencies import import_optional

FloatArray = NDArray[np.float64]

# Above this many cells per chunk the bootstrap works in slices to bound memory.
_CHUNK_CELLS = 4_000_000


@dataclass(frozen=True)
class TestResult:
    """Outcome of one two-group test.

    ``estimate`` is the mean difference (second group minus first, or the mean of the paired
    differences) with its interval ``[ci_low, ci_high]``; ``statistic`` is the test's own
    statistic (t, the smaller signed-rank sum, U of the first sample, or the estimate for
    the bootstrap) and ``pvalue`` its two-sided p-value.
    """

    __test__ = False  # not a pytest test class, despite the name

    estimate: float
    ci_low: float
    ci_high: float
    statistic: float
    pvalue: float


def _clean(x: ArrayLike) -> FloatArray:
    """A 1-d float array without NaN (a failed row is missing, never a value)."""
    arr = np.asarray(x, dtype=np.float64).ravel()
    return arr[~np.isnan(arr)]


def _check_confidence(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    return 1.0 - confidence


# --------------------------------------------------------------------------- bootstrap


def bootstrap_means(x: ArrayLike, n_resamples: int, rng: np.random.Generator) -> FloatArray:
    """Means of ``n_resamples`` resamples (with replacement) of ``x``.

    Examples
    --------
    >>> m = bootstrap_means([0.0, 1.0], 1000, np.random.default_rng(0))
    >>> m.shape, bool(m.min() >= 0.0), bool(m.max() <= 1.0)
    ((1000,), True, True)
    """
    data = _clean(x)
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples}")
    n = data.size
    if n == 0:
        return np.full(n_resamples, np.nan)
    values, counts = np.unique(data, return_counts=True)
    out = np.empty(n_resamples)
    if values.size * 4 <= n:
        # Few distinct values: a multinomial draw per resample over the distinct values.
        probs = counts / n
        step = max(1, _CHUNK_CELLS // values.size)
        for start in range(0, n_resamples, step):
            k = min(step, n_resamples - start)
            out[start : start + k] = rng.multinomial(n, probs, size=k) @ values / n
    else:
        # Mostly distinct values (continuous scores): index resampling is cheaper. It costs
        # about 1-2 ns per row and resample; 32-bit indices halve the memory traffic.
        index_type = np.int32 if n < 2**31 else np.int64
        step = max(1, _CHUNK_CELLS // n)
        for start in range(0, n_resamples, step):
            k = min(step, n_resamples - start)
            index = rng.integers(0, n, size=(k, n), dtype=index_type)
            out[start : start + k] = data[index].mean(axis=1)
    return out


def _percentile_interval(samples: FloatArray, alpha: float) -> tuple[float, float]:
    """The ``alpha / 2`` and ``1 - alpha / 2`` quantiles, as order statistics.

    Inverse-CDF quantiles (not interpolated ones) make the interval and ``_sign_pvalue``
    agree exactly: 0 lies outside the interval if and only if ``p < alpha``.
    """
    if samples.size == 0 or np.isnan(samples).any():
        return math.nan, math.nan
    low = np.quantile(samples, alpha / 2, method="inverted_cdf")
    high = -np.quantile(-samples, alpha / 2, method="inverted_cdf")
    return float(low), float(high)


def bootstrap_mean_ci(
    x: ArrayLike,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    rng: np.random.Generator | int | None = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``x`` (NaN ignored).

    Returns ``(nan, nan)`` for an empty sample and ``(x, x)`` for a single value.

    Examples
    --------
    >>> low, high = bootstrap_mean_ci([0.0, 0.5, 1.0, 1.0], n_resamples=500, rng=0)
    >>> 0.0 <= low <= 0.625 <= high <= 1.0
    True
    """
    alpha = _check_confidence(confidence)
    gen = np.random.default_rng(rng)
    return _percentile_interval(bootstrap_means(x, n_resamples, gen), alpha)


def _sign_pvalue(samples: FloatArray) -> float:
    """Two-sided p-value of "the difference is 0" by inverting the percentile interval.

    It is twice the share of resamples on the far side of 0, that is the smallest alpha
    whose interval (``_percentile_interval``) excludes 0, so ``p < alpha`` exactly when the
    reported interval excludes 0. When no resample reaches 0 it is reported as
    ``1 / n_resamples``: the resolution of the bootstrap, not a p-value of zero.
    """
    b = samples.size
    if b == 0 or np.isnan(samples).any():
        return math.nan
    tail = min(np.count_nonzero(samples <= 0), np.count_nonzero(samples >= 0))
    return float(min(1.0, max(2.0 * tail, 1.0) / b))


def paired_bootstrap(
    differences: ArrayLike,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    rng: np.random.Generator | int | None = 0,
) -> TestResult:
    """Paired bootstrap of the mean of per-pair differences.

    Pairs are resampled whole, so the interval keeps the correlation between the two
    scores of a pair. The p-value inverts the percentile interval (see ``_sign_pvalue``).
    Fewer than two pairs give the estimate only (NaN interval and p-value).

    Examples
    --------
    >>> r = paired_bootstrap([0.25, 0.5, 0.25, 0.0, 0.25, 0.5, 0.25, 0.25], rng=0)
    >>> round(r.estimate, 4), r.ci_low > 0, r.pvalue < 0.05
    (0.2812, True, True)
    """
    alpha = _check_confidence(confidence)
    d = _clean(differences)
    gen = np.random.default_rng(rng)
    if d.size < 2:  # one pair resamples to itself: no evidence either way
        est = float(d.mean()) if d.size else math.nan
        return TestResult(est, math.nan, math.nan, est, math.nan)
    samples = bootstrap_means(d, n_resamples, gen)
    low, high = _percentile_interval(samples, alpha)
    est = float(d.mean())
    return TestResult(est, low, high, est, _sign_pvalue(samples))


def two_sample_bootstrap(
    a: ArrayLike,
    b: ArrayLike,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    rng: np.random.Generator | int | None = 0,
) -> TestResult:
    """Bootstrap of ``mean(b) - mean(a)`` for independent samples (each resampled apart).

    A sample of fewer than two values gives the estimate only (NaN interval and p-value).

    Examples
    --------
    >>> r = two_sample_bootstrap([0.0, 0.25, 0.5, 0.25] * 5, [0.75, 1.0, 0.5, 1.0] * 5)
    >>> r.estimate, r.ci_low > 0, r.pvalue < 0.01
    (0.5625, True, True)
    """
    alpha = _check_confidence(confidence)
    xa, xb = _clean(a), _clean(b)
    gen = np.random.default_rng(rng)
    if xa.size < 2 or xb.size < 2:  # a single value resamples to itself: no evidence
        est = float(xb.mean() - xa.mean()) if xa.size and xb.size else math.nan
        return TestResult(est, math.nan, math.nan, est, math.nan)
    samples = bootstrap_means(xb, n_resamples, gen) - bootstrap_means(xa, n_resamples, gen)
    low, high = _percentile_interval(samples, alpha)
    est = float(xb.mean() - xa.mean())
    return TestResult(est, low, high, est, _sign_pvalue(samples))


# --------------------------------------------------------------------------- scipy


def _scipy_stats() -> Any:
    return import_optional(
        "scipy.stats",
        extra="stats",
        purpose="a rank or t test",
        note="the default test='bootstrap' does not",
    )


# --------------------------------------------------------------------------- ranks


def wilcoxon_signed_rank(differences: ArrayLike) -> tuple[float, float]:
    """Two-sided Wilcoxon signed-rank test of paired differences; ``(statistic, pvalue)``.

    ``scipy.stats.wilcoxon`` with its defaults (zero differences dropped, exact or
    permutation p-values for small samples, else the normal approximation with the tie
    correction). The statistic is the smaller of the positive and negative rank sums.

    One deliberate difference: when every difference is zero the p-value is 1.0 (no
    evidence of a difference) where scipy returns NaN for more than 13 pairs.

    Examples
    --------
    >>> wilcoxon_signed_rank([0.1, 0.2, -0.05, 0.3, 0.25, 0.4])
    (1.0, 0.0625)
    """
    d = _clean(differences)
    if d.size == 0:
        return math.nan, math.nan
    if not d.any():
        return 0.0, 1.0
    result = _scipy_stats().wilcoxon(d)
    return float(result.statistic), float(result.pvalue)


def mann_whitney_u(a: ArrayLike, b: ArrayLike) -> tuple[float, float]:
    """Two-sided Mann-Whitney U (Wilcoxon rank-sum) test; ``(U of a, pvalue)``.

    ``scipy.stats.mannwhitneyu`` with its defaults (exact for small samples without ties,
    else the normal approximation with the tie and continuity corrections). When every
    value of both samples is the same the p-value is 1.0 (no evidence), not NaN.

    Examples
    --------
    >>> mann_whitney_u([0.1, 0.2, 0.3], [0.4, 0.5, 0.6, 0.7])
    (0.0, 0.05714285714285714)
    """
    xa, xb = _clean(a), _clean(b)
    if xa.size == 0 or xb.size == 0:
        return math.nan, math.nan
    both = np.concatenate([xa, xb])
    if (both == both[0]).all():
        return xa.size * xb.size / 2.0, 1.0
    result = _scipy_stats().mannwhitneyu(xa, xb)
    return float(result.statistic), float(result.pvalue)


# --------------------------------------------------------------------------- t tests


def t_sf(t: float, df: float) -> float:
    """Survival function of Student's t with ``df`` degrees of freedom (``scipy.stats.t``).

    Examples
    --------
    >>> round(t_sf(2.0, 10), 6)
    0.036694
    """
    return float(_scipy_stats().t.sf(t, df))


def t_ppf(q: float, df: float) -> float:
    """Quantile of Student's t (``scipy.stats.t``).

    Examples
    --------
    >>> round(t_ppf(0.975, 10), 6)
    2.228139
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    return float(_scipy_stats().t.ppf(q, df))


def _constant(estimate: float) -> TestResult:
    """Constant data (no spread): scipy returns NaN; a zero difference is no evidence, any
    other difference is certain."""
    p = 1.0 if estimate == 0.0 else 0.0
    return TestResult(estimate, estimate, estimate, math.copysign(math.inf, estimate), p)


def _t_result(estimate: float, result: Any, confidence: float) -> TestResult:
    interval = result.confidence_interval(confidence_level=confidence)
    return TestResult(
        estimate,
        float(interval.low),
        float(interval.high),
        float(result.statistic),
        float(result.pvalue),
    )


def welch_t_test(a: ArrayLike, b: ArrayLike, *, confidence: float = 0.95) -> TestResult:
    """Welch's unequal-variance t-test of ``mean(b) - mean(a)`` with its t interval.

    ``scipy.stats.ttest_ind(b, a, equal_var=False)`` and its confidence interval.

    Examples
    --------
    >>> r = welch_t_test([0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.8, 0.9])
    >>> round(r.estimate, 3), round(r.pvalue, 4)
    (0.45, 0.0086)
    """
    _check_confidence(confidence)
    xa, xb = _clean(a), _clean(b)
    if xa.size < 2 or xb.size < 2:
        est = float(xb.mean() - xa.mean()) if xa.size and xb.size else math.nan
        return TestResult(est, math.nan, math.nan, math.nan, math.nan)
    est = float(xb.mean() - xa.mean())
    if xa.var() == 0.0 and xb.var() == 0.0:
        return _constant(est)
    result = _scipy_stats().ttest_ind(xb, xa, equal_var=False)
    return _t_result(est, result, confidence)


def paired_t_test(differences: ArrayLike, *, confidence: float = 0.95) -> TestResult:
    """Paired (one-sample) t-test of the mean of per-pair differences, with its interval.

    ``scipy.stats.ttest_1samp(differences, 0)`` and its confidence interval.

    Examples
    --------
    >>> r = paired_t_test([0.1, 0.2, 0.15, 0.3, 0.25])
    >>> round(r.estimate, 3), round(r.pvalue, 4)
    (0.2, 0.0048)
    """
    _check_confidence(confidence)
    d = _clean(differences)
    if d.size < 2:
        est = float(d.mean()) if d.size else math.nan
        return TestResult(est, math.nan, math.nan, math.nan, math.nan)
    if d.var() == 0.0:
        return _constant(float(d.mean()))
    result = _scipy_stats().ttest_1samp(d, 0.0)
    return _t_result(float(d.mean()), result, confidence)


# --------------------------------------------------------------------------- multiplicity


def holm(pvalues: ArrayLike) -> FloatArray:
    """Holm-Bonferroni adjusted p-values (NaN entries stay NaN and are not counted).

    Examples
    --------
    >>> holm([0.01, 0.04, 0.03]).tolist()
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(pvalues, dtype=np.float64).ravel()
    out = np.full(p.shape, np.nan)
    valid = np.flatnonzero(~np.isnan(p))
    m = valid.size
    if m == 0:
        return out
    order = np.argsort(p[valid], kind="mergesort")
    scaled = (m - np.arange(m)) * p[valid][order]
    out[valid[order]] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return out


__all__ = [
    "TestResult",
    "bootstrap_mean_ci",
    "bootstrap_means",
    "holm",
    "mann_whitney_u",
    "paired_bootstrap",
    "paired_t_test",
    "t_ppf",
    "t_sf",
    "two_sample_bootstrap",
    "welch_t_test",
    "wilcoxon_signed_rank",
]
