"""From unique records to results: build requests, consult the cache, send only misses.

``run_jobs`` is the heart of every run. A *job* is one evaluator with its judge and the
distinct records of the frame (the frame layer has already collapsed duplicate rows).
Identical requests across jobs are sent once; answers come from the cache when they can.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from framekit._errors import JudgeError, RecordError, one_line
from framekit._score import Score
from framekit._secrets import redact, registered
from framekit.engine.batch import BatchExecutor
from framekit.engine.cache import Cache, resolve_cache
from framekit.engine.embeddings import EmbeddingBackend, embed_texts
from framekit.engine.executor import ChatExecutor, Outcome
from framekit.engine.limiter import Limiter
from framekit.engine.stats import RunStats
from framekit.evaluators.base import Evaluator, Verdict
from framekit.judges.judge import Judge, JudgeLike, resolve_judge
from framekit.judges.local import LocalJudge
from framekit.judges.request import ChatRequest


@dataclass(slots=True)
class RecordResult:
    """One evaluator's result for one distinct record (shared by its duplicate rows)."""

    value: float | None = None
    label: str | None = None
    explanation: str | None = None
    error: str | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    cached: bool | None = None
    latency_s: float | None = None
    reported: bool = False  # already counted by the progress bar


@dataclass
class Job:
    """One evaluator, its judge, and the distinct records it scores."""

    evaluator: Evaluator
    judge: Judge | LocalJudge
    records: Sequence[Mapping[str, Any]]  # emptied once prepared (see prepare_records)
    weights: Sequence[int] = ()  # rows behind each record (default: one each)
    results: list[RecordResult] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.weights:
            self.weights = [1] * len(self.records)


ProgressFn = Callable[[int, str], None]  # (rows, "done" | "cached" | "failed")
#: The limiter a judge's calls are paced by (``None``: a limiter of its own limits).
LimiterFor = Callable[[Judge], "Limiter | None"]


def _chat_prefix(evaluator: Evaluator, judge: Judge) -> bytes:
    ident = {"judge": judge.cache_identity(), "template": evaluator.cache_namespace()}
    return json.dumps(ident, sort_keys=True).encode()


# One encoder for every key: json.dumps(..., default=...) builds a new encoder per call.
_KEY_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str, separators=(",", ":"))


def chat_key(prefix: bytes, request: ChatRequest) -> str:
    """sha256 over judge identity, template version, messages and answer schema.

    Plain ``{"role", "content"}`` messages are fed to the hash as separated raw text rather
    than JSON: escaping every prompt as JSON was the largest cost of a fully cached re-run.
    The separators are control bytes that the prompt layer strips from data, so two
    different message lists cannot hash the same way.
    """
    h = hashlib.sha256(prefix)
    for message in request.messages:
        content = message.get("content")
        if len(message) == 2 and isinstance(content, str) and "role" in message:
            h.update(b"\x1e" + str(message["role"]).encode() + b"\x1f")
            h.update(content.encode("utf-8", "surrogatepass"))
        else:
            h.update(b"\x1d" + _KEY_ENCODER.encode(message).encode("utf-8", "surrogatepass"))
    h.update(b"\x1c" + _schema_bytes(request.schema))
    return "chat:" + h.hexdigest()


# id(schema) -> (schema, its encoding). Holding the schema keeps its id from being
# reused by another object, so a hit is always the same object.
_SCHEMA_MEMO: dict[int, tuple[dict[str, Any], bytes]] = {}


def _schema_bytes(schema: dict[str, Any]) -> bytes:
    """The encoded answer schema; evaluators share one schema object per run."""
    hit = _SCHEMA_MEMO.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    if len(_SCHEMA_MEMO) > 256:
        _SCHEMA_MEMO.clear()
    encoded = _KEY_ENCODER.encode(schema).encode()
    _SCHEMA_MEMO[id(schema)] = (schema, encoded)
    return encoded


#: A place in a run: (job index, record index).
Slot = tuple[int, int]


@dataclass(slots=True)
class PlannedChat:
    """One distinct chat request: the judge that answers it, and every record of every job
    waiting for its answer (the first of them renders the request, see :class:`ChatPlan`)."""

    judge: Judge
    slots: list[Slot] = field(default_factory=list)


