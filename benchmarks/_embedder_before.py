"""The offline embedder's batching as it was before length budgets and worker threads.

Kept so that ``bench_local_judge.py`` can time the old and the new code in the same run
and ``tests/test_embedder_batching.py`` can check that both give the same scores. The
``embed`` and ``_run`` bodies are those of ``framekit/judges/local/embedder.py`` at
commit b645bfd: one onnxruntime session whose intra-op threads span every core, texts
sorted by token length and cut into batches of 32, one batch at a time. Not used by
framekit itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from framekit.judges.local.embedder import MODEL_ID, _cores, _model_files

_MAX_TOKENS = 256
_DIM = 384
_BATCH_SIZE = 32


class BeforeEmbedder:
    """all-MiniLM-L6-v2 as framekit embedded it at b645bfd (same files, same numbers)."""

    model_id = MODEL_ID

    def __init__(self, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        model, tokenizer_file = _model_files()
        assert model is not None and tokenizer_file is not None, "offline model not installed"
        self.batch_size = _BATCH_SIZE
        self._tokenizer = Tokenizer.from_file(str(tokenizer_file))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(_MAX_TOKENS)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.threads = threads or _cores()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = ort.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), _DIM), dtype=np.float32)
        if len(texts) == 0:
            return out
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = [enc.ids for enc in encodings]
        lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
        order = np.argsort(lengths, kind="stable")
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            out[rows] = self._run([ids[r] for r in rows], lengths[rows])
        return out

    def _run(self, ids: list[list[int]], lengths: np.ndarray) -> np.ndarray:
        width = int(lengths.max())
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        for row, seq in enumerate(ids):
            input_ids[row, : len(seq)] = seq
        mask = (np.arange(width)[None, :] < lengths[:, None]).astype(np.int64)
        feed: dict[str, Any] = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        hidden = np.asarray(self._session.run(None, feed)[0])
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit
