"""How sure the offline relevance judge is of a verdict, as a calibrated probability.

The relevance evaluators judge offline by one signal, the cosine of the request and the
(best) document or response, and pass a pair when it reaches their cut. The probability
that a pair is relevant given that cosine was fitted on WikiQA dev by
``scripts/calibrate_offline_confidence.py`` (isotonic regression and Platt scaling
measured out of fold; the choice and its figures, Brier score and expected calibration
error before and after, are in ``confidence.json``). A verdict's confidence follows: the
probability of relevance for a pass, its complement for a fail.

The fit carries WikiQA's base rate (about 5 % of its pairs answer their question). Data
where relevant pairs are commoner make a fail less certain and a pass more: ``prior``
moves the fit to another base rate by Bayes' rule on the odds.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CONFIDENCE_PATH",
    "load_confidence",
    "moved_to_prior",
    "relevant_probability",
    "verdict_confidence",
]

CONFIDENCE_PATH = Path(__file__).with_name("confidence.json")


@functools.cache
def load_confidence(path: str | Path = CONFIDENCE_PATH) -> dict[str, Any]:
    """The fitted map and its figures (default: the shipped ``confidence.json``), read once."""
    data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    return data


def relevant_probability(
    signal: float, *, prior: float | None = None, fit: dict[str, Any] | None = None
) -> float:
    """p(the pair is relevant | the offline judge's cosine).

    Parameters
    ----------
    signal
        The cosine the offline judge compared with its cut.
    prior
        The share of relevant pairs expected in the data at hand (default: WikiQA's).
    fit
        A loaded ``confidence.json`` (default: the shipped one).

    Returns
    -------
    float
        In (0, 1) for the Platt map; isotonic maps may reach 0 or 1 at the ends.

    Raises
    ------
    ValueError
        A NaN signal, or a prior outside (0, 1).

    Examples
    --------
    >>> p = relevant_probability(0.9)
    >>> 0.0 < relevant_probability(0.1) < p < 1.0
    True
    """
    if math.isnan(signal):
        raise ValueError("cannot read a NaN signal")
    fit = fit or load_confidence()
    if fit["method"] == "platt":
        logit = fit["platt"]["slope"] * signal + fit["platt"]["intercept"]
        p = 1.0 / (1.0 + math.exp(-logit))
    else:
        p = float(np.interp(signal, fit["isotonic"]["x"], fit["isotonic"]["y"]))
    return p if prior is None else _at_prior(p, prior, fit)


def _at_prior(p: float, prior: float, fit: dict[str, Any]) -> float:
    """``p`` (at the fit's base rate) at base rate ``prior``: Bayes' rule on the odds."""
    if not 0.0 < prior < 1.0:
        raise ValueError(f"prior must be between 0 and 1, got {prior!r}")
    if p <= 0.0 or p >= 1.0:
        return p
    base = float(fit["positive_rate"])
    odds = p / (1.0 - p) * (prior / (1.0 - prior)) / (base / (1.0 - base))
    return odds / (1.0 + odds)


def verdict_confidence(
    signal: float, passed: bool, *, prior: float | None = None, fit: dict[str, Any] | None = None
) -> float:
    """The probability that the offline verdict (pass or fail) agrees with a person.

    Parameters
    ----------
    signal
        The cosine the verdict was read from.
    passed
        Whether the evaluator passed the row (its label scored at least the threshold).
    prior, fit
        As for :func:`relevant_probability`.

    Examples
    --------
    >>> round(verdict_confidence(0.1, passed=False), 3) > 0.95   # a clear miss
    True
    >>> verdict_confidence(0.6, passed=True) < 0.5   # on WikiQA, most passes are wrong
    True
    """
    p = relevant_probability(signal, prior=prior, fit=fit)
    return p if passed else 1.0 - p


def moved_to_prior(
    confidence: float, passed: bool, prior: float, *, fit: dict[str, Any] | None = None
) -> float:
    """A :func:`verdict_confidence` given at the fit's base rate, moved to ``prior``: the
    same as ``verdict_confidence(signal, passed, prior=prior)`` for the signal it came
    from, without that signal.

    Parameters
    ----------
    confidence
        The verdict's confidence as the shipped map gave it (WikiQA's base rate).
    passed
        Whether the verdict passed the row.
    prior
        The share of relevant pairs expected in the data at hand, in (0, 1).
    fit
        A loaded ``confidence.json`` (default: the shipped one).

    Examples
    --------
    >>> c = verdict_confidence(0.6, passed=True)
    >>> round(moved_to_prior(c, True, 0.3), 6) == round(verdict_confidence(0.6, True, prior=0.3), 6)
    True
    """
    moved = _at_prior(confidence if passed else 1.0 - confidence, prior, fit or load_confidence())
    return moved if passed else 1.0 - moved
