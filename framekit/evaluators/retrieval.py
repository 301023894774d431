"""Retrieval evaluators: is what the retriever returned relevant to the request?"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import polars as pl

from framekit._errors import RecordError
from framekit.evaluators.base import Verdict
from framekit.evaluators.rubric import RubricEvaluator, as_documents, require_nonempty

if TYPE_CHECKING:
    import numpy as np


#: The explanation of an empty retrieval's score, as Phoenix's Retrieval Relevance says it.
NO_DOCUMENTS = "no documents were retrieved"


class _ContextEvaluator(RubricEvaluator):
    """Shared by the retrieval evaluators: a request and the list of retrieved documents.

    A retrieval that returned nothing (a null context, an empty list, only blank
    documents) is not an error: it scores the lowest label at once, without a judge call,
    so that a strategy that often retrieves nothing is not flattered by rows dropping out
    of its mean.
    """

    required_fields = ("input", "context")
    #: Calibrated scale of the offline method ("binary" or "three" levels).
    local_levels = "binary"
    needs_input_reason = (
        "relevance is judged against the request, so the request must be in the prompt"
    )

    #: v2 sends the documents and the request first, shared with the other evaluators of
    #: the row, for the provider's prompt cache; v1 stays selectable (``version="v1"``).
    default_version = "v2"
    # The documents are read as the prompt reads them (as_documents): the same text.
    prepare_keeps_prompt = True

    def prepare(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        record = {f: fields.get(f) for f in self.fields}
        if record["input"] is None:
            raise RecordError("field 'input' is null")
        require_nonempty(record, "input")
        record["context"] = as_documents(record["context"])
        return record

    def known_verdict(self, record: Mapping[str, Any]) -> Verdict | None:
        if record["context"]:
            return None
        lowest = min(self.choices, key=lambda label: self.choices[label])
        return Verdict(self.choices[lowest], lowest, NO_DOCUMENTS)

    def given_rows(self, schema: pl.Schema) -> pl.Expr | None:
        # What prepare and known_verdict pass, read off the columns: a request with a
        # letter or digit in it (so neither null nor blank) and a list of documents one
        # of which has one (so the retrieval is not empty). Anything else (whitespace
        # of other scripts, a context given as one string) is prepared first.
        kind = type(self)
        if (
            kind.prepare is not _ContextEvaluator.prepare
            or kind.known_verdict is not _ContextEvaluator.known_verdict
            or schema.get("input") != pl.String
            or schema.get("context") != pl.List(pl.String)
        ):
            return None
        text = "[0-9A-Za-z]"
        documents = pl.col("context").list.eval(pl.element().str.contains(text).fill_null(False))
        given = pl.col("input").str.contains(text).fill_null(False) & documents.list.any()
        return given.fill_null(False)

    def local_texts(self, record: Mapping[str, Any]) -> list[str]:
        return [str(record["input"]), *record["context"]]

    def local_verdict(self, record: Mapping[str, Any], vectors: list[np.ndarray]) -> Verdict:
        from framekit.evaluators import _local

        return _local.context_verdict(self, vectors[0], vectors[1:], levels=self.local_levels)


class RetrievalRelevance(_ContextEvaluator):
    """Whether the retrieved context is relevant to the request: relevant 1.0, irrelevant 0.0.

    The rubric (``version="v1"``) follows Arize Phoenix's Retrieval Relevance: context is
    relevant when it helps answer the request, even when mixed with unrelated material; it
    is irrelevant when it concerns a different entity or time period, is only tangentially
    related, or is empty or an error. The default, ``version="v2"``, asks the same rubric
    with the documents and the request sent first, shared with the row's other context
    evaluators for the provider's prompt cache. ``version="v0"`` is framekit's first
    rubric, kept to reproduce earlier runs.

    Fields: ``input`` (the request) and ``context`` (a string, or a list of documents that
    are numbered inside one delimited block). Passes at >= 0.5. An empty retrieval (a
    null context, an empty list or only blank documents) is "irrelevant" 0 with the
    explanation "no documents were retrieved", as the source specifies; no judge is
    called, and the offline judge does the same. An empty request fails its row.
    ``include_inputs=False`` is refused (:class:`~framekit.InputError`): relevance is
    judged against the request. ``llm=`` and ``model=`` still work for ``judge=``,
    deprecated.

    Offline judge (``judge="local"``): a similarity proxy, not a reading. The request and
    each document are embedded (all-MiniLM-L6-v2); the best document's cosine similarity
    (a list is as relevant as its most relevant document) is compared with the binary cut
    point calibrated on WikiQA (``framekit/judges/local/calibration.json``), and the explanation
    quotes the cosine, the document it came from and the cut point.

    Examples
    --------
    >>> ev = RetrievalRelevance()
    >>> ev.name, ev.threshold, ev.choices
    ('retrieval_relevance', 0.5, {'relevant': 1.0, 'irrelevant': 0.0})
    >>> ev.score(input="Capital of France?", context=[], judge="local").explanation
    'no documents were retrieved'
    """

    template_name = "retrieval_relevance"
    local_levels = "binary"


class ContextRelevance(_ContextEvaluator):
    """How relevant a list of retrieved documents is to the request, taken together.

    Labels and scores: high 1.0, medium 0.5, low 0.0, with the judge's reasoning; passes
    at >= 0.5. The rubric (``version="v1"``) follows Fiddler's ContextRelevance: high when
    the documents directly answer the query, medium when they are on topic but not a
    complete answer, low when they are off topic; irrelevant documents beside one that
    answers do not lower the label. The default, ``version="v2"``, asks the same rubric
    laid out for the provider's prompt cache (the row's documents and request first).
    ``version="v0"`` is framekit's first rubric.

    Fields: ``input`` (the request; Fiddler's ``user_query`` is accepted as its name in
    ``mapping=`` and :meth:`score`) and ``context`` (a list of documents, numbered
    Document 1, Document 2, ... inside one delimited block; a string is one document;
    alias ``retrieved_documents``). An empty request fails that row (a ``ValueError``
    from :meth:`score`). An empty retrieval is "low" 0 with the explanation "no documents
    were retrieved", without a judge call: framekit's choice, the same rule as
    RetrievalRelevance's source, since a retrieval that found nothing holds nothing on
    topic and a failed row would drop out of the mean. ``include_inputs=False`` is
    refused. ``model=`` (Fiddler's) and ``llm=`` still work for ``judge=``, deprecated;
    the explanation is also ``Score.reasoning``.

    Offline judge (``judge="local"``): a similarity proxy, not a reading. The request and
    each document are embedded (all-MiniLM-L6-v2). The documents combine by their best
    match: a list is as relevant as its most relevant document, as in the rubric, where
    irrelevant documents beside a relevant one barely lower the label. That best cosine
    is mapped onto high / medium / low by cut points calibrated on WikiQA; the explanation
    quotes the cosine, which document it came from, and the cut points.

    Examples
    --------
    >>> ev = ContextRelevance()
    >>> ev.name, ev.choices
    ('context_relevance', {'high': 1.0, 'medium': 0.5, 'low': 0.0})
    >>> s = ev.score(user_query="Capital of France?", retrieved_documents=[], judge="local")
    >>> s.label, s.score, s.reasoning
    ('low', 0.0, 'no documents were retrieved')
    """

    template_name = "context_relevance"
    local_levels = "three"
