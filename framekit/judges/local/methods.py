"""The numbers behind the offline ("local") judge: similarities, labels and cut points.

Pure functions on texts and vectors; nothing here loads a model. The embedder
(:mod:`framekit.judges.local.embedder`) turns texts into unit vectors, these functions turn
vectors into one similarity per record, and :data:`CALIBRATION` turns a similarity into
an evaluator's label with cut points measured by ``scripts/calibrate_local_judge.py``
(WikiQA, relevance) and ``scripts/calibrate_offline_coherence.py`` (SummEval, coherence:
see :mod:`framekit.judges.local.coherence`); the figures are in ``calibration.json``.
"""

from __future__ import annotations

import bisect
import functools
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = [
    "CALIBRATION",
    "RELEVANCE_RULES",
    "Calibration",
    "Scale",
    "coherence_similarity",
    "cosine",
    "cosine_matrix",
    "label_for",
    "load_calibration",
    "relevance_similarity",
    "split_sentences",
]

ArrayLike = npt.ArrayLike

# --------------------------------------------------------------------------- sentences

# Words that end in a period without ending a sentence. Lower-case, without the dot.
# Only matters before a capital letter; "no" is left out because "I said no. Then..."
# is more common than "No. 5".
_ABBREVIATION_WORDS = (
    "mr mrs ms dr prof sr jr st mt vs etc e.g i.e cf al approx dept fig figs vol vols pp "
    "ed eds inc ltd co corp jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k a.m "
    "p.m ph.d gen col lt sgt rev hon"
)
_ABBREVIATIONS = frozenset(_ABBREVIATION_WORDS.split())
# A bullet, a numbered item or a Markdown heading marker at the start of a line.
_BULLET = re.compile(
    r"^\s*(?:[-*+\u2022\u2023\u25e6\u2043>]+|#{1,6}|\(?\d{1,3}[.)]|\(?[a-z][.)]|\([A-Z]\))\s+"
)
# Candidate boundary: terminal punctuation, optional closing quotes/brackets, whitespace,
# then something that can start a sentence.
_BOUNDARY = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)\]]*\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])")
_LAST_WORD = re.compile(r"(\S+)$")


def split_sentences(text: str) -> list[str]:
    """Split text into sentences with a small, predictable rule set.

    Lines are split first (so list items and headings stand alone, bullet markers
    removed); within a line, a sentence ends at ``.``, ``!``, ``?`` or ``…`` followed by
    whitespace and a capital letter or digit, unless the word before the period is a
    common abbreviation (``Dr.``, ``e.g.``, ``U.S.``) or a single letter, read as an
    initial (``J. R. R.``; so "plan B. It" stays one sentence). A regex, not a parser:
    good enough to find where a response changes subject, which is all coherence needs.

    Parameters
    ----------
    text
        Any text; empty or blank text gives an empty list.

    Returns
    -------
    list of str
        The sentences, stripped, without empty ones.

    Examples
    --------
    >>> split_sentences("Dr. Smith arrived. He sat down! Did he stay?")
    ['Dr. Smith arrived.', 'He sat down!', 'Did he stay?']
    >>> split_sentences("Steps:\\n- open the lid\\n- pour 2.5 l of water")
    ['Steps:', 'open the lid', 'pour 2.5 l of water']
    """
    sentences: list[str] = []
    for raw_line in text.splitlines():
        line = _BULLET.sub("", raw_line, count=1).strip()
        if not line:
            continue
        start = 0
        for match in _BOUNDARY.finditer(line):
            before = line[start : match.start() + 1]
            if line[match.start()] == "." and _is_abbreviation(before):
                continue
            sentence = line[start : match.end()].strip()
            if sentence:
                sentences.append(sentence)
            start = match.end()
        tail = line[start:].strip()
        if tail:
            sentences.append(tail)
    return sentences


def _is_abbreviation(text_up_to_period: str) -> bool:
    found = _LAST_WORD.search(text_up_to_period)
    if found is None:
        return False
    word = found.group(1).lstrip("\"'(\u201c\u2018[").rstrip(".").lower()
    # A single letter is an initial ("J. K. Rowling"), not the end of a sentence.
    return word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())


# --------------------------------------------------------------------------- vectors


def _unit_rows(vectors: ArrayLike) -> npt.NDArray[np.float64]:
    array = np.atleast_2d(np.asarray(vectors, dtype=np.float64))
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    # A zero vector has no direction: leave it zero so its similarities are 0, not NaN.
    return array / np.where(norms == 0.0, 1.0, norms)


def cosine(a: ArrayLike, b: ArrayLike) -> float:
    """Cosine similarity of two vectors.

    The embedder's vectors are already unit length; these helpers normalise anyway so
    that vectors from any other source (a remote embedding endpoint) give true cosines.

    Parameters
    ----------
    a, b
        1-D vectors of equal length.

    Returns
    -------
    float
        In [-1, 1]; 0.0 when either vector is zero.

    Examples
    --------
    >>> cosine([1.0, 0.0], [1.0, 1.0])
    0.7071067811865475
    """
    return float(cosine_matrix(a, b)[0, 0])


