"""framekit._stats agrees with scipy (the reference) and keeps its promises on edge cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from framekit.analysis import _stats

st = pytest.importorskip("scipy.stats")

LEVELS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])


def judge_differences(n: int, seed: int) -> np.ndarray:
    """Differences of two rubric scores: many ties and zeros, like real judge output."""
    rng = np.random.default_rng(seed)
    return rng.choice(LEVELS, n) - rng.choice(LEVELS, n, p=[0.1, 0.1, 0.2, 0.3, 0.3])


# --------------------------------------------------------------------------- wilcoxon


@pytest.mark.parametrize("n", [3, 8, 13, 14, 30, 51, 200])
def test_wilcoxon_matches_scipy_with_ties_and_zeros(n: int) -> None:
    # n <= 13 exercises the sign-flip enumeration, larger n the tie-corrected normal approx.
    # (scipy's own permutation test takes a second at n = 13: one dataset there.)
    for seed in range(1 if n == 13 else 5):
        d = judge_differences(n, seed)
        if not d.any():
            continue
        statistic, p = _stats.wilcoxon_signed_rank(d)
        ref = st.wilcoxon(d)
        assert statistic == pytest.approx(ref.statistic)
        assert p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("n", [1, 5, 12, 20, 50, 51, 120])
def test_wilcoxon_matches_scipy_on_continuous_differences(n: int) -> None:
    # No ties, no zeros: exact distribution up to 50 pairs, normal approximation above.
    rng = np.random.default_rng(n)
    d = rng.normal(0.3, 1.0, n)
    statistic, p = _stats.wilcoxon_signed_rank(d)
    ref = st.wilcoxon(d)
    assert statistic == pytest.approx(ref.statistic)
    assert p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)


def test_wilcoxon_of_identical_pairs_is_no_evidence() -> None:
    assert _stats.wilcoxon_signed_rank(np.zeros(40)) == (0.0, 1.0)
    assert all(math.isnan(v) for v in _stats.wilcoxon_signed_rank([]))


# --------------------------------------------------------------------------- mann-whitney


@pytest.mark.parametrize(
    ("n1", "n2", "ties"),
    [(3, 4, False), (8, 30, False), (5, 5, True), (9, 9, False), (40, 25, True), (200, 150, True)],
)
def test_mann_whitney_matches_scipy(n1: int, n2: int, ties: bool) -> None:
    rng = np.random.default_rng(n1 * 1000 + n2)
    for _ in range(3):
        if ties:
            a, b = rng.choice(LEVELS, n1), rng.choice(LEVELS, n2)
        else:
            a, b = rng.normal(0, 1, n1), rng.normal(0.5, 1, n2)
        u, p = _stats.mann_whitney_u(a, b)
        ref = st.mannwhitneyu(a, b)
        assert u == pytest.approx(ref.statistic)
        assert p == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-12)


# --------------------------------------------------------------------------- t tests


@pytest.mark.parametrize("seed", range(5))
def test_welch_t_matches_scipy_ttest_ind(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(0.5, rng.uniform(0.05, 0.3), rng.integers(3, 60))
    b = rng.normal(0.6, rng.uniform(0.05, 0.3), rng.integers(3, 60))
    res = _stats.welch_t_test(a, b, confidence=0.9)
    ref = st.ttest_ind(b, a, equal_var=False)
    ci = ref.confidence_interval(confidence_level=0.9)
    assert res.statistic == pytest.approx(ref.statistic, rel=1e-10)
    assert res.pvalue == pytest.approx(ref.pvalue, rel=1e-8)
    assert (res.ci_low, res.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-8)
    assert res.estimate == pytest.approx(b.mean() - a.mean())


@pytest.mark.parametrize("seed", range(5))
def test_paired_t_matches_scipy_ttest_rel(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 80))
    a = rng.choice(LEVELS, n)
    b = np.clip(a + rng.choice([-0.25, 0.0, 0.25, 0.5], n), 0, 1)
    res = _stats.paired_t_test(b - a)
    ref = st.ttest_rel(b, a)
    ci = ref.confidence_interval()
    assert res.pvalue == pytest.approx(ref.pvalue, rel=1e-8, abs=1e-300)
    assert (res.ci_low, res.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-8)


@pytest.mark.parametrize("df", [1, 2.5, 7, 30, 1000])
def test_t_distribution_matches_scipy(df: float) -> None:
    for t in [0.0, 0.3, 1.0, 2.2, 5.0, 40.0]:
        assert _stats.t_sf(t, df) == pytest.approx(st.t.sf(t, df), rel=1e-9, abs=1e-300)
        assert _stats.t_sf(-t, df) == pytest.approx(st.t.sf(-t, df), rel=1e-9)
    for q in [0.6, 0.95, 0.975, 0.9995]:
        assert _stats.t_ppf(q, df) == pytest.approx(st.t.ppf(q, df), rel=1e-9)


def test_constant_samples_give_certain_or_no_evidence() -> None:
    assert _stats.welch_t_test([1.0] * 5, [1.0] * 5).pvalue == 1.0
    assert _stats.welch_t_test([0.0] * 5, [1.0] * 5).pvalue == 0.0
    assert math.isnan(_stats.welch_t_test([1.0], [0.0, 1.0]).pvalue)


# --------------------------------------------------------------------------- bootstrap


@pytest.mark.parametrize("discrete", [True, False])
def test_bootstrap_ci_agrees_with_scipy_bootstrap(discrete: bool) -> None:
    # Discrete scores use the multinomial path, continuous ones index resampling; both
    # must match scipy's percentile interval up to Monte Carlo noise.
    rng = np.random.default_rng(7)
    x = rng.choice(LEVELS, 300) if discrete else rng.beta(2, 5, 300)
    low, high = _stats.bootstrap_mean_ci(x, n_resamples=20_000, rng=1)
    ref = st.bootstrap(
        (x,), np.mean, method="percentile", n_resamples=20_000, random_state=2
    ).confidence_interval
    se = x.std() / math.sqrt(x.size)
    assert abs(low - ref.low) < 0.1 * se
    assert abs(high - ref.high) < 0.1 * se


def test_paired_bootstrap_agrees_with_scipy_paired_bootstrap() -> None:
    rng = np.random.default_rng(3)
    a = rng.choice(LEVELS, 150)
    b = np.clip(a + rng.choice([-0.25, 0.0, 0.25, 0.5], 150), 0, 1)
    res = _stats.paired_bootstrap(b - a, n_resamples=20_000, rng=1)
    ref = st.bootstrap(
        (a, b),
        lambda x, y, axis: np.mean(y - x, axis=axis),
        paired=True,
        method="percentile",
        n_resamples=20_000,
        random_state=2,
    ).confidence_interval
    se = (b - a).std() / math.sqrt(150)
    assert res.estimate == pytest.approx((b - a).mean())
    assert (res.ci_low, res.ci_high) == pytest.approx((ref.low, ref.high), abs=0.1 * se)


def test_two_sample_bootstrap_agrees_with_scipy_bootstrap() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.choice(LEVELS, 120), rng.choice(LEVELS, 90, p=[0.1, 0.1, 0.2, 0.3, 0.3])
    res = _stats.two_sample_bootstrap(a, b, n_resamples=20_000, rng=1)
    ref = st.bootstrap(
        (a, b),
        lambda x, y, axis: np.mean(y, axis=axis) - np.mean(x, axis=axis),
        method="percentile",
        n_resamples=20_000,
        random_state=2,
    ).confidence_interval
    se = math.sqrt(a.var() / a.size + b.var() / b.size)
    assert (res.ci_low, res.ci_high) == pytest.approx((ref.low, ref.high), abs=0.1 * se)
    # And, with this many rows, with Welch's t interval.
    welch = _stats.welch_t_test(a, b)
    assert (res.ci_low, res.ci_high) == pytest.approx((welch.ci_low, welch.ci_high), abs=0.15 * se)


def test_bootstrap_p_value_is_below_alpha_exactly_when_the_interval_excludes_zero() -> None:
    outcomes = set()
    for seed in range(60):
        d = judge_differences(40, seed) * 0.5 + 0.05 * (seed % 3)
        for n_resamples in (200, 999):
            res = _stats.paired_bootstrap(d, confidence=0.9, n_resamples=n_resamples, rng=seed)
            excludes_zero = res.ci_low > 0 or res.ci_high < 0
            assert (res.pvalue < 0.1) == excludes_zero, (seed, res)
            outcomes.add(excludes_zero)
    assert outcomes == {True, False}  # both sides of the boundary were exercised


def test_bootstrap_is_reproducible_with_a_seed_and_ignores_nan() -> None:
    x = [0.0, 0.5, 1.0, float("nan"), 0.75, 0.25, 1.0, 0.5, 0.75, 0.25, 0.0, 1.0]
    assert _stats.bootstrap_mean_ci(x, rng=5) == _stats.bootstrap_mean_ci(x, rng=5)
    first, again, other = (
        _stats.bootstrap_means(x, 100, np.random.default_rng(seed)) for seed in (5, 5, 6)
    )
    assert np.array_equal(first, again) and not np.array_equal(first, other)
    low, high = _stats.bootstrap_mean_ci(x, rng=5)
    assert 0.0 <= low < np.nanmean(x) < high <= 1.0
    assert _stats.bootstrap_mean_ci([0.5]) == (0.5, 0.5)
    assert all(math.isnan(v) for v in _stats.bootstrap_mean_ci([]))


def test_invalid_confidence_is_rejected() -> None:
    with pytest.raises(ValueError, match="confidence"):
        _stats.bootstrap_mean_ci([1.0, 0.0], confidence=95)


# --------------------------------------------------------------------------- holm


def test_holm_adjustment_by_hand() -> None:
    # Sorted 0.01, 0.03, 0.04 times 3, 2, 1 -> 0.03, 0.06, 0.04 -> running max 0.06.
    assert _stats.holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06])
    assert _stats.holm([0.5, 0.9]).tolist() == [1.0, 1.0]
    out = _stats.holm([0.02, float("nan"), 0.01])
    assert math.isnan(out[1])
    assert out[[0, 2]].tolist() == pytest.approx([0.02, 0.02])  # NaN not counted: m = 2


def test_holm_is_never_below_raw_and_keeps_the_order() -> None:
    rng = np.random.default_rng(0)
    p = rng.uniform(0, 0.2, 12)
    adj = _stats.holm(p)
    assert np.all(adj >= p)
    assert np.all(np.diff(adj[np.argsort(p)]) >= 0)
    assert adj.max() <= 1.0