class ChatPlan(Mapping[str, PlannedChat]):
    """The distinct chat requests of a run, by cache key, in order of first use.

    The plan keeps keys and slots, not prompts: a request is rendered again from its first
    record when it is sent (about 10 µs) and dropped once answered. A run thus holds the
    prompts in flight instead of every prompt of the frame at once, which in a
    100,000-row run was the largest thing in memory.
    """

    def __init__(self, jobs: Sequence[Job], prepared: list[list[dict[str, Any] | None]]) -> None:
        self.jobs, self.prepared = jobs, prepared
        self.chats: dict[str, PlannedChat] = {}

    def __getitem__(self, key: str) -> PlannedChat:
        return self.chats[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.chats)

    def __len__(self) -> int:
        return len(self.chats)

    def request(self, key: str) -> ChatRequest:
        """The request behind ``key``, rendered from the first record that asks it."""
        j, i = self.chats[key].slots[0]
        record = self.prepared[j][i]
        assert record is not None, "a planned record is never dropped"
        return self.jobs[j].evaluator.build_request(record)

    def requests(self, keys: Sequence[str]) -> Iterable[tuple[str, ChatRequest]]:
        """``(key, request)`` for ``keys``, each rendered as it is taken; iterable again
        (the batch path reads it twice)."""
        return _Rendered(self, keys)


@dataclass
class _Rendered:
    plan: ChatPlan
    keys: Sequence[str]

    def __iter__(self) -> Iterator[tuple[str, ChatRequest]]:
        return ((key, self.plan.request(key)) for key in self.keys)


@dataclass
class EmbeddingNeed:
    """The texts one record needs embedded before its verdict, and who embeds them."""

    slot: Slot
    texts: list[str]
    backend: str | None = None  # model id of the backend; None when nothing is embedded


@dataclass
class EmbeddingBatch:
    """Every text one embedding backend embeds in a run, and what came back."""

    backend: EmbeddingBackend
    texts: list[str] = field(default_factory=list)
    vectors: dict[str, np.ndarray] = field(default_factory=dict)
    error: str | None = None


def prepare_records(
    jobs: Sequence[Job], report: ProgressFn | None = None
) -> list[list[dict[str, Any] | None]]:
    """Each job's records as its evaluator prepares them; ``None`` (and the record's
    error in ``job.results``) where a record cannot be evaluated.

    The prepared records replace ``job.records``, which is emptied: nothing reads a raw
    record again, and a large frame would otherwise be held twice.
    """
    report = report or (lambda n, kind: None)
    prepared: list[list[dict[str, Any] | None]] = []
    for job in jobs:
        job.results = [RecordResult() for _ in job.records]
        rows: list[dict[str, Any] | None] = []
        for i, raw in enumerate(job.records):
            try:
                ready = job.evaluator.prepare(raw)
            except RecordError as exc:
                rows.append(None)
                job.results[i].error = str(exc)
                _report(job, i, report)
                continue
            known = job.evaluator.known_verdict(ready)
            if known is None:
                rows.append(ready)
                continue
            # Scored without a judge (an empty retrieval): nothing to send or cache.
            rows.append(None)
            settled = job.results[i]
            _apply(settled, known)
            settled.tokens, settled.cost_usd, settled.cached = 0, 0.0, False
            settled.latency_s = 0.0
            _report(job, i, report)
        job.records = ()
        prepared.append(rows)
    return prepared


def plan_chats(jobs: Sequence[Job], prepared: list[list[dict[str, Any] | None]]) -> ChatPlan:
    """The distinct chat requests of LLM-judged jobs, by cache key, in order of first use.

    A record whose request cannot be built gets its error in ``job.results`` and ``None``
    in ``prepared``. The dry run reads the same plan, so its counts match a real run's.
    """
    plan = ChatPlan(jobs, prepared)
    chats = plan.chats
    for j, (job, rows) in enumerate(zip(jobs, prepared)):
        judge = job.judge
        if not isinstance(judge, Judge):
            continue
        prefix = _chat_prefix(job.evaluator, judge)
        for i, record in enumerate(rows):
            if record is None:
                continue
            try:
                request = job.evaluator.build_request(record)
            except RecordError as exc:
                job.results[i].error = str(exc)
                rows[i] = None
                continue
            key = chat_key(prefix, request)
            planned = chats.get(key)
            if planned is None:
                planned = chats[key] = PlannedChat(judge)
            planned.slots.append((j, i))
    return plan


