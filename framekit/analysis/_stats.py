"""Statistics behind ``summarize`` and ``compare``, in plain numpy.

Bootstrap intervals of a mean, paired and two-sample bootstrap tests, the Wilcoxon
signed-rank and Mann-Whitney U tests, Welch and paired t-tests, and Holm's correction.
scipy is deliberately not a runtime dependency (it is large and framekit only needs a
handful of tests); the test suite checks every function here against scipy's reference.

The bootstrap draws a multinomial count per *distinct value* instead of an index per row:
judge scores take a few levels (0, 0.25, ..., 1), so a resample of 100 000 rows costs five
binomial draws, not 100 000 random indices. Both schemes sample the same distribution.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

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


# --------------------------------------------------------------------------- ranks


def _rank_average(x: FloatArray) -> tuple[FloatArray, NDArray[np.int64]]:
    """Average ranks (1-based) of ``x`` and the size of every group of tied values."""
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    # Start of each run of equal values in the sorted order.
    starts = np.flatnonzero(np.r_[True, sorted_x[1:] != sorted_x[:-1]])
    sizes = np.diff(np.r_[starts, x.size])
    # The average rank of a run [s, s + t) is s + (t + 1) / 2 in 1-based ranks.
    run_rank = starts + (sizes + 1) / 2.0
    ranks = np.empty(x.size)
    ranks[order] = np.repeat(run_rank, sizes)
    return ranks, sizes.astype(np.int64)


def norm_sf(z: float) -> float:
    """Survival function of the standard normal distribution.

    Examples
    --------
    >>> round(norm_sf(1.959963984540054), 6)
    0.025
    """
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def _signed_rank_counts(n: int) -> FloatArray:
    """Number of subsets of {1..n} with each sum 0..n(n+1)/2 (exact for n <= 50 in float)."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    top = 0
    for i in range(1, n + 1):
        counts[i : top + i + 1] += counts[: top + 1].copy()
        top += i
    return counts


def wilcoxon_signed_rank(differences: ArrayLike) -> tuple[float, float]:
    """Two-sided Wilcoxon signed-rank test of paired differences; ``(statistic, pvalue)``.

    Follows ``scipy.stats.wilcoxon``'s defaults (``zero_method="wilcox"``, no continuity
    correction, ``method="auto"``): zero differences are dropped before ranking; with at
    most 50 differences and no ties or zeros the p-value is exact; with ties or zeros and at
    most 13 differences it comes from all 2**n sign flips (as scipy's permutation test
    does); otherwise from the normal approximation with the tie correction. The statistic
    is the smaller of the positive and negative rank sums.

    One deliberate difference: when every difference is zero the p-value is 1.0 (no
    evidence of a difference) where scipy returns NaN for more than 13 pairs.

    Examples
    --------
    >>> wilcoxon_signed_rank([0.1, 0.2, -0.05, 0.3, 0.25, 0.4])
    (1.0, 0.0625)
    """
    d = _clean(differences)
    n_all = d.size
    if n_all == 0:
        return math.nan, math.nan
    nonzero = d[d != 0]
    n = nonzero.size
    if n == 0:
        return 0.0, 1.0
    ranks, ties = _rank_average(np.abs(nonzero))
    r_plus = float(ranks[nonzero > 0].sum())
    r_minus = float(ranks[nonzero < 0].sum())
    statistic = min(r_plus, r_minus)
    has_ties = bool((ties > 1).any())

    if n_all <= 50 and not has_ties and n == n_all:
        pmf = _signed_rank_counts(n) / 2.0**n
        sf = pmf[int(math.floor(r_plus)) :].sum()
        cdf = pmf[: int(math.ceil(r_plus)) + 1].sum()
        return statistic, float(min(1.0, 2.0 * min(sf, cdf)))

    if n_all <= 13:
        # Every sign assignment of the nonzero differences; zeros never change sign.
        flips = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(bool)
        null = flips.astype(np.float64) @ ranks
        # The relative tolerance mirrors scipy.stats.permutation_test's, so exact ties
        # between the observed and a permuted statistic count on both sides.
        gamma = abs(r_plus) * 1e-14
        less = np.count_nonzero(null <= r_plus + gamma) / null.size
        greater = np.count_nonzero(null >= r_plus - gamma) / null.size
        return statistic, float(min(1.0, 2.0 * min(less, greater)))

    mean = n * (n + 1) / 4.0
    var = n * (n + 1) * (2 * n + 1) / 24.0 - float((ties**3 - ties).sum()) / 48.0
    z = (r_plus - mean) / math.sqrt(var)
    return statistic, float(min(1.0, 2.0 * norm_sf(abs(z))))


def _rank_sum_counts(m: int, n: int) -> list[int]:
    """Exact counts of U = 0..m*n for samples of sizes m and n (Gaussian binomial)."""
    # [m + n choose m]_q = prod_{i=1..m} (1 - q^(n+i)) / (1 - q^i); Python ints keep the
    # alternating signs of the intermediate products exact.
    poly: list[int] = [1]
    for i in range(1, m + 1):
        grown = poly + [0] * (n + i)
        for k, c in enumerate(poly):
            grown[k + n + i] -= c
        for k in range(i, len(grown)):  # divide by (1 - q^i): running sums of stride i
            grown[k] += grown[k - i]
        poly = grown[: i * n + 1]  # the top i coefficients are now zero
    return poly[: m * n + 1]


