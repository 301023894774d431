"""Retrieval evaluators: is what the retriever returned relevant to the request?"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from framekit._errors import RecordError
from framekit.evaluators.base import Verdict
from framekit.evaluators.rubric import RubricEvaluator, as_documents, require_nonempty

if TYPE_CHECKING:
    import numpy as np


class _ContextEvaluator(RubricEvaluator):
    """Shared by the retrieval evaluators: a request and a non-empty list of documents."""

    required_fields = ("input", "context")
    #: Calibrated scale of the offline method ("binary" or "three" levels).
    local_levels = "binary"

    def prepare(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        record = super().prepare(fields)
        require_nonempty(record, "input")
        docs = as_documents(record["context"])
        if not docs:
            raise RecordError("field 'context' is empty (no documents)")
        record["context"] = docs
        return record

    def local_texts(self, record: Mapping[str, Any]) -> list[str]:
        return [str(record["input"]), *record["context"]]

    def local_verdict(self, record: Mapping[str, Any], vectors: list[np.ndarray]) -> Verdict:
        from framekit.evaluators import _local

        return _local.context_verdict(self, vectors[0], vectors[1:], levels=self.local_levels)


class RetrievalRelevance(_ContextEvaluator):
    """Whether the retrieved context is relevant to the request: relevant 1.0, irrelevant 0.0.

    Fields: ``input`` (the request) and ``context`` (a string, or a list of documents that
    are numbered inside one delimited block). Passes at >= 0.5.

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
    """

    template_name = "retrieval_relevance"
    local_levels = "binary"


class ContextRelevance(_ContextEvaluator):
    """How relevant a list of retrieved documents is to the request, taken together.

    Labels and scores: high 1.0, medium 0.5, low 0.0, with the judge's reasoning; passes
    at >= 0.5. Fields: ``input`` (the request) and ``context`` (a list of documents,
    numbered Document 1, Document 2, ... inside one delimited block; a string is one
    document). An empty request or an empty list fails that row (a ``ValueError`` from
    :meth:`score`) without any judge call.

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
    """

    template_name = "context_relevance"
    local_levels = "three"