async def run_jobs(
    jobs: Sequence[Job],
    cache: Cache,
    stats: RunStats,
    progress: ProgressFn | None = None,
    show_embedding_progress: bool = False,
    limiter_for: LimiterFor | None = None,
) -> None:
    """Fill ``job.results`` for every job."""
    report = progress or (lambda n, kind: None)
    prepared = prepare_records(jobs, report)
    answers = await _chat_stage(
        jobs, prepared, cache, stats, report, show_embedding_progress, limiter_for
    )
    await _embedding_stage(jobs, prepared, answers, cache, stats, show_embedding_progress)
    for job in jobs:
        for i in range(len(job.results)):
            _report(job, i, report)  # what no stage has counted yet (e.g. a request not built)
        failed = sum(w for r, w in zip(job.results, job.weights) if r.error)
        stats.failures += failed
        if failed:
            stats.per_evaluator_failures[job.evaluator.name] = failed


async def _chat_stage(
    jobs: Sequence[Job],
    prepared: list[list[dict[str, Any] | None]],
    cache: Cache,
    stats: RunStats,
    report: ProgressFn,
    show: bool = False,
    limiter_for: LimiterFor | None = None,
) -> dict[Slot, dict[str, Any]]:
    """Ask the LLM judges. A record whose verdict needs nothing more gets it as its answer
    arrives (the answer is not kept); the answers that embeddings must follow are
    returned, by slot."""
    plan = plan_chats(jobs, prepared)
    stats.unique_requests += len(plan)
    answers: dict[Slot, dict[str, Any]] = {}

    def settle(key: str, outcome: Outcome) -> None:
        # A settled request leaves the plan: a long run's plan shrinks as results grow.
        planned = plan.chats.pop(key, None)
        for j, i in planned.slots if planned is not None else ():
            job = jobs[j]
            result = job.results[i]
            result.tokens, result.cost_usd = outcome.tokens, outcome.cost_usd
            result.cached, result.latency_s = outcome.cached, outcome.latency_s
            if outcome.answer is None:
                result.error = outcome.error
            elif _embeds(job.evaluator):
                answers[(j, i)] = outcome.answer
                continue
            else:
                record = prepared[j][i]
                assert record is not None
                _judge_verdict(job, i, record, outcome.answer, [])
            # Counted now, so that the bar moves during an hours-long run.
            _report(job, i, report)

    hits = cache.get_many(plan)
    for key, entry in hits.items():
        stats.cache_hits += 1
        settle(key, Outcome.from_entry(entry))
    del hits
    # What is left are the misses, grouped by judge: each sends under its own limits.
    misses: dict[int, tuple[Judge, list[str]]] = {}
    for key, planned in plan.items():
        misses.setdefault(id(planned.judge), (planned.judge, []))[1].append(key)
    if misses:
        await _ready_embedders(jobs)
    limiter_of = limiter_for or (lambda judge: None)
    await asyncio.gather(
        *(
            (
                BatchExecutor(judge, cache, stats, show, limiter_of(judge))
                if judge.batch
                else ChatExecutor(judge, cache, stats, limiter_of(judge))
            ).run(plan.requests(keys), settle)
            for judge, keys in misses.values()
        )
    )
    return answers


async def _ready_embedders(jobs: Sequence[Job]) -> None:
    """Load the embedding models that LLM answers will need before paying for a single
    answer: a missing offline model would otherwise show only after every call was made."""
    for job in jobs:
        if isinstance(job.judge, Judge) and _embeds(job.evaluator):
            backend = job.evaluator.embedding_backend(job.judge)
            prepare = getattr(backend, "prepare", None)
            if prepare is not None:
                await prepare()


