"""The offline judge's coherence: topical focus and repetition, fitted to expert ratings.

The classic embedding measure (mean similarity of consecutive sentences,
:func:`framekit.judges.local.methods.coherence_similarity`) agrees with SummEval's expert
coherence ratings at a summary-level Spearman of about 0.04: it carries no signal. Two
features do better on the same data, and together reach about 0.3 (measured and fitted by
``scripts/calibrate_offline_coherence.py``, figures in ``calibration.json``):

* **focus**: the mean cosine of each sentence to the centroid of all of them; a response
  that heaps up loosely related statements scores low;
* **repetition**: the share of word trigrams that occur more than once; degenerate,
  looping text scores high.

A linear fit of the expert rating (1-5) on the two gives an expected rating, rescaled to
[0, 1], and cut points place the five labels so that, on the fitting data, each label is as
common as the experts' rounded rating. Still a similarity proxy: it sees no logic.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["expected_rating", "focus", "repetition"]

_WORD = re.compile(r"\w+")


def focus(sentence_vecs: npt.ArrayLike) -> float:
    """Mean cosine similarity of each sentence to the centroid of all sentences.

    Parameters
    ----------
    sentence_vecs
        Sentence embeddings, shape ``(n, d)``.

    Returns
    -------
    float
        In [-1, 1]; 1.0 for one sentence (or none), which has nothing to stray from.

    Examples
    --------
    >>> focus([[1.0, 0.0], [1.0, 0.0]])
    1.0
    >>> round(focus([[1.0, 0.0], [0.0, 1.0]]), 4)
    0.7071
    """
    vecs = np.atleast_2d(np.asarray(sentence_vecs, dtype=np.float64))
    if vecs.size == 0 or len(vecs) < 2:
        return 1.0
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    units = vecs / np.where(norms == 0.0, 1.0, norms)
    centroid = units.mean(axis=0)
    length = np.linalg.norm(centroid)
    if length == 0.0:
        return 0.0
    return float((units @ (centroid / length)).mean())


def repetition(text: str) -> float:
    """Share of the text's word trigrams (case-folded) that repeat an earlier one.

    Examples
    --------
    >>> repetition("the cat sat on the mat")
    0.0
    >>> repetition("it is good. it is good. it is good. it is good.")  # 3 distinct of 10
    0.7
    """
    words = _WORD.findall(text.casefold())
    trigrams = list(zip(words, words[1:], words[2:]))
    if not trigrams:
        return 0.0
    counts = Counter(trigrams)
    return 1.0 - len(counts) / len(trigrams)


def expected_rating(focus_value: float, repetition_value: float, fit: Mapping[str, Any]) -> float:
    """The fitted expert rating, rescaled from 1-5 to [0, 1] and clipped.

    Examples
    --------
    >>> fit = {"intercept": 1.0, "focus": 4.0, "repetition": -4.0}
    >>> expected_rating(1.0, 0.0, fit), expected_rating(0.5, 0.25, fit)
    (1.0, 0.25)
    """
    rating = (
        float(fit["intercept"])
        + float(fit["focus"]) * focus_value
        + float(fit["repetition"]) * repetition_value
    )
    return float(min(1.0, max(0.0, (rating - 1.0) / 4.0)))
