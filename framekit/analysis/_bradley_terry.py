"""Bradley-Terry strengths from head-to-head scores, many resamples at once.

The model: group ``i`` beats group ``j`` with probability ``1 / (1 + exp(s_j - s_i))``,
``s`` the strengths on the natural-log scale. Ties count half a win to each side (the
rule chess scores by): the fit reads a matrix ``W`` whose ``W[i, j]`` is ``i``'s score
against ``j`` (1 a win, 0.5 a tie) and ``W[i, j] + W[j, i]`` the games they played.

Only differences of strengths are identified, so a scale is fixed: the strengths are
centred (mean 0) or, with a reference group, that group is 0.

A group that won (or lost) every game has no finite maximum-likelihood strength. Every
two groups that met in the data are therefore given one virtual tie (half a win each
way), a weak prior that keeps every fit finite and moves a strength by a fraction of a
game's worth when there are dozens of real games.

Fitted by the minorisation-maximisation iteration of Hunter (2004, "MM algorithms for
generalized Bradley-Terry models", Annals of Statistics 32:384), written here in numpy
and vectorised over the leading axes, so the 2000 bootstrap resamples of ``fk.rank`` are
one array fit in milliseconds. ``choix`` (the maintained Python package for these
models) fits one data set per call from a list of (winner, loser) tuples, has no ties,
and needs scipy, an optional extra of framekit; its fit and this one are compared in the
tests.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

#: Score of the virtual games between two groups that met (see the module docstring).
PRIOR_TIES = 1.0
#: The fit stops when no log-strength moves more than this in an iteration.
_TOLERANCE = 1e-10
_MAX_ITERATIONS = 100_000


def with_prior(scores: FloatArray, met: NDArray[np.bool_]) -> FloatArray:
    """``scores`` plus one virtual tie for every two groups that met (``met[i, j]``)."""
    return scores + 0.5 * PRIOR_TIES * met


def fit(scores: FloatArray, reference: int | None = None) -> FloatArray:
    """Log-scale strengths from score matrices of shape ``(..., k, k)``.

    Parameters
    ----------
    scores
        ``scores[..., i, j]``: group ``i``'s score against ``j`` (diagonal ignored). Every
        group must have a positive score and the groups must be connected (callers add
        :func:`with_prior` and check :func:`connected` first).
    reference
        The group whose strength is 0; ``None``: the strengths have mean 0.

    Returns
    -------
    numpy.ndarray
        Strengths of shape ``(..., k)``.

    Examples
    --------
    >>> w = np.array([[0.0, 3.0], [1.0, 0.0]])  # 3 wins to 1: odds 3, log 3 = 1.0986
    >>> s = fit(w)
    >>> round(float(s[0] - s[1]), 4), float(s.sum())
    (1.0986, 0.0)
    """
    w = np.asarray(scores, dtype=np.float64).copy()
    k = w.shape[-1]
    diagonal = np.eye(k, dtype=bool)
    w[..., diagonal] = 0.0
    games = w + np.swapaxes(w, -1, -2)
    total = w.sum(-1)
    log_p = np.zeros(w.shape[:-1])
    for _ in range(_MAX_ITERATIONS):
        p = np.exp(log_p)
        denominator = (games / (p[..., :, None] + p[..., None, :])).sum(-1)
        updated = np.log(total) - np.log(denominator)
        updated -= updated.mean(-1, keepdims=True)
        change = float(np.max(np.abs(updated - log_p), initial=0.0))
        log_p = updated
        if change < _TOLERANCE:
            break
    if reference is not None:
        log_p = log_p - log_p[..., reference : reference + 1]
    return log_p


def connected(met: NDArray[np.bool_]) -> list[list[int]]:
    """The groups in connected components of the "met" graph (one list: all connected).

    Examples
    --------
    >>> met = np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], dtype=bool)
    >>> connected(met)
    [[0, 1], [2]]
    """
    k = met.shape[0]
    seen = [False] * k
    components: list[list[int]] = []
    for start in range(k):
        if seen[start]:
            continue
        seen[start] = True
        component, todo = [], [start]
        while todo:
            node = todo.pop()
            component.append(node)
            for other in np.flatnonzero(met[node] | met[:, node]):
                if not seen[other]:
                    seen[other] = True
                    todo.append(int(other))
        components.append(sorted(component))
    return components


__all__ = ["PRIOR_TIES", "connected", "fit", "with_prior"]
