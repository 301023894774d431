"""Embedding texts once: deduplicated, cached on disk by (model, text), batched off-loop."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable
from typing import Protocol

import numpy as np

from framekit._errors import JudgeAuthenticationError, JudgeConfigurationError
from framekit.engine.cache import Cache
from framekit.engine.stats import RunStats


class EmbeddingBackend(Protocol):
    """Something that embeds a batch of texts into unit vectors."""

    @property
    def model_id(self) -> str: ...

    @property
    def batch_size(self) -> int: ...

    async def embed(self, texts: list[str]) -> np.ndarray: ...


def embedding_key(model_id: str, text: str) -> str:
    data = f"{model_id}\x00{text}".encode("utf-8", "surrogatepass")
    return "emb:" + hashlib.sha256(data).hexdigest()


async def embed_texts(
    backend: EmbeddingBackend,
    texts: Iterable[str],
    cache: Cache,
    stats: RunStats,
    progress: bool = False,
) -> dict[str, np.ndarray]:
    """Vectors for every distinct text, from the cache where possible."""
    unique = list(dict.fromkeys(texts))
    keys = {t: embedding_key(backend.model_id, t) for t in unique}
    hits = cache.get_many(keys.values())
    vectors: dict[str, np.ndarray] = {}
    misses: list[str] = []
    for text in unique:
        blob = hits.get(keys[text])
        if blob is None:
            misses.append(text)
        else:
            vectors[text] = np.frombuffer(blob, dtype=np.float32)
    if not misses:
        return vectors
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(misses), desc="embedding", unit="text", leave=False)
    # Long texts last: batches of similar length pad less.
    misses.sort(key=len)
    try:
        for start in range(0, len(misses), backend.batch_size):
            batch = misses[start : start + backend.batch_size]
            matrix = await _embed_with_retries(backend, batch)
            rows = [np.ascontiguousarray(row, dtype=np.float32) for row in matrix]
            cache.set_many((keys[t], row.tobytes()) for t, row in zip(batch, rows))
            vectors.update(zip(batch, rows))
            stats.embeddings_computed += len(batch)
            if bar is not None:
                bar.update(len(batch))
    finally:
        if bar is not None:
            bar.close()  # also when the run stops: its message must not share a line
    return vectors


async def _embed_with_retries(
    backend: EmbeddingBackend, batch: list[str], max_retries: int = 6
) -> np.ndarray:
    for attempt in range(max_retries + 1):
        try:
            return await backend.embed(batch)
        except Exception as exc:
            # A backend that calls out over the network classifies its own failures.
            classify = getattr(backend, "classify", None)
            if classify is None:
                raise
            fault = classify(exc)
            # Faults every call would meet stop the run, as they do for chat calls.
            if fault.kind == "auth":
                raise JudgeAuthenticationError(fault.reason) from None
            if fault.kind == "config":
                raise JudgeConfigurationError(fault.reason) from None
            if fault.kind not in ("transient", "rate_limited") or attempt == max_retries:
                raise
            await asyncio.sleep(fault.retry_after or min(30.0, 0.5 * 2**attempt))
    raise AssertionError("unreachable")