async def _embedding_stage(
    jobs: Sequence[Job],
    prepared: list[list[dict[str, Any] | None]],
    answers: dict[Slot, dict[str, Any]],
    cache: Cache,
    stats: RunStats,
    show_progress: bool,
) -> None:
    """Embed what verdicts still need (the offline judge's records, and LLM answers that
    embeddings follow), then turn them into verdicts."""
    needs: list[EmbeddingNeed] = []
    batches: dict[str, EmbeddingBatch] = {}
    for j, (job, rows) in enumerate(zip(jobs, prepared)):
        ev, local = job.evaluator, isinstance(job.judge, LocalJudge)
        if not local and not _embeds(ev):
            continue  # judged as its answers arrived
        for i, record in enumerate(rows):
            if record is None or job.results[i].error is not None:
                continue
            try:
                if isinstance(job.judge, LocalJudge):
                    texts = ev.local_texts(record)
                    backend: EmbeddingBackend | None = job.judge
                else:
                    texts = ev.embedding_texts(record, answers[(j, i)])
                    backend = ev.embedding_backend(job.judge) if texts else None
            except RecordError as exc:
                job.results[i].error = str(exc)
                continue
            need = EmbeddingNeed((j, i), texts)
            if backend is not None and texts:
                need.backend = backend.model_id
                batch = batches.setdefault(backend.model_id, EmbeddingBatch(backend))
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
        j, i = need.slot
        job = jobs[j]
        result = job.results[i]
        record = prepared[j][i]
        assert record is not None
        source = batches[need.backend] if need.backend is not None else None
        if source is not None and source.error is not None:
            result.error = source.error
            continue
        vecs = [source.vectors[t] for t in need.texts] if source is not None else []
        if not isinstance(job.judge, LocalJudge):
            _judge_verdict(job, i, record, answers.pop((j, i)), vecs)
            continue
        try:
            verdict = job.evaluator.local_verdict(record, vecs)
        except RecordError as exc:
            result.error = str(exc)
            continue
        result.tokens, result.cost_usd, result.cached = 0, 0.0, False
        stats.cost_usd = stats.cost_usd or 0.0  # the offline judge is free
        _apply(result, verdict)


def _judge_verdict(
    job: Job, i: int, record: dict[str, Any], answer: dict[str, Any], vecs: list[np.ndarray]
) -> None:
    """Turn an LLM judge's answer into record ``i``'s verdict, or its error."""
    result = job.results[i]
    try:
        verdict = job.evaluator.verdict(record, answer, vecs or None)
    except RecordError as exc:
        result.error = str(exc)
        return
    except (KeyError, ValueError, TypeError) as exc:
        result.error = (
            f"could not read the judge's answer: {type(exc).__name__}: {one_line(str(exc), 120)}"
        )
        return
    _apply(result, verdict)


def _report(job: Job, i: int, report: ProgressFn) -> None:
    """Count record ``i`` of ``job`` on the progress bar once, as what it came to."""
    result = job.results[i]
    if result.reported:
        return
    result.reported = True
    kind = "failed" if result.error else "cached" if result.cached else "done"
    report(job.weights[i], kind)


def _embeds(evaluator: Evaluator) -> bool:
    """Whether an evaluator embeds texts after the judge answered (AnswerRelevancy)."""
    return type(evaluator).embedding_texts is not Evaluator.embedding_texts


def _apply(result: RecordResult, verdict: Verdict) -> None:
    value = float(verdict.value)
    result.value = min(1.0, max(0.0, value))
    result.label, result.explanation = verdict.label, verdict.explanation


async def score_one(
    evaluator: Evaluator,
    fields: Mapping[str, Any],
    *,
    judge: JudgeLike | None = None,
    cache: Cache | str | bool | None = None,
) -> Score:
    """Score a single record (``Evaluator.ascore``): same engine, one record."""
    resolved = resolve_judge(judge if judge is not None else evaluator.judge)
    record = evaluator.prepare(fields)  # raises ValueError (RecordError) for a bad record
    stats = RunStats(rows=1, evaluations=1)
    job = Job(evaluator, resolved, [record])
    started = time.perf_counter()
    await run_jobs([job], resolve_cache(cache), stats)
    stats.elapsed_s = time.perf_counter() - started
    r = job.results[0]
    verdict = None if r.value is None else Verdict(r.value, r.label, r.explanation)
    return evaluator.make_score(
        verdict,
        error=r.error,
        metadata={
            "judge": resolved.model,
            "template_version": evaluator.version,
            "tokens": r.tokens,
            "cost_usd": r.cost_usd,
            "cached": r.cached,
        },
    )
