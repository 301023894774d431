"""Agreement measures on plain arrays: kappa from confusion matrices, rank correlations,
and percentile bootstrap intervals over resampled rows.

Everything here takes numpy arrays and returns numbers; :mod:`framekit.analysis.agreement`
turns frames into these arrays. Kappa is computed from the confusion matrix (Cohen 1960;
weighted, Cohen 1968) so that a whole bootstrap is one stack of matrices.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from framekit._dependencies import import_optional

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Weights = Literal["linear", "quadratic"] | None


def confusion(rows: IntArray, cols: IntArray, k: int) -> IntArray:
    """Counts of (row category, column category) pairs, shape ``(k, k)``.

    Examples
    --------
    >>> confusion(np.array([0, 0, 1]), np.array([0, 1, 1]), 2).tolist()
    [[1, 1], [0, 1]]
    """
    return np.bincount(rows * k + cols, minlength=k * k).reshape(k, k).astype(np.int64)


def _disagreement(k: int, weights: Weights) -> FloatArray:
    i, j = np.indices((k, k))
    if weights is None:
        return (i != j).astype(np.float64)
    distance = np.abs(i - j) / max(k - 1, 1)
    return distance**2 if weights == "quadratic" else distance


def kappa(matrix: npt.ArrayLike, weights: Weights = None) -> FloatArray | float:
    """Cohen's kappa of one confusion matrix ``(k, k)`` or a stack ``(b, k, k)``.

    ``1 - observed disagreement / disagreement expected by chance``, disagreement weighted
    by ``weights``: None counts every mismatch as 1, ``"linear"`` by ``|i - j| / (k - 1)``,
    ``"quadratic"`` by its square (the usual choice for ordinal rubrics). NaN when chance
    disagreement is zero (both raters used a single category).

    Examples
    --------
    >>> round(kappa([[20, 5], [10, 15]]), 4)
    0.4
    >>> round(kappa([[2, 1, 0], [0, 2, 1], [0, 0, 2]], "quadratic"), 4)
    0.8049
    """
    m = np.asarray(matrix, dtype=np.float64)
    single = m.ndim == 2
    m = np.atleast_3d(m) if not single else m[None]
    k = m.shape[-1]
    w = _disagreement(k, weights)
    n = m.sum(axis=(1, 2))
    expected = m.sum(axis=2)[:, :, None] * m.sum(axis=1)[:, None, :] / n[:, None, None]
    observed_d = (w * m).sum(axis=(1, 2))
    expected_d = (w * expected).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(expected_d > 0, 1.0 - observed_d / expected_d, np.nan)
    return float(out[0]) if single else out


def precision_recall(matrix: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Per category, the column rater's precision and recall against the row rater.

    Rows are the reference (people), columns the rater judged (the judge); NaN where a
    category was never predicted (precision) or never present (recall). Works on a stack.

    Examples
    --------
    >>> p, r = precision_recall([[3, 1], [2, 4]])
    >>> p.round(3).tolist(), r.round(3).tolist()
    ([0.6, 0.8], [0.75, 0.667])
    """
    m = np.asarray(matrix, dtype=np.float64)
    diag = np.diagonal(m, axis1=-2, axis2=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = diag / m.sum(axis=-2)
        recall = diag / m.sum(axis=-1)
    return precision, recall


def bootstrap_confusions(rows: IntArray, cols: IntArray, k: int, indices: IntArray) -> IntArray:
    """Confusion matrices of every resample; ``indices`` is ``(b, n)`` row positions."""
    codes = rows[indices] * k + cols[indices]
    b = indices.shape[0]
    offset = (np.arange(b) * k * k)[:, None]
    counts = np.bincount((codes + offset).ravel(), minlength=b * k * k)
    return counts.reshape(b, k, k)


def resample_indices(n: int, n_resamples: int, seed: int) -> IntArray:
    """Row positions of ``n_resamples`` bootstrap resamples of ``n`` rows, seeded."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(n_resamples, n), dtype=np.int64)


def interval(samples: npt.ArrayLike, confidence: float) -> tuple[float | None, float | None]:
    """Percentile interval of bootstrap ``samples``, NaN resamples left out.

    ``(None, None)`` when fewer than half the resamples give a value (e.g. kappa on
    resamples where one rater used a single category).

    Examples
    --------
    >>> [round(v, 6) for v in interval(np.arange(101.0), 0.9)]
    [5.0, 95.0]
    """
    values = np.asarray(samples, dtype=np.float64)
    finite = values[np.isfinite(values)]
    if finite.size == 0 or finite.size < values.size / 2:
        return None, None
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(finite, [alpha, 1.0 - alpha])
    return float(low), float(high)


def _scipy_stats() -> Any:
    return import_optional("scipy.stats", extra="stats", purpose="a rank correlation")


def _ranks(x: FloatArray) -> FloatArray:
    rankdata = _scipy_stats().rankdata

    return np.asarray(rankdata(x, axis=-1), dtype=np.float64)


def pearson_rows(x: FloatArray, y: FloatArray) -> FloatArray:
    """Pearson's r along the last axis (one value per row of a stack); NaN when constant."""
    xc = x - x.mean(axis=-1, keepdims=True)
    yc = y - y.mean(axis=-1, keepdims=True)
    denominator = np.sqrt((xc**2).sum(axis=-1) * (yc**2).sum(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, (xc * yc).sum(axis=-1) / denominator, np.nan)


def spearman_rows(x: FloatArray, y: FloatArray) -> FloatArray:
    """Spearman's rho along the last axis: Pearson's r of average ranks (ties shared)."""
    return pearson_rows(_ranks(x), _ranks(y))


def kendall(x: FloatArray, y: FloatArray) -> float:
    """Kendall's tau-b (ties corrected); NaN when either side is constant."""
    kendalltau = _scipy_stats().kendalltau
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        return float("nan")
    return float(kendalltau(x, y).statistic)