def mann_whitney_u(a: ArrayLike, b: ArrayLike) -> tuple[float, float]:
    """Two-sided Mann-Whitney U (Wilcoxon rank-sum) test; ``(U of a, pvalue)``.

    Follows ``scipy.stats.mannwhitneyu``'s defaults: exact p-value when one sample has at
    most 8 values and there are no ties, otherwise the normal approximation with the tie
    and continuity corrections.

    Examples
    --------
    >>> mann_whitney_u([0.1, 0.2, 0.3], [0.4, 0.5, 0.6, 0.7])
    (0.0, 0.05714285714285714)
    """
    xa, xb = _clean(a), _clean(b)
    n1, n2 = xa.size, xb.size
    if n1 == 0 or n2 == 0:
        return math.nan, math.nan
    ranks, ties = _rank_average(np.concatenate([xa, xb]))
    u1 = float(ranks[:n1].sum() - n1 * (n1 + 1) / 2.0)
    u = max(u1, n1 * n2 - u1)
    has_ties = bool((ties > 1).any())
    if min(n1, n2) <= 8 and not has_ties:
        counts = _rank_sum_counts(min(n1, n2), max(n1, n2))
        # Big-int division first, so huge counts do not overflow a float.
        p = 2.0 * (sum(counts[int(u) :]) / sum(counts))
        return u1, float(min(1.0, p))
    n = n1 + n2
    tie_term = float((ties**3 - ties).sum())
    s = math.sqrt(n1 * n2 / 12.0 * ((n + 1) - tie_term / (n * (n - 1))))
    if s == 0.0:
        return u1, 1.0
    z = (u - n1 * n2 / 2.0 - 0.5) / s
    return u1, float(min(1.0, 2.0 * norm_sf(z)))


# --------------------------------------------------------------------------- t tests


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for aa in (
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """Survival function of Student's t with ``df`` degrees of freedom (any real df > 0).

    Examples
    --------
    >>> round(t_sf(2.0, 10), 6)
    0.036694
    """
    if math.isnan(t) or math.isnan(df):
        return math.nan
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_ppf(q: float, df: float) -> float:
    """Quantile of Student's t (bisection on ``t_sf``; accurate to about 1e-12).

    Examples
    --------
    >>> round(t_ppf(0.975, 10), 6)
    2.228139
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    tail = 1.0 - q
    low, high = 0.0, 1.0
    while t_sf(high, df) > tail:
        low, high = high, high * 2.0
    for _ in range(200):
        mid = 0.5 * (low + high)
        if t_sf(mid, df) > tail:
            low = mid
        else:
            high = mid
        if high - low <= 1e-13 * max(1.0, high):
            break
    return 0.5 * (low + high)


def _t_result(estimate: float, se: float, df: float, alpha: float) -> TestResult:
    if se == 0.0:
        # Constant data: scipy returns NaN; a zero difference is no evidence, any other
        # difference is certain.
        p = 1.0 if estimate == 0.0 else 0.0
        return TestResult(estimate, estimate, estimate, math.copysign(math.inf, estimate), p)
    t = estimate / se
    half = t_ppf(1.0 - alpha / 2.0, df) * se
    return TestResult(estimate, estimate - half, estimate + half, t, min(1.0, 2 * t_sf(abs(t), df)))


def welch_t_test(a: ArrayLike, b: ArrayLike, *, confidence: float = 0.95) -> TestResult:
    """Welch's unequal-variance t-test of ``mean(b) - mean(a)`` with its t interval.

    ``statistic`` equals ``scipy.stats.ttest_ind(b, a, equal_var=False).statistic``.

    Examples
    --------
    >>> r = welch_t_test([0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.8, 0.9])
    >>> round(r.estimate, 3), round(r.pvalue, 4)
    (0.45, 0.0086)
    """
    alpha = _check_confidence(confidence)
    xa, xb = _clean(a), _clean(b)
    if xa.size < 2 or xb.size < 2:
        est = float(xb.mean() - xa.mean()) if xa.size and xb.size else math.nan
        return TestResult(est, math.nan, math.nan, math.nan, math.nan)
    va, vb = xa.var(ddof=1) / xa.size, xb.var(ddof=1) / xb.size
    est = float(xb.mean() - xa.mean())
    se = math.sqrt(va + vb)
    if se == 0.0:
        return _t_result(est, 0.0, math.nan, alpha)
    df = (va + vb) ** 2 / (va**2 / (xa.size - 1) + vb**2 / (xb.size - 1))
    return _t_result(est, se, float(df), alpha)


def paired_t_test(differences: ArrayLike, *, confidence: float = 0.95) -> TestResult:
    """Paired (one-sample) t-test of the mean of per-pair differences, with its interval.

    Examples
    --------
    >>> r = paired_t_test([0.1, 0.2, 0.15, 0.3, 0.25])
    >>> round(r.estimate, 3), round(r.pvalue, 4)
    (0.2, 0.0048)
    """
    alpha = _check_confidence(confidence)
    d = _clean(differences)
    if d.size < 2:
        est = float(d.mean()) if d.size else math.nan
        return TestResult(est, math.nan, math.nan, math.nan, math.nan)
    se = float(d.std(ddof=1) / math.sqrt(d.size))
    return _t_result(float(d.mean()), se, float(d.size - 1), alpha)


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
    "norm_sf",
    "paired_bootstrap",
    "paired_t_test",
    "t_ppf",
    "t_sf",
    "two_sample_bootstrap",
    "welch_t_test",
    "wilcoxon_signed_rank",
]
