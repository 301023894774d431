"""The offline judge's verdicts: embedding similarities mapped onto each evaluator's scale.

The numbers come from :mod:`framekit.judges.local.methods` (similarities and the cut
points calibrated there); this module only decides, per evaluator, which texts to compare
and how to say what was measured. Each explanation names the method and its numbers, so a
local score is never mistaken for an LLM's reading.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from framekit._errors import RecordError
from framekit._score import passes
from framekit.evaluators import _prompt
from framekit.evaluators.base import Evaluator, Verdict
from framekit.judges.local.confidence import verdict_confidence

if TYPE_CHECKING:
    from framekit.evaluators.rubric import RubricEvaluator
    from framekit.judges.local.methods import Scale

PASS_MARK = 0.7  # AnswerRelevancy's default threshold; the direct mapping is anchored on it


def _lm() -> Any:
    # Imported on first use: it reads the calibration file.
    from framekit.judges.local import methods as local_methods

    return local_methods


def _labelled(
    ev: RubricEvaluator,
    similarity: float,
    scale: Scale,
    method: str,
    measure: str = "cosine",
    calibrated_on: str = "WikiQA",
) -> Verdict:
    """Place ``similarity`` among the scale's cut points, on the evaluator's own labels.

    The confidence is the calibrated probability that a person agrees with the pass or
    fail (:func:`framekit.judges.local.confidence.verdict_confidence`, fitted on WikiQA
    dev with its 5 % base rate): one map of the cosine serves every relevance evaluator
    through its own pass mark.
    """
    # The evaluator's labels worst first, so a renamed rubric keeps working by position.
    labels = sorted(ev.choices, key=lambda label: ev.choices[label])
    label = _lm().label_for(similarity, scale.cuts, labels)
    bands = ", ".join(f"{c:.3f}" for c in scale.cuts)
    explanation = (
        f"Local similarity proxy ({method}): {measure} {similarity:.3f}; cut points {bands} "
        f"separate {' < '.join(labels)} (calibrated on {calibrated_on}); not an LLM reading."
    )
    value = ev.choices[label]
    passed = bool(passes(value, ev.threshold, ev.direction))
    return Verdict(value, label, explanation, verdict_confidence(similarity, passed))


def five_level_relevance(ev: RubricEvaluator, request: np.ndarray, response: np.ndarray) -> Verdict:
    """ResponseRelevance: cosine of request and response on the five-level scale."""
    lm = _lm()
    similarity = lm.cosine(request, response)
    return _labelled(
        ev, similarity, lm.CALIBRATION.relevance_five, "request vs response, all-MiniLM-L6-v2"
    )


def context_verdict(
    ev: RubricEvaluator, request: np.ndarray, documents: Sequence[np.ndarray], levels: str
) -> Verdict:
    """Retrieval and context relevance: the best document's cosine on a binary or
    three-level scale (a list is as relevant as its most relevant document)."""
    lm = _lm()
    sims = lm.cosine_matrix(request, np.vstack(documents))[0]
    similarity = lm.relevance_similarity(request, np.vstack(documents))
    scale = (
        lm.CALIBRATION.relevance_binary if levels == "binary" else lm.CALIBRATION.relevance_three
    )
    best = int(np.argmax(sims)) + 1
    method = f"request vs best of {len(documents)} document(s), document {best}, all-MiniLM-L6-v2"
    return _labelled(ev, similarity, scale, method)


def coherence_texts(record: Mapping[str, Any]) -> list[str]:
    """The response's sentences (the request is not used offline).

    Raises :class:`RecordError` when the shipped calibration found the offline method
    unusable (summary-level Spearman with experts under its floor): the row then fails
    with the measured figure instead of receiving a label that carries no information.
    """
    fit = _lm().CALIBRATION.source["coherence"]
    if not fit.get("usable", False):
        figure = fit.get("offline_figure")
        raise RecordError(
            f"offline coherence is not measured to agree with people (SummEval dev "
            f"Spearman {figure}); use an LLM judge (judge='openai/gpt-4o-mini' or "
            "$FRAMEKIT_JUDGE) for coherence"
        )
    return sentences(record)


def sentences(record: Mapping[str, Any]) -> list[str]:
    output = _prompt.as_text(record["output"])
    return _lm().split_sentences(output) or [output.strip()]


def previous_turn(record: Mapping[str, Any]) -> str | None:
    """The request, else the last earlier turn with text (``None`` when neither)."""
    if record.get("input") is not None and _prompt.as_text(record["input"]).strip():
        return _prompt.as_text(record["input"])
    history = record.get("history")
    if isinstance(history, str):
        return history.strip() or None
    for message in reversed(history or []):
        text = _prompt.message_text(message) if isinstance(message, Mapping) else str(message)
        if text.strip():
            return text
    return None


def coherence_verdict(
    ev: RubricEvaluator, record: Mapping[str, Any], vectors: list[np.ndarray]
) -> Verdict:
    """Coherence: focus and repetition combined by the fit to SummEval expert ratings."""
    from framekit.judges.local import coherence as lc

    lm = _lm()
    section = lm.CALIBRATION.source["coherence"]
    focus = lc.focus(np.vstack(vectors))
    repeated = lc.repetition(_prompt.as_text(record["output"]))
    rating = lc.expected_rating(focus, repeated, section["fit"])
    scale = lm.CALIBRATION.coherence_five
    labels = sorted(ev.choices, key=lambda label: ev.choices[label])
    label = lm.label_for(rating, scale.cuts, labels)
    bands = ", ".join(f"{c:.3f}" for c in scale.cuts)
    single = "; a single sentence has nothing to stray from" if len(vectors) == 1 else ""
    explanation = (
        f"Local similarity proxy (focus of {len(vectors)} sentence(s){single}, and word "
        "repetition, "
        f"all-MiniLM-L6-v2): focus {focus:.3f}, repeated trigrams {repeated:.3f}, fitted "
        f"expert rating {rating:.3f} on [0, 1]; cut points {bands} separate "
        f"{' < '.join(labels)} (fitted on SummEval, where it agrees with experts at "
        f"Spearman {section['offline_figure']:.2f}; an LLM judge reaches about 0.58); "
        "not an LLM reading."
    )
    return Verdict(ev.choices[label], label, explanation)


def direct_relevancy(ev: Evaluator, request: np.ndarray, response: np.ndarray) -> Verdict:
    """AnswerRelevancy without a question writer: the request/response cosine mapped onto
    [0, 1] piecewise linearly, 0 -> 0, the calibrated relevant cut -> 0.7, 1 -> 1."""
    lm = _lm()
    similarity = lm.cosine(request, response)
    cut = float(lm.CALIBRATION.relevance_binary.cuts[0])
    if similarity <= cut:
        value = PASS_MARK * max(similarity, 0.0) / cut if cut > 0 else 0.0
    else:
        value = PASS_MARK + (1.0 - PASS_MARK) * (similarity - cut) / (1.0 - cut)
    value = min(1.0, max(0.0, value))
    explanation = (
        f"Local similarity proxy, direct comparison (no question writer): request vs "
        f"response cosine "
        f"{similarity:.3f}, mapped linearly so that 0 -> 0, the calibrated relevance cut "
        f"{cut:.3f} -> {PASS_MARK} and 1 -> 1, giving {value:.3f}. Noncommittal answers "
        "are not detected offline."
    )
    return Verdict(value, None, explanation)
