"""The offline judge: embedding-similarity proxies computed on the CPU, no API at all.

The whole offline judge lives in this package:

- ``LocalJudge`` (here): the judge object; it only embeds texts, off the event loop.
- ``embedder``: all-MiniLM-L6-v2 as int8 ONNX on onnxruntime, checksum-pinned.
- ``methods``: similarities, sentence splitting, and the cut points of ``calibration.json``
  (written by ``scripts/calibrate_local_judge.py``).

Which texts an evaluator compares and how a similarity becomes its label is the
evaluator's knowledge (``local_texts`` / ``local_verdict``, in
``framekit/evaluators/_local.py``): evaluators sit above judges, so that part stays there.
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np


class LocalJudge:
    """The offline judge (``judge="local"``): all-MiniLM-L6-v2 on onnxruntime.

    Scores are similarity proxies calibrated on WikiQA, not LLM judgements: use them as a
    free first pass, or when no API is reachable. Each explanation names the numbers used.

    Examples
    --------
    >>> judge = LocalJudge()
    >>> judge.model
    'local/all-MiniLM-L6-v2'
    """

    kind = "local"
    model = "local/all-MiniLM-L6-v2"
    # Texts per call into the embedder (which batches by length inside); one call per
    # batch also bounds how long a cancelled run waits for its worker thread.
    batch_size = 256
    secrets: list[str] = []

    def __init__(self, embedder: Any | None = None) -> None:
        self._embedder = embedder

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            from framekit.judges.local.embedder import LocalEmbedder

            self._embedder = LocalEmbedder.default()
        return self._embedder

    def with_threads(self, threads: int) -> LocalJudge:
        """This judge with its default model on ``threads`` onnxruntime threads (a judge
        given an embedder of its own keeps it)."""
        if self._embedder is not None:
            return self
        from framekit.judges.local.embedder import LocalEmbedder

        return LocalJudge(LocalEmbedder(threads=threads))

    @property
    def model_id(self) -> str:
        """Model name plus the pinned checksum: part of every embedding cache key."""
        # A constant from the pinned checksum: a fully cached run never loads the model.
        from framekit.judges.local.embedder import MODEL_ID

        return MODEL_ID

    async def prepare(self) -> None:
        """Load the model now (raises :class:`~framekit.LocalModelError` when it is
        missing): before a run pays for answers that will need it."""
        await asyncio.to_thread(lambda: self.embedder)

    async def embed(self, texts: list[str]) -> np.ndarray:
        # onnxruntime releases the GIL, so a worker thread keeps the event loop free.
        return await asyncio.to_thread(self.embedder.embed, texts)

    def classify(self, exc: BaseException) -> None:
        """A failure on the CPU is no call that may pass on a retry: never retried."""
        return None

    def cache_identity(self) -> dict[str, Any]:
        return {"model": self.model_id}

    def __repr__(self) -> str:
        return "LocalJudge()"