def cosine_matrix(a: ArrayLike, b: ArrayLike) -> npt.NDArray[np.float64]:
    """All cosine similarities between the rows of ``a`` and the rows of ``b``.

    Parameters
    ----------
    a, b
        Arrays of shape ``(n, d)`` and ``(m, d)`` (a 1-D vector counts as one row).

    Returns
    -------
    numpy.ndarray
        Shape ``(n, m)``.

    Examples
    --------
    >>> cosine_matrix([[1.0, 0.0], [0.0, 2.0]], [1.0, 0.0]).tolist()
    [[1.0], [0.0]]
    """
    return _unit_rows(a) @ _unit_rows(b).T


def _rule_max(sims: npt.NDArray[np.float64]) -> float:
    return float(sims.max())


def _rule_mean(sims: npt.NDArray[np.float64]) -> float:
    return float(sims.mean())


def _rule_top2(sims: npt.NDArray[np.float64]) -> float:
    return float(np.sort(sims)[-2:].mean())


def _rule_rank_weighted(sims: npt.NDArray[np.float64]) -> float:
    # Reciprocal-rank weights over the documents sorted best first: 1, 1/2, 1/3 ...
    ordered = np.sort(sims)[::-1]
    weights = 1.0 / np.arange(1, len(ordered) + 1)
    return float((ordered * weights).sum() / weights.sum())


def _rule_softmax(sims: npt.NDArray[np.float64]) -> float:
    # A smooth maximum: documents within ~0.05 of the best one still count.
    weights = np.exp((sims - sims.max()) / 0.05)
    return float((sims * weights).sum() / weights.sum())


#: Ways to combine a query's similarities to several documents, by name. The calibration
#: script measures each on WikiQA; :func:`relevance_similarity` uses the best ("max").
RELEVANCE_RULES: Mapping[str, Callable[[npt.NDArray[np.float64]], float]] = {
    "max": _rule_max,
    "softmax": _rule_softmax,
    "top2": _rule_top2,
    "rank_weighted": _rule_rank_weighted,
    "mean": _rule_mean,
}
_DEFAULT_RULE = "max"


def relevance_similarity(
    query_vec: ArrayLike, doc_vecs: ArrayLike, *, rule: str = _DEFAULT_RULE
) -> float:
    """How similar a query is to the best of its documents.

    Documents are combined by their maximum similarity: measured on WikiQA lists of
    5 candidate sentences (``scripts/calibrate_local_judge.py``), "does this list contain
    an answer" ranks best by the max (see ``calibration.json``, ``combination``); a mean
    punishes a good document for the company it keeps. The max is also on the same scale
    as a single pair, so the single-pair cut points apply unchanged.

    Parameters
    ----------
    query_vec
        The query's embedding, 1-D.
    doc_vecs
        One document embedding (1-D) or several (2-D, one per row).
    rule
        A name from :data:`RELEVANCE_RULES`; the default is the measured best.

    Returns
    -------
    float
        Cosine similarity in [-1, 1].

    Raises
    ------
    ValueError
        No documents, or an unknown rule.

    Examples
    --------
    >>> relevance_similarity([1.0, 0.0], [[0.0, 1.0], [1.0, 0.0]])
    1.0
    >>> relevance_similarity([1.0, 0.0], [[0.0, 1.0], [1.0, 0.0]], rule="mean")
    0.5
    """
    if rule not in RELEVANCE_RULES:
        raise ValueError(f"unknown rule {rule!r}; choose one of {sorted(RELEVANCE_RULES)}")
    docs = np.atleast_2d(np.asarray(doc_vecs, dtype=np.float64))
    if docs.size == 0:
        raise ValueError("relevance_similarity needs at least one document vector")
    return RELEVANCE_RULES[rule](cosine_matrix(query_vec, docs)[0])


