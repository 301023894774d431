"""The offline judge on "is it supported?": a similarity proxy, and the likelihood scorer.

Two measures of how well documents support a text, each mapped onto the evaluator's
scale by a fit to SummEval's expert ratings (``scripts/calibrate_offline_support.py``
writes ``framekit/judges/local/likelihood_calibration.json``):

* **similarity** (no extra needed): the text and the documents are split into sentences
  and embedded; each text sentence's best cosine to a document sentence, averaged. A
  proxy: paraphrase, negation and a wrong number look alike to it.
* **likelihood** (``framekit[lm]``): the mean log-probability of the text's tokens given
  the documents, under SmolLM2-135M-Instruct
  (:mod:`framekit.judges.local.likelihood`). Per-sentence means from the same pass fill
  the claim list in ``details``: likelihoods, not verdicts.

A measure becomes a score by piecewise-linear interpolation through fitted knots: the
measure at the 1st percentile of the fitting data -> 0, the cut point between the two
lower labels -> 0.5, the cut point of the top label -> 0.875 (an expert rating of 4.5 of
5), the 99th percentile -> 1. The cut points are placed so that each label is as common
on the fitting data as the experts' ratings in its band (below 3, 3 to 4.5, 4.5 and up).
So score, label and pass mark agree, and the order of the measure is kept.

Coherence with the extra uses the likelihood of the response given the request, placed
on its five labels by cut points fitted to the experts' coherence ratings. A response
without a request is read by the embedding proxy instead (focus and repetition,
:mod:`framekit.judges.local.coherence`): read alone, a response is far less probable
than after the text it answers, so those cut points put 47 of 48 SummEval summaries in
the lowest label (framekit issue 39), and cut points fitted on responses read alone
would rank them worse than the proxy does (summary-level Spearman 0.12 against 0.30,
``benchmarks/bench_offline_agreement.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any, Protocol

import numpy as np

from framekit._errors import RecordError
from framekit.evaluators import _prompt
from framekit.evaluators._claims import band_label
from framekit.evaluators.base import Verdict
from framekit.evaluators.templates import TemplateSpec
from framekit.judges.local.likelihood import Likelihood, LikelihoodInput

CALIBRATION_FILE = "likelihood_calibration.json"
#: The published figure an LLM judge reaches on the same ratings (G-Eval with GPT-4,
#: summary-level Spearman on SummEval), quoted in explanations for scale.
LLM_FIGURES = {"consistency": 0.51, "coherence": 0.58}
#: Scores at the knots between the fit's fixed points: see the module docstring.
KNOT_VALUES = (0.0, 0.5, 0.875, 1.0)


class ClaimsChecker(Protocol):
    """What these measures read of a claims evaluator (Groundedness, ContextRecall:
    :class:`framekit.evaluators.groundedness.ClaimsEvaluator`, which calls them)."""

    @property
    def claims_field(self) -> str:
        """The field whose claims are checked against the documents."""

    @property
    def subject(self) -> str:
        """What that field is called in an explanation ("response", "reference")."""

    @property
    def bands(self) -> Mapping[str, float]:
        """Label -> lowest score of its band, best first."""

    @property
    def spec(self) -> TemplateSpec:
        """Its prompt template (whose extra entries hold the likelihood instructions)."""


class LabelScale(Protocol):
    """What the coherence measure reads of a rubric evaluator (Coherence)."""

    @property
    def choices(self) -> Mapping[str, float]:
        """Label -> score of the rubric."""


@cache
def calibration() -> dict[str, Any]:
    """The fitted cut points (``framekit/judges/local/likelihood_calibration.json``)."""
    path = resources.files("framekit.judges.local").joinpath(CALIBRATION_FILE)
    return dict(json.loads(path.read_text("utf-8")))


def fitted_value(measure: float, fit: Mapping[str, Any]) -> float:
    """A measure as a score in [0, 1], through the fit's knots.

    Examples
    --------
    >>> fit = {"knots": [-3.0, -2.0, -1.5, -1.0]}
    >>> [round(fitted_value(m, fit), 3) for m in (-4.0, -2.0, -1.75, -1.5, -0.5)]
    [0.0, 0.5, 0.688, 0.875, 1.0]
    """
    return float(np.interp(measure, fit["knots"], KNOT_VALUES))


def _fit(section: str, method: str) -> dict[str, Any]:
    fit = dict(calibration()[section][method])
    if not fit.get("usable", True):
        raise RecordError(
            f"the offline {method} measure is not measured to agree with people (SummEval "
            f"dev Spearman {fit.get('figure')}); use an LLM judge for {section}"
        )
    return fit


# -- the similarity proxy ----------------------------------------------------------------


def sentences(text: str) -> list[str]:
    from framekit.judges.local.methods import split_sentences

    return split_sentences(text) or [text.strip()]


def document_sentences(documents: Sequence[str]) -> list[tuple[int, str]]:
    """(document number, sentence) for every sentence of every document."""
    return [(n, s) for n, doc in enumerate(documents, start=1) for s in sentences(doc) if s]


def similarity_texts(ev: ClaimsChecker, record: Mapping[str, Any]) -> list[str]:
    """The text's sentences, then the documents' sentences, to embed."""
    own = sentences(str(record[ev.claims_field]))
    return own + [s for _, s in document_sentences(record["context"])]


def similarity_measure(
    ev: ClaimsChecker, record: Mapping[str, Any], vectors: Sequence[np.ndarray]
) -> tuple[float, list[dict[str, Any]]]:
    """The mean over the text's sentences of their best cosine to a document sentence,
    and per sentence that cosine and the document it is in."""
    from framekit.judges.local.methods import cosine_matrix

    own = sentences(str(record[ev.claims_field]))
    docs = document_sentences(record["context"])
    sims = cosine_matrix(np.vstack(vectors[: len(own)]), np.vstack(vectors[len(own) :]))
    best = sims.argmax(axis=1)
    per = [
        {"claim": s, "similarity": round(float(sims[i, j]), 4), "document": docs[j][0]}
        for i, (s, j) in enumerate(zip(own, best))
    ]
    return float(sims.max(axis=1).mean()), per


def similarity_verdict(
    ev: ClaimsChecker, record: Mapping[str, Any], vectors: Sequence[np.ndarray]
) -> Verdict:
    fit = _fit("groundedness", "similarity")
    measure, per = similarity_measure(ev, record, vectors)
    value = fitted_value(measure, fit)
    label = _offline_label(ev, value)
    weakest = min(per, key=lambda c: c["similarity"])
    explanation = (
        f"Local similarity proxy (each of {len(per)} sentence(s) of the {ev.subject} vs the "
        f"closest document sentence, all-MiniLM-L6-v2): mean best cosine {measure:.3f}, "
        f"score {value:.3f} through cut points fitted on SummEval expert consistency "
        f"(Spearman {fit['figure']:.2f} there; an LLM judge reaches about "
        f"{LLM_FIGURES['consistency']}); not an LLM reading. Least supported sentence "
        f"(cosine {weakest['similarity']:.2f}, document {weakest['document']}): "
        f"{_quote(weakest['claim'])}"
    )
    details = {"method": "similarity proxy", "measure": round(measure, 4), "claims": per}
    return Verdict(value, label, explanation, details=details)


def _offline_label(ev: ClaimsChecker, value: float) -> str:
    """The evaluator's band labels (best first) at the offline knots: top label from
    0.875, the middle from 0.5, the lowest below."""
    labels = list(ev.bands)
    lows = [KNOT_VALUES[2], KNOT_VALUES[1]] + [0.0] * (len(labels) - 2)
    return band_label(value, dict(zip(labels, lows)))


def _quote(text: str, limit: int = 160) -> str:
    from framekit._errors import one_line

    return f'"{one_line(text, limit)}"'


# -- the likelihood scorer ---------------------------------------------------------------


def claims_likelihood_input(ev: ClaimsChecker, record: Mapping[str, Any]) -> LikelihoodInput:
    """Instruction (with the request, when shown), documents, and the text scored."""
    extra = ev.spec.extra
    request = record.get("input")
    if request is not None:
        instruction = str(extra["likelihood_instruction_with_input"]).replace("{input}", request)
    else:
        instruction = str(extra["likelihood_instruction"])
    return LikelihoodInput(instruction, tuple(record["context"]), str(record[ev.claims_field]))


def claims_likelihood_verdict(
    ev: ClaimsChecker, record: Mapping[str, Any], result: Likelihood
) -> Verdict:
    fit = _fit("groundedness", "likelihood")
    value = fitted_value(result.mean_logprob, fit)
    label = _offline_label(ev, value)
    details = _likelihood_details(result)
    explanation = (
        f"Local likelihood (SmolLM2-135M-Instruct): mean token log-probability "
        f"{result.mean_logprob:.3f} of the {ev.subject} given the documents, score "
        f"{value:.3f} through cut points fitted on SummEval expert consistency (Spearman "
        f"{fit['figure']:.2f} there; an LLM judge reaches about "
        f"{LLM_FIGURES['consistency']}); not an LLM reading."
        + _least_likely(result)
        + _truncation(result)
    )
    return Verdict(value, label, explanation, details=details)


def coherence_likelihood_input(record: Mapping[str, Any]) -> LikelihoodInput | None:
    """The request as the user's turn and the response; ``None`` when the record has no
    request (or only whitespace): the embedding proxy reads that response (see the
    module's docstring for why)."""
    request = record.get("input")
    text = _prompt.as_text(request) if request is not None else ""
    if not text.strip():
        return None
    return LikelihoodInput(text, (), _prompt.as_text(record["output"]))


def coherence_likelihood_verdict(ev: LabelScale, result: Likelihood) -> Verdict:
    from framekit.judges.local.methods import label_for

    fit = _fit("coherence", "likelihood")
    labels = sorted(ev.choices, key=lambda label: ev.choices[label])
    label = label_for(result.mean_logprob, fit["cuts"], labels)
    bands = ", ".join(f"{c:.3f}" for c in fit["cuts"])
    explanation = (
        f"Local likelihood (SmolLM2-135M-Instruct): mean token log-probability "
        f"{result.mean_logprob:.3f} of the response given the request; cut points {bands} "
        f"separate {' < '.join(labels)} (fitted on SummEval expert coherence, Spearman "
        f"{fit['figure']:.2f} there; an LLM judge reaches about {LLM_FIGURES['coherence']}); "
        "not an LLM reading." + _least_likely(result) + _truncation(result)
    )
    return Verdict(ev.choices[label], label, explanation, details=_likelihood_details(result))


def _likelihood_details(result: Likelihood) -> dict[str, Any]:
    return {
        "method": "likelihood",
        "mean_logprob": round(result.mean_logprob, 4),
        "tokens": result.tokens,
        "claims": [
            {
                "claim": s.text,
                "mean_logprob": None if s.mean_logprob is None else round(s.mean_logprob, 4),
                "tokens": s.tokens,
            }
            for s in result.sentences
        ],
        "note": "per-sentence likelihoods from the same pass, not verdicts",
    }


def _least_likely(result: Likelihood) -> str:
    scored = [s for s in result.sentences if s.mean_logprob is not None]
    if len(scored) < 2:
        return ""
    low = min(scored, key=lambda s: s.mean_logprob or 0.0)
    return f" Least likely sentence ({low.mean_logprob:.2f}): {_quote(low.text)}"


def _truncation(result: Likelihood) -> str:
    cut = [
        what
        for what, flag in (
            ("the documents", result.prompt_truncated),
            ("the text", result.answer_truncated),
        )
        if flag
    ]
    return f" ({' and '.join(cut)} cut to fit the model's window.)" if cut else ""
