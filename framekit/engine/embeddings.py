"""The embedding stage of a run: texts embedded once, then the verdicts that need them.

The offline judge's records, and the LLM answers that embeddings must follow
(AnswerRelevancy's regenerated questions), are embedded here after the chat stage. Every
distinct text is embedded once per run, cached on disk by (model, text), in batches
off the event loop; a backend that calls out over the network classifies its own
failures, and those every call would meet stop the run as they do for chat calls.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from framekit import _progress
from framekit._errors import (
    JudgeError,
    RecordError,
    one_line,
)
from framekit._results import Record, Verdict
from framekit._score import passes
from framekit._secrets import redact, registered
from framekit.engine.cache import Cache
from framekit.engine.prepare import Prepared
from framekit.engine.stats import RunStats
from framekit.judges.faults import raise_for_run
from framekit.judges.local.confidence import moved_to_prior
from framekit.judges.transport import EmbeddingBackend


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
        bar = _progress.bar(len(misses), "embedding", "text", leave=False)
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
            fault = backend.classify(exc)
            if fault is None:
                raise
            # Faults every call would meet stop the run, as they do for chat calls.
            raise_for_run(fault)
            if not fault.retryable or attempt == max_retries:
                raise
            await asyncio.sleep(fault.retry_after or min(30.0, 0.5 * 2**attempt))
    raise AssertionError("unreachable")


# -- the stage of a run that embeds -----------------------------------------------------


async def ready_embedders(prepared: Sequence[Prepared]) -> None:
    """Load the embedding models that LLM answers will need before paying for a single
    answer: a missing offline model would otherwise show only after every call was made."""
    for share in prepared:
        endpoint = share.judge.chat_endpoint
        if endpoint is not None and share.embeds_answers:
            await share.evaluator.embedding_backend(endpoint).prepare()


@dataclass
class _Need:
    """The texts one record needs embedded before its verdict, and who embeds them."""

    share: Prepared
    record: Record
    texts: list[str]
    backend: str | None = None  # model id of the backend; None when nothing is embedded


@dataclass
class _Batch:
    """Every text one embedding backend embeds in a run, and what came back."""

    backend: EmbeddingBackend
    texts: list[str] = field(default_factory=list)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    error: str | None = None


async def embedding_stage(
    prepared: Sequence[Prepared], cache: Cache, stats: RunStats, show_progress: bool
) -> None:
    """Embed what the verdicts of ``prepared`` (shares whose verdicts follow embeddings:
    :attr:`Prepared.embeds <framekit.engine.prepare.Prepared.embeds>`) still need, then
    turn them into verdicts."""
    needs: list[_Need] = []
    batches: dict[str, _Batch] = {}
    for share in prepared:
        ev, judge = share.evaluator, share.judge
        for record in share.pending():
            assert record.fields is not None
            try:
                offline = judge.offline
                if offline is not None:
                    texts = ev.local_texts(record.fields)
                    backend: EmbeddingBackend | None = offline
                else:
                    assert record.answer is not None, "embeddings follow an answer"
                    texts = ev.embedding_texts(record.fields, record.answer)
                    backend = ev.embedding_backend(judge) if texts else None
            except RecordError as exc:
                record.fail(str(exc))
                continue
            need = _Need(share, record, texts)
            if backend is not None and texts:
                need.backend = backend.model_id
                batch = batches.setdefault(backend.model_id, _Batch(backend))
                batch.texts.extend(texts)
            needs.append(need)

    for batch in batches.values():
        try:
            batch.vectors = await embed_texts(
                batch.backend, batch.texts, cache, stats, show_progress
            )
        except JudgeError:
            raise  # the run stops (a missing offline model, a rejected key): no row can pass
        except Exception as exc:
            batch.error = redact(
                f"embedding failed: {type(exc).__name__}: {one_line(str(exc), 160)}",
                registered(),
            )

    for need in needs:
        record = need.record
        source = batches[need.backend] if need.backend is not None else None
        if source is not None and source.error is not None:
            record.fail(source.error)
            continue
        vecs = [source.vectors[t] for t in need.texts] if source is not None else []
        if need.share.judge.offline is None:
            assert record.answer is not None
            need.share.judge_answer(record, record.answer, vecs)
            continue
        assert record.fields is not None
        try:
            verdict = need.share.evaluator.local_verdict(record.fields, vecs)
        except RecordError as exc:
            record.fail(str(exc))
            continue
        record.free()
        stats.cost_usd = stats.cost_usd or 0.0  # the offline judge is free
        record.settle(at_relevant_share(need.share, verdict))


def at_relevant_share(share: Prepared, verdict: Verdict) -> Verdict:
    """``verdict`` with its confidence moved to the offline judge's ``relevant_share``
    (:func:`~framekit.judges.local.confidence.moved_to_prior`), when one is given. Every
    confidence of an embedding verdict is the relevance map fitted on WikiQA
    (``framekit.evaluators._local``), the one thing the share moves."""
    judge = share.judge.offline
    if judge is None or judge.relevant_share is None:
        return verdict
    if verdict.confidence is None:
        return verdict
    ev = share.evaluator
    passed = bool(passes(verdict.value, ev.threshold, ev.direction))  # as the map read it
    moved = moved_to_prior(verdict.confidence, passed, judge.relevant_share)
    return replace(verdict, confidence=moved)
