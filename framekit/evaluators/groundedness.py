"""Is a text supported by the retrieved documents? Groundedness and ContextRecall.

Both ask the judge for the factual claims of one text and, claim by claim, whether the
documents support it: Groundedness checks the response (does it say only what was
retrieved?), ContextRecall the reference answer (did retrieval find what the answer
needs?). The score is the share of supported claims (:mod:`framekit.evaluators._claims`);
the offline judge estimates it (:mod:`framekit.evaluators._offline_support`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from framekit._errors import InputError, RecordError
from framekit.evaluators import _claims, _prompt
from framekit.evaluators.base import Evaluator, Fields, Vectors, Verdict
from framekit.evaluators.rubric import as_documents, require_nonempty, shared_extra
from framekit.evaluators.templates import TemplateSpec, load_template, shared_until
from framekit.judges.request import ChatRequest

if TYPE_CHECKING:
    import numpy as np
    from typing_extensions import Unpack

    from framekit.evaluators.base import EvaluatorOptions
    from framekit.judges.local.likelihood import Likelihood, LikelihoodInput

#: The explanation of an empty retrieval's score.
NO_DOCUMENTS = "no documents were retrieved: nothing can support a claim"


class ClaimsEvaluator(Evaluator):
    """Shared by Groundedness and ContextRecall: the claims of one text, checked against
    the retrieved documents (one judge call lists and checks them)."""

    template_name: ClassVar[str] = ""
    #: The field whose claims are checked, and how explanations name it.
    claims_field: ClassVar[str] = "output"
    subject: ClassVar[str] = "response"
    optional_fields: ClassVar[tuple[str, ...]] = ("input",)
    has_details = True
    #: The template version used unless ``version=`` says otherwise: v2 sends the
    #: documents first, for the provider's prompt cache (v1 stays selectable).
    default_version: ClassVar[str] = "v2"

    def __init__(
        self,
        *,
        system_prompt: str | None = None,
        include_inputs: bool = True,
        version: str | None = None,
        **options: Unpack[EvaluatorOptions],
    ) -> None:
        super().__init__(**options)
        self.version = version = version or self.default_version
        self.spec: TemplateSpec = load_template(self.template_name, version)
        extra = self.spec.extra
        bands = extra.get("bands")
        if not isinstance(bands, Mapping) or not bands:
            raise InputError(f"{self.template_name} {version}: the template has no bands")
        #: Label -> the lowest share of supported claims that earns it, best first.
        self.bands: dict[str, float] = {str(k): float(v) for k, v in bands.items()}
        self.no_claims_label = str(extra["no_claims_label"])
        self.system_prompt: str = self.spec.system if system_prompt is None else system_prompt
        self.prompt_template: str = self.spec.user
        self.prompt_template_without_input: str = str(extra["user_without_input"]).strip()
        self.include_inputs = bool(include_inputs)
        self._schema = _claims.claims_schema(str(extra["claims_description"]))
        self.shared_until: tuple[str, ...] = shared_until(self.spec)

    # -- record -------------------------------------------------------------------------
    def prepare(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        record = {f: fields.get(f) for f in self.fields}
        text = record[self.claims_field]
        if text is None:
            raise RecordError(f"field {self.claims_field!r} is null")
        record[self.claims_field] = _prompt.as_text(text)
        require_nonempty(record, self.claims_field)
        record["context"] = as_documents(record["context"])
        request = record.get("input")
        record["input"] = _prompt.as_text(request) if request is not None else None
        if not self.include_inputs or not (record["input"] or "").strip():
            record["input"] = None
        return record

    def known_verdict(self, record: Mapping[str, Any]) -> Verdict | None:
        if record["context"]:
            return None
        lowest = min(self.bands, key=lambda label: self.bands[label])
        details = {"method": "no documents", "claims": [], "supported": 0, "total": None}
        return Verdict(0.0, lowest, NO_DOCUMENTS, details=details)

    # -- LLM judge ----------------------------------------------------------------------
    def answer_schema(self) -> dict[str, Any]:
        """The claim list schema (one object per evaluator, so the engine encodes it once)."""
        return self._schema

    def build_request(self, record: Mapping[str, Any]) -> ChatRequest:
        blocks = {
            "context": _prompt.documents_text(record["context"]),
            self.claims_field: record[self.claims_field],
        }
        template = self.prompt_template_without_input
        if record.get("input") is not None:
            blocks["input"] = record["input"]
            template = self.prompt_template
        messages = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        messages.append({"role": "user", "content": _prompt.render(template, blocks)})
        return ChatRequest(
            messages=messages,
            schema_name=self.name,
            schema=self.answer_schema(),
            label_field=None,
            extra=shared_extra(self.shared_until),
        )

    def cache_namespace(self) -> str:
        return f"{self.template_name}:{self.version}"

    def verdict(self, record: Fields, answer: Fields, vectors: Vectors = None) -> Verdict:
        # The claims come from the text, written to stand alone with words of the request.
        source = f"{record[self.claims_field]}\n{record.get('input') or ''}"
        claims = _claims.read_claims(answer, len(record["context"]), source, self.subject)
        return _claims.claims_verdict(claims, self.bands, self.no_claims_label, self.subject)

    # -- offline judge ------------------------------------------------------------------
    def local_texts(self, record: Mapping[str, Any]) -> list[str]:
        """The text's sentences, then every document's sentences (the similarity proxy)."""
        from framekit.evaluators import _offline_support

        return _offline_support.similarity_texts(self, record)

    def local_verdict(self, record: Mapping[str, Any], vectors: list[np.ndarray]) -> Verdict:
        from framekit.evaluators import _offline_support

        return _offline_support.similarity_verdict(self, record, vectors)

    def local_likelihood_inputs(self, record: Mapping[str, Any]) -> LikelihoodInput:
        """What the offline likelihood scorer reads for this record (``framekit[lm]``).

        The hook the engine's offline path calls when the extra is installed: score the
        inputs of every record with :class:`~framekit.judges.local.likelihood.LikelihoodScorer`
        (records sharing documents share a prefix), then :meth:`likelihood_verdict`.
        """
        from framekit.evaluators import _offline_support

        return _offline_support.claims_likelihood_input(self, record)

    def likelihood_verdict(self, record: Mapping[str, Any], result: Likelihood) -> Verdict:
        """The offline verdict from the likelihood of :meth:`local_likelihood_inputs`."""
        from framekit.evaluators import _offline_support

        return _offline_support.claims_likelihood_verdict(self, record, result)

    # -- description --------------------------------------------------------------------
    def scale_text(self) -> str:
        """``share of the response's claims supported (grounded 1, partially grounded >=
        0.5, ungrounded < 0.5; no claims 1)``."""
        labels, lows = list(self.bands), list(self.bands.values())
        parts = []
        for i, (label, low) in enumerate(zip(labels, lows)):
            if low == 1.0:
                parts.append(f"{label} 1")
            elif i == len(labels) - 1:
                parts.append(f"{label} < {lows[i - 1]:g}")
            else:
                parts.append(f"{label} >= {low:g}")
        return (
            f"share of the {self.subject}'s claims supported ({', '.join(parts)}; "
            f"{self.no_claims_label} 1)"
        )

    def describe(self) -> str:
        return super().describe() + f"\n  template: {self.template_name} {self.version}"


class Groundedness(ClaimsEvaluator):
    """Whether every factual claim of the response is supported by the retrieved documents.

    The judge lists the response's factual claims (greetings, opinions, questions and
    advice are not claims), and for each writes the evidence, decides whether the
    documents support it, and names the supporting document. Score = supported claims /
    claims; labels: ``grounded`` (every claim supported, 1.0), ``partially grounded``
    (at least half), ``ungrounded`` (less than half), and ``no claims`` (1.0: the response
    makes no factual claim, so nothing in it is unsupported). Passes at >= 0.5. The
    explanation lists the claims; with ``details=True`` the ``groundedness_details``
    column holds them as JSON (``Score.metadata["details"]`` from :meth:`score`).

    The rubric (``version="v1"``) follows Ragas faithfulness, TruLens groundedness,
    Phoenix's hallucination template and DeepEval faithfulness; its file says where it
    differs (one call, document numbers, a claim neither supported nor contradicted is
    unsupported). The default, ``version="v2"``, asks the same rubric with the documents
    sent first, shared with the row's other context evaluators for the provider's prompt
    cache.

    Fields: ``output`` (the response) and ``context`` (a string, or a list of documents,
    numbered inside one block); optional ``input`` (the request: it helps the judge read
    the response, and is never evidence). An empty retrieval (null, an empty list, only
    blank documents) scores ``ungrounded`` 0 at once, without a call. An empty response
    fails its row. A claim list the judge returns malformed is re-asked (twice), then the
    row fails. ``include_inputs=False`` leaves the request out.

    Parameters
    ----------
    **options
        The options every evaluator takes
        (:class:`~framekit.evaluators.base.EvaluatorOptions`): ``name=`` (the column prefix,
        default ``groundedness``), ``threshold=`` (the pass mark, default 0.5), ``judge=``
        (a judge for this evaluator alone; ``llm=`` and ``model=`` still work, deprecated),
        ``direction=``, ``scoring=`` and the decoding options (``temperature=``,
        ``max_tokens=``...: a per-evaluator override of the judge).
    system_prompt
        Replaces the built-in instructions; the answer schema is unchanged.
    include_inputs
        ``False``: the request is not shown to the judge.
    version
        Template version (default ``"v2"``; ``"v1"`` sends the rubric before the data).

    Notes
    -----
    Offline judge (``judge="local"``): a similarity proxy, not a reading. The response
    and the documents are split into sentences and embedded (all-MiniLM-L6-v2); each
    response sentence's best cosine to a document sentence says how close the documents
    come to it, and their mean is mapped onto [0, 1] and the labels by cut points fitted
    to SummEval's expert consistency ratings (``likelihood_calibration.json``). With
    ``framekit[lm]`` installed, the likelihood scorer (SmolLM2-135M-Instruct: the mean
    log-probability of the response given the documents) is measured to agree with those
    ratings better: :meth:`local_likelihood_inputs` and :meth:`likelihood_verdict` are
    its hooks. Either way the explanation names the method and its numbers.

    Examples
    --------
    >>> ev = Groundedness()
    >>> ev.name, ev.threshold, ev.required_fields, ev.optional_fields
    ('groundedness', 0.5, ('output', 'context'), ('input',))
    >>> s = ev.score(output="Paris is the capital.", context=[], judge="local")
    >>> s.score, s.label
    (0.0, 'ungrounded')
    """

    template_name = "groundedness"
    required_fields = ("output", "context")
    claims_field = "output"
    subject = "response"


class ContextRecall(ClaimsEvaluator):
    """Whether the retrieved documents hold every factual claim of the reference answer.

    The judge lists the reference answer's factual claims and, for each, whether the
    documents support it (and which document). Score = supported claims / claims, as in
    Ragas' context recall; labels ``recalled`` (1.0), ``partially recalled`` (at least
    half), ``not recalled`` (less than half), and ``no claims`` (1.0: the reference makes
    no factual claim). Passes at >= 0.5. Claims in the explanation, and as JSON in the
    ``context_recall_details`` column with ``details=True``.

    Fields: ``context`` (the retrieved documents) and ``reference`` (the reference, or
    gold, answer: a column named ``reference`` is read without a mapping); optional
    ``input`` (the request). An empty retrieval scores ``not recalled`` 0 without a call;
    an empty reference fails its row.

    Parameters are Groundedness's. Offline, the same two methods run on the reference
    answer instead of the response (fitted on the same SummEval ratings: whether a text's
    facts are in the documents is the same question).

    Examples
    --------
    >>> ev = ContextRecall()
    >>> ev.name, ev.required_fields
    ('context_recall', ('context', 'reference'))
    """

    template_name = "context_recall"
    required_fields = ("context", "reference")
    claims_field = "reference"
    subject = "reference answer"
