"""Retrieval evaluators: is what the retriever returned relevant to the request?"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from framekit._errors import RecordError
from framekit.evaluators.base import Verdict
from framekit.evaluators.rubric import RubricEvaluator, as_documents, require_nonempty

if TYPE_CHECKING:
    import numpy as np


class RetrievalRelevance(RubricEvaluator):
    """Whether the retrieved context is relevant to the request: relevant 1.0, irrelevant 0.0.

    Fields: ``input`` (the request) and ``context`` (a string, or a list of documents that
    are numbered inside one delimited block). Passes at >= 0.5.

    Offline judge (``judge="local"``): a similarity proxy, not a reading. The request and
    each document are embedded (all-MiniLM-L6-v2); the best document's cosine similarity
    is compared with a cut point calibrated on WikiQA (see ``framekit/judges/calibration.json``)
    and the explanation quotes both numbers.

    Examples
    --------
    >>> ev = RetrievalRelevance()
    >>> ev.name, ev.threshold, ev.choices
    ('retrieval_relevance', 0.5, {'relevant': 1.0, 'irrelevant': 0.0})
    """

    template_name = "retrieval_relevance"
    required_fields = ("input", "context")

    def prepare(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        record = super().prepare(fields)
        require_nonempty(record, "input")
        docs = as_documents(record["context"])
        if not docs:
            raise RecordError("field 'context' is empty")
        record["context"] = docs
        return record

    def local_texts(self, record: Mapping[str, Any]) -> list[str]:
        return [str(record["input"]), *record["context"]]

    def local_verdict(self, record: Mapping[str, Any], vectors: list[np.ndarray]) -> Verdict:
        from framekit.judges import local_methods as lm

        similarity = lm.relevance_similarity(vectors[0], vectors[1:])
        cut = lm.CALIBRATION.binary_cut
        label = "relevant" if similarity >= cut else "irrelevant"
        return Verdict(
            self.choices[label],
            label,
            f"local similarity proxy: best of {len(vectors) - 1} document(s) has cosine "
            f"{similarity:.3f} to the request; cut point {cut:.3f} (calibrated on WikiQA)",
        )
