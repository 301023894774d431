"""Embeddings from an API model through litellm ``aembedding`` (used by AnswerRelevancy).

The engine's embedding stage deduplicates texts, caches vectors on disk by
``(model_id, text)`` and retries transient failures; this backend only makes one call per
batch and returns unit vectors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framekit._errors import InputError
from framekit.judges.faults import Fault
from framekit.judges.litellm_faults import classify
from framekit.judges.litellm_judge import Judge


class RemoteEmbeddings:
    """An embedding model reached through litellm, on a judge's endpoint.

    Satisfies :class:`framekit.engine.embeddings.EmbeddingBackend`.

    Parameters
    ----------
    model
        A litellm embedding model string, e.g. ``"openai/text-embedding-3-small"``.
    judge
        Whose endpoint and credentials to use (``api_base``, ``api_key``, timeout). When
        ``None``, ``api_base`` and ``api_key`` below (or litellm's provider variables).
    api_base, api_key
        Endpoint and key when no judge is given.
    batch_size
        Texts per request.

    Examples
    --------
    >>> backend = RemoteEmbeddings("openai/text-embedding-3-small", api_key="sk-secret")
    >>> backend.model_id, backend.secrets
    ('litellm/openai/text-embedding-3-small', ['sk-secret'])
    """

    def __init__(
        self,
        model: str,
        judge: Judge | None = None,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        batch_size: int = 256,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InputError("embedding_model must be a litellm embedding model string")
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        # A Judge is only an endpoint holder here: its model is never called.
        self.endpoint = (
            judge if judge is not None else Judge(model, api_base=api_base, api_key=api_key)
        )
        self.batch_size = int(batch_size)
        # Part of every embedding cache key; the endpoint is not (it only routes).
        self.model_id = f"litellm/{model}"

    @property
    def secrets(self) -> list[str]:
        """Strings redacted from every error message (the endpoint's credentials)."""
        return self.endpoint.secrets

    def classify(self, exc: BaseException) -> Fault:
        """What a failed embedding call means (retry or not): litellm's verdict."""
        return classify(exc, self.secrets)

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 rows, one per text, in order."""
        rows: list[Any] = await self.endpoint.embed(texts, self.model)
        if len(rows) != len(texts):
            raise ValueError(
                f"embedding endpoint returned {len(rows)} vectors for {len(texts)} texts"
            )
        matrix = np.asarray(rows, dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        # A zero vector (no content) stays zero rather than turning into NaN.
        return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)

    def __repr__(self) -> str:
        return f"RemoteEmbeddings({self.model!r})"
