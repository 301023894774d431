"""Embeddings from an API model through litellm ``aembedding`` (used by AnswerRelevancy).

The engine's embedding stage deduplicates texts, caches vectors on disk by
``(model_id, text)`` and retries transient failures; this backend only makes one call per
batch and returns unit vectors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from framekit import _secrets
from framekit._errors import InputError
from framekit.judges.credentials import Credentials
from framekit.judges.endpoint import Endpoint
from framekit.judges.faults import Fault
from framekit.judges.litellm import litellm_module
from framekit.judges.litellm.call import classify

if TYPE_CHECKING:
    from framekit.judges.judge import Judge


class RemoteEmbeddings:
    """An embedding model reached through litellm, at a judge's endpoint.

    Satisfies :class:`framekit.judges.transport.EmbeddingBackend`.

    Parameters
    ----------
    model
        A litellm embedding model string, e.g. ``"openai/text-embedding-3-small"``.
    judge
        Whose endpoint and credentials to use (``api_base``, key, timeout). When ``None``,
        ``api_base`` and ``api_key`` below (or litellm's provider variables).
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
        timeout: float = 60.0,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise InputError("embedding_model must be a litellm embedding model string")
        if batch_size < 1:
            raise InputError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model
        # Only the judge's endpoint is used here: its model is never called.
        self.endpoint = (
            judge.endpoint
            if judge is not None
            else Endpoint(model, api_base, Credentials(api_key or None))
        )
        self.timeout = judge.limits.timeout if judge is not None else float(timeout)
        self.batch_size = int(batch_size)
        # Part of every embedding cache key; the endpoint is not (it only routes).
        self.model_id = f"litellm/{model}"
        _secrets.register(self.endpoint.secrets())  # log records redact them from now on

    @property
    def secrets(self) -> list[str]:
        """Strings redacted from every error message (the endpoint's credentials)."""
        return list(self.endpoint.secrets())

    async def prepare(self) -> None:
        """Nothing to load: the model is behind the endpoint."""

    def classify(self, exc: BaseException) -> Fault:
        """What a failed embedding call means (retry or not): litellm's verdict."""
        return classify(exc, self.secrets)

    async def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length float32 rows, one per text, in order.

        Only the endpoint travels with the call: decoding arguments such as ``seed`` mean
        nothing to an embedding model and some providers reject them.
        """
        kwargs: dict[str, Any] = {"timeout": self.timeout, "max_retries": 0}
        if self.endpoint.api_base:
            kwargs["api_base"] = self.endpoint.api_base
        key, _ = self.endpoint.credentials.own()
        if key:
            kwargs["api_key"] = key
        response = await litellm_module().aembedding(model=self.model, input=texts, **kwargs)
        rows: list[Any] = [item["embedding"] for item in response.data]
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
