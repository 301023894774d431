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

Fitted by Newton's method on the log-likelihood (concave; the information matrix is the
weighted Laplacian of who met whom), written here in numpy and vectorised over the
leading axes, so the 2000 bootstrap resamples of ``fk.rank`` are one array fit, in a
handful of iterations. (The minorisation-maximisation iteration of Hunter 2004, the
textbook fit, took thousands of iterations, seconds, when every group met only a
baseline.) ``choix`` (the maintained Python package for these
models) fits one data set per call from a list of (winner, loser) tuples (2,000 calls
for one interval), has no ties (they would have to be entered as a win each way, doubling
the data), and needs scipy, an optional extra of framekit. The tests check this fit
against the likelihood's maximum found by a general optimiser (scipy's BFGS).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

#: Score of the virtual games between two groups that met (see the module docstring).
PRIOR_TIES = 1.0
#: The fit stops when no log-strength moves more than this in an iteration.
_TOLERANCE = 1e-10
_MAX_ITERATIONS = 200
#: The largest move of a log-strength in one Newton step.
_MAX_STEP = 2.0


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
    w[..., np.eye(k, dtype=bool)] = 0.0
    games = w + np.swapaxes(w, -1, -2)
    total = w.sum(-1)
    # The mean constraint, added to the (singular) information matrix: the step then keeps
    # the strengths centred, and the system is regular for connected groups.
    centring = np.full((k, k), 1.0 / k)
    strength = np.zeros(w.shape[:-1])
    for _ in range(_MAX_ITERATIONS):
        beats = 1.0 / (1.0 + np.exp(strength[..., None, :] - strength[..., :, None]))
        gradient = total - (games * beats).sum(-1)
        weight = games * beats * (1.0 - beats)
        information = np.eye(k) * weight.sum(-1)[..., None, :] - weight + centring
        step = np.linalg.solve(information, gradient[..., None])[..., 0]
        # Newton's step on a concave likelihood, capped so a far start cannot overshoot.
        largest = np.max(np.abs(step), axis=-1, keepdims=True)
        step *= np.minimum(1.0, _MAX_STEP / np.maximum(largest, 1e-300))
        strength = strength + step
        strength -= strength.mean(-1, keepdims=True)
        if float(np.max(largest, initial=0.0)) < _TOLERANCE:
            break
    if reference is not None:
        strength = strength - strength[..., reference : reference + 1]
    return strength


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