def coherence_similarity(sentence_vecs: ArrayLike, history_vecs: ArrayLike | None = None) -> float:
    """Mean cosine similarity of consecutive sentences: the classic embedding coherence.

    When earlier turns are given, the last of them is put in front of the response's
    sentences, so the link from the conversation to the response's first sentence counts
    as one more consecutive pair. Embeddings see topic drift, not order or logic: a
    response whose sentences stay on one subject scores high even when shuffled.

    A single sentence without history has nothing to be incoherent with and gets full
    marks (1.0); no sentences at all also returns 1.0, since emptiness is a relevance
    failure, not a coherence one.

    Parameters
    ----------
    sentence_vecs
        Embeddings of the response's sentences in order, shape ``(n, d)``.
    history_vecs
        Embeddings of earlier turns in order, shape ``(k, d)``; only the last one is used.

    Returns
    -------
    float
        Mean of the consecutive cosine similarities, in [-1, 1].

    Examples
    --------
    >>> coherence_similarity([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    0.5
    >>> coherence_similarity([[1.0, 0.0]])
    1.0
    >>> coherence_similarity([[1.0, 0.0]], history_vecs=[[0.0, 1.0]])
    0.0
    """
    chain = np.asarray(sentence_vecs, dtype=np.float64)
    if chain.size == 0:
        return 1.0
    chain = np.atleast_2d(chain)
    if history_vecs is not None:
        history = np.atleast_2d(np.asarray(history_vecs, dtype=np.float64))
        if history.size:
            chain = np.vstack([history[-1:], chain])
    if len(chain) < 2:
        return 1.0
    units = _unit_rows(chain)
    return float(np.einsum("ij,ij->i", units[:-1], units[1:]).mean())


# --------------------------------------------------------------------------- labels


def label_for(similarity: float, cuts: Sequence[float], labels: Sequence[str]) -> str:
    """The label whose band contains ``similarity``; a value on a cut goes up.

    Parameters
    ----------
    similarity
        The value to place.
    cuts
        Ascending cut points, one fewer than ``labels``.
    labels
        Labels from worst to best.

    Returns
    -------
    str
        ``labels[i]`` where ``i`` is the number of cuts ``<= similarity``.

    Raises
    ------
    ValueError
        NaN similarity, cuts not ascending, or ``len(labels) != len(cuts) + 1``.

    Examples
    --------
    >>> label_for(0.42, [0.3, 0.5], ["low", "medium", "high"])
    'medium'
    >>> label_for(0.5, [0.3, 0.5], ["low", "medium", "high"])
    'high'
    """
    if len(labels) != len(cuts) + 1:
        raise ValueError(f"{len(labels)} labels need {len(labels) - 1} cuts, got {len(cuts)}")
    if any(b < a for a, b in zip(cuts, cuts[1:])):
        raise ValueError(f"cuts must be ascending, got {list(cuts)}")
    if math.isnan(similarity):
        raise ValueError("cannot label a NaN similarity")
    return labels[bisect.bisect_right(cuts, similarity)]


@dataclass(frozen=True)
class Scale:
    """Ordered labels and the similarity cut points between them.

    Examples
    --------
    >>> Scale(labels=("irrelevant", "relevant"), cuts=(0.4,)).label(0.55)
    'relevant'
    """

    labels: tuple[str, ...]
    cuts: tuple[float, ...]

    def __post_init__(self) -> None:
        label_for(0.0, self.cuts, self.labels)  # validates the shape once

    def label(self, similarity: float) -> str:
        """The label for ``similarity`` (see :func:`label_for`)."""
        return label_for(similarity, self.cuts, self.labels)


@dataclass(frozen=True)
class Calibration:
    """Cut points for the offline judge, as measured for one embedding model.

    Attributes
    ----------
    relevance_binary, relevance_three, relevance_five
        irrelevant/relevant; low/medium/high; the five-level ResponseRelevance rubric.
    coherence_five
        The five-level rubric for :func:`coherence_similarity`.
    model_id
        The :attr:`LocalEmbedder.model_id` the numbers were measured with.
    source
        The whole of ``calibration.json``: how each number was obtained, AUC, MAP, MRR.
    """

    relevance_binary: Scale
    relevance_three: Scale
    relevance_five: Scale
    coherence_five: Scale
    model_id: str
    source: Mapping[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_file(cls, path: str | Path) -> Calibration:
        """Read a ``calibration.json`` written by ``scripts/calibrate_local_judge.py``."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))

        def scale(group: str, name: str) -> Scale:
            entry = data[group]["scales"][name]
            return Scale(labels=tuple(entry["labels"]), cuts=tuple(float(c) for c in entry["cuts"]))

        return cls(
            relevance_binary=scale("relevance", "binary"),
            relevance_three=scale("relevance", "three"),
            relevance_five=scale("relevance", "five"),
            coherence_five=scale("coherence", "five"),
            model_id=str(data["model_id"]),
            source=data,
        )


CALIBRATION_PATH = Path(__file__).with_name("calibration.json")
#: The shipped cut points; an annotation only, resolved by ``__getattr__`` on first use.
CALIBRATION: Calibration


@functools.cache
def load_calibration(path: str | Path = CALIBRATION_PATH) -> Calibration:
    """The cut points in ``path`` (default: the shipped ``calibration.json``), read once.

    Examples
    --------
    >>> load_calibration().relevance_five.labels[-1]
    'Completely Yes'
    """
    return Calibration.from_file(path)


def __getattr__(name: str) -> Calibration:
    # CALIBRATION is read on first use rather than at import, so that the calibration
    # script can import this module before calibration.json exists.
    if name == "CALIBRATION":
        return load_calibration()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
