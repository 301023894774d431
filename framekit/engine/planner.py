"""From prepared records to results: plan the chat requests, ask the cache, send misses.

:func:`run` is the heart of every run. Its input is one :class:`~framekit.engine.prepare.Prepared`
per evaluator (the frame layer has already collapsed duplicate rows); identical requests
across evaluators are sent once, and answers come from the cache when they can. A share
whose records wait unbuilt is first read from the cache as columns
(:mod:`framekit.engine.cached_columns`); only the rows it leaves become records here.
Requests are keyed by :mod:`framekit.engine.keys`.

A :class:`ChatPlan` holds a run's distinct chat requests by cache key and, for each, the
records waiting for its answer. It hands each judge's misses to an executor
(:class:`~framekit.engine.executor.ChatExecutor`, or
:class:`~framekit.engine.batch.BatchExecutor` for a batch judge) and takes every outcome
back as an async iterator of ``(key, outcome)`` (``executor.outcomes``), which the plan
assembles through one method, :meth:`ChatPlan.receive`: the one place where a record's
result is written, whether its answer came from the cache, the endpoint or a batch. An
executor never writes into the plan; a cached outcome is made in one place,
:meth:`Outcome.from_entry <framekit.engine.executor.Outcome.from_entry>`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from framekit._errors import RecordError
from framekit._results import Outcome, ProgressFn, Record
from framekit.engine.batch import BatchExecutor
from framekit.engine.cache import Cache
from framekit.engine.cached_columns import (
    RENDER_SLICE,
    plain_reading,
    plain_scores,
    read_cached,
    reads,
)
from framekit.engine.cascade import run_cascades
from framekit.engine.embeddings import embedding_stage, ready_embedders
from framekit.engine.executor import ChatExecutor
from framekit.engine.keys import TemplateKeys, chat_key, chat_prefix, template_keys
from framekit.engine.likelihood import likelihood_stage, ready_likelihood
from framekit.engine.limiter import Limiter
from framekit.engine.prepare import (
    Prepared,
    bulk,
    prepare_waiting,
    ready,
)
from framekit.engine.stats import RunStats
from framekit.judges.judge import Judge
from framekit.judges.request import ChatRequest

#: The limiter a judge's calls are paced by (``None``: a limiter of its own limits).
LimiterFor = Callable[[Judge], "Limiter | None"]


#: A record waiting for an answer, with the evaluator's share it belongs to.
Waiting = tuple[Prepared, Record]


class ChatPlan(Mapping[str, list[Waiting]]):
    """The distinct chat requests of a run, by cache key in order of first use, and the
    records waiting for each answer.

    The plan keeps keys and records, not prompts: a request is rendered again from its
    first record when it is sent (about 10 µs) and dropped once answered. A run thus holds
    the prompts in flight instead of every prompt of the frame at once, which in a
    100,000-row run was the largest thing in memory. A record whose request cannot be
    built is settled with its error. The dry run reads the same plan, so its counts match
    a real run's.
    """

    def __init__(
        self,
        prepared: Sequence[Prepared],
        progress: ProgressFn | None = None,
        checked: Mapping[int, TemplateKeys] | None = None,
    ) -> None:
        self.progress: ProgressFn = progress or _silent
        # Per share (by id), the template keys its rows were already keyed by (read as
        # columns): checked once, on the first row, not again on the first record.
        self._checked = checked or {}
        self._waiting: dict[str, list[Waiting]] = {}
        # Per key, who answers it and the shape of its answer (the request without its
        # messages), as one pair shared by every key of an evaluator and judge.
        self._asked: dict[str, tuple[Judge, ChatRequest]] = {}
        pairs: dict[tuple[Any, ...], tuple[Judge, ChatRequest]] = {}
        # Per share (by id), the label scores of answers read in bulk ({}: none are),
        # and whether a label's probability leaves its score as it is (scoring="label").
        self._plain: dict[int, tuple[dict[str, float], bool]] = {}
        # Per share (by id) planned from its renderer: how its requests are built when
        # sent, from the text its keys were hashed from (see _plan_rendered).
        self._senders: dict[int, Callable[[Mapping[str, Any]], ChatRequest]] = {}
        for share in prepared:
            judge = share.judge.chat_endpoint
            if judge is None:
                continue  # the offline judge embeds: see the embedding stage
            by_label = share.evaluator.scoring != "expected"
            self._plain[id(share)] = (plain_scores(share) or {}, by_label)
            prefix = chat_prefix(share.evaluator, judge)
            pending = share.pending()
            if self._plan_rendered(share, judge, prefix, pending, pairs):
                continue
            for record in pending:
                ready(share.evaluator, record)  # keyed as it will be sent
                assert record.fields is not None
                try:
                    request = share.evaluator.build_request(record.fields)
                except RecordError as exc:
                    record.fail(str(exc))
                    continue
                key = chat_key(prefix, request)
                waiting = self._waiting.get(key)
                if waiting is None:
                    waiting = self._waiting[key] = []
                    # The shape holds the schema, so its id is not reused meanwhile.
                    ident = (id(judge), id(request.schema), request.schema_name,
                             request.label_field, request.choices)  # fmt: skip
                    pair = pairs.get(ident)
                    if pair is None:
                        pair = pairs[ident] = (judge, _shape(request))
                    self._asked[key] = pair
                waiting.append((share, record))

    def _plan_rendered(
        self,
        share: Prepared,
        judge: Judge,
        prefix: bytes,
        pending: list[Record],
        pairs: dict[tuple[Any, ...], tuple[Judge, ChatRequest]],
    ) -> bool:
        """Plan ``pending`` in one loop when the evaluator's prompt is a plain template
        (:meth:`RubricEvaluator.prompt_renderer
        <framekit.evaluators.rubric.RubricEvaluator.prompt_renderer>`): each record's user
        message is rendered and hashed straight into its key, without a request object.
        The keys are :func:`chat_key`'s (the same byte stream), and the share's requests
        are then sent as built from the same renderer (:func:`_sender`: half the cost of
        ``build_request``). ``False`` (nothing planned) for any other evaluator, or when
        the first record's request is not what the renderer assumes."""
        if not pending:
            return False
        first = pending[0]
        assert first.fields is not None
        # (None: not a plain template, or the first record's request is not built so; the
        # usual loop plans it, settling a record that cannot be built with its error)
        template = self._checked.get(id(share)) or template_keys(
            share.evaluator, prefix, first.fields
        )
        if template is None:
            return False
        keys, request, render = template.keys, template.request, template.render
        self._senders[id(share)] = _sender(request, render)
        ident = (id(judge), id(request.schema), request.schema_name,
                 request.label_field, request.choices)  # fmt: skip
        pair = pairs.get(ident)
        if pair is None:
            pair = pairs[ident] = (judge, _shape(request))
        waiting_of, asked = self._waiting, self._asked
        checked = trusted = False
        for record, user in _bulk_prompts(share):
            fields = record.fields
            if fields is None:
                continue  # settled while prepared
            key = record.missed_key  # keyed when the cache was asked, from the same text
            if key is None:
                if record.note is not None:
                    user = None  # cut to fit the window: not the frame's text any more
                if user is not None and not checked:  # polars's text is the renderer's
                    checked = True
                    # (the first record's text was rendered for the template's check)
                    own = template.prompt if record is first else render(fields)
                    trusted = user == own
                if user is None or not trusted:
                    try:
                        user = render(fields)
                    except RecordError as exc:
                        record.fail(str(exc))
                        continue
                key = keys(user)
            waiting = waiting_of.get(key)
            if waiting is None:
                waiting_of[key] = [(share, record)]
                asked[key] = pair
            else:
                waiting.append((share, record))
        return True

    def __getitem__(self, key: str) -> list[Waiting]:
        return self._waiting[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._waiting)

    def __len__(self) -> int:
        return len(self._waiting)

    def judge(self, key: str) -> Judge:
        """The judge that answers ``key``."""
        return self._asked[key][0]

    def shape(self, key: str) -> ChatRequest:
        """What reading the answer to ``key`` needs: its request without the messages."""
        return self._asked[key][1]

    def request(self, key: str) -> ChatRequest:
        """The request behind ``key``, rendered from the first record that asks it (by
        the evaluator's plain renderer where it has one: :func:`_sender`)."""
        share, record = self._waiting[key][0]
        ready(share.evaluator, record)
        fields = record.fields
        assert fields is not None, "a waiting record is never settled"
        sender = self._senders.get(id(share))
        return sender(fields) if sender is not None else share.evaluator.build_request(fields)

    def requests(self, keys: Sequence[str]) -> Iterable[tuple[str, ChatRequest]]:
        """``(key, request)`` for ``keys``, each rendered as it is taken; iterable again
        (the batch path reads it twice)."""
        return _Rendered(self, keys)

    def unasked(self) -> list[str]:
        """The keys, in plan order, that the cache has not been asked for yet: all but
        those planned from a record it had no answer for (:attr:`Record.missed_key
        <framekit.engine.prepare.Record.missed_key>`). Read before any record is settled:
        such a record of a share planned from its renderer waits under that key. (Worked
        out from the waiting records, 0.4 µs a key, rather than kept as a set of the missed
        keys: 10 MB in a cold run of 100,000 rows, where every key is one.)"""
        senders = self._senders
        return [
            key
            for key, waiting in self._waiting.items()
            if not any(
                record.missed_key is not None and id(share) in senders for share, record in waiting
            )
        ]

    def by_judge(self) -> list[tuple[Judge, list[str]]]:
        """The requests still unanswered, grouped by the judge that answers them: each
        judge sends under its own limits."""
        groups: dict[int, tuple[Judge, list[str]]] = {}
        for key in self._waiting:
            judge = self._asked[key][0]
            groups.setdefault(id(judge), (judge, []))[1].append(key)
        return list(groups.values())

    def receive_cached(self, hits: Mapping[str, Any]) -> int:
        """Take the cache's entries for their keys (:meth:`receive` of each entry's
        :meth:`Outcome.from_entry <framekit.engine.executor.Outcome.from_entry>`); returns
        how many were answers. An answer that plain rubrics read by its label alone
        (:func:`~framekit.engine.cached_columns.plain_reading`; its label's probability is the confidence, unless the
        share scores by expectation) is written into their records here, in one loop, as
        :meth:`Prepared.judge_answer` would write it; every other entry goes through
        :meth:`receive`. A foreign value is no answer: it is asked again, and
        overwritten.
        """
        plain = self._plain
        waiting_of, asked = self._waiting, self._asked
        answered = rows = 0
        for key, entry in hits.items():
            waiting = waiting_of.get(key)
            reading = plain_reading(entry) if waiting is not None else None
            if (
                waiting is None
                or reading is None
                or not all(
                    reads(*plain[id(share)], reading)
                    for share, _ in waiting  # usually one
                )
            ):
                cached = Outcome.from_entry(entry)
                if cached is not None:
                    answered += 1
                    self.receive(key, cached)
                continue
            label, explanation, confidence = reading
            tokens, cost = entry.get("tokens", 0), entry.get("cost_usd")
            for share, record in waiting:
                record.tokens, record.cost_usd = tokens, cost
                record.cached, record.latency_s = True, 0.0
                record.value = plain[id(share)][0][label]
                record.label, record.explanation = label, explanation
                record.confidence = confidence
                record.details = record.fields = record.answer = None
                record.reported = True
                rows += record.weight
            del waiting_of[key], asked[key]
            answered += 1
        if rows:
            self.progress(rows, "cached")  # counted at once: the records say reported
        return answered

    def receive(self, key: str, outcome: Outcome) -> None:
        """Take the outcome of ``key`` for every record waiting on it: the only place a
        record's result is written from an answer. The request leaves the plan (a long
        run's plan shrinks as results grow)."""
        self._asked.pop(key, None)
        for share, record in self._waiting.pop(key, ()):
            record.tokens, record.cost_usd = outcome.tokens, outcome.cost_usd
            record.cached, record.latency_s = outcome.cached, outcome.latency_s
            if outcome.answer is None:
                record.fail(outcome.error)
            elif share.embeds_answers:
                record.answer = outcome.answer  # its verdict follows its embeddings
                continue
            else:
                share.judge_answer(record, outcome.answer, probabilities=outcome.probabilities)
            # Counted now, so that the display moves during an hours-long run.
            record.report(self.progress)


@dataclass
class _Rendered:
    plan: ChatPlan
    keys: Sequence[str]

    def __iter__(self) -> Iterator[tuple[str, ChatRequest]]:
        return ((key, self.plan.request(key)) for key in self.keys)

    def shapes(self) -> Iterator[tuple[str, ChatRequest]]:
        """``(key, shape)`` without rendering a prompt (the batch path's first pass)."""
        return ((key, self.plan.shape(key)) for key in self.keys)


def _sender(
    template: ChatRequest, render: Callable[[Mapping[str, Any]], str]
) -> Callable[[Mapping[str, Any]], ChatRequest]:
    """A function building a share's requests as ``build_request`` builds them: the
    ``template`` request's other messages, schema and extras, and the user message
    ``render`` gives (checked by :meth:`ChatPlan._plan_rendered` on the first record,
    through the key both hash to)."""
    before, extra = template.messages[:-1], template.extra
    name, schema = template.schema_name, template.schema
    label_field, choices = template.label_field, template.choices

    def build(fields: Mapping[str, Any]) -> ChatRequest:
        messages = [dict(message) for message in before]
        messages.append({"role": "user", "content": render(fields)})
        return ChatRequest(messages, name, schema, label_field, choices, dict(extra))

    return build


def _bulk_prompts(share: Prepared) -> Iterator[tuple[Record, str | None]]:
    """Each record of ``share`` with its user message as polars rendered it from the
    distinct rows (:meth:`RubricEvaluator.prompt_column
    <framekit.evaluators.rubric.RubricEvaluator.prompt_column>`), or ``None`` where it is
    to be rendered from the record."""
    records, distinct = share.records, share.distinct
    column = getattr(share.evaluator, "prompt_column", None)
    keyed = bool(records) and all(r.missed_key is not None for r in records)
    if column is None or distinct is None or distinct.height != len(records) or keyed:
        yield from ((record, None) for record in records)
        return
    for begin in range(0, len(records), RENDER_SLICE):
        part = records[begin : begin + RENDER_SLICE]
        prompts = column(distinct.slice(begin, RENDER_SLICE))
        yield from zip(part, prompts if prompts is not None else [None] * len(part))


def _shape(request: ChatRequest) -> ChatRequest:
    return ChatRequest(
        [], request.schema_name, request.schema, request.label_field, request.choices
    )


def _silent(rows: int, kind: str) -> None:
    """A progress display that shows nothing."""


async def run(
    prepared: Sequence[Prepared],
    cache: Cache,
    stats: RunStats,
    progress: ProgressFn | None = None,
    *,
    show: bool = False,
    limiter_for: LimiterFor | None = None,
) -> None:
    """Settle every record of ``prepared``: from the cache, the judges, the embedders.

    ``progress`` is told of the rows as their records settle; ``show`` lets the batch and
    embedding stages print what they are waiting for; ``limiter_for`` gives a judge a
    limiter shared beyond this process (``framekit.ray``'s). Shares whose judge is a
    :class:`~framekit.judges.cascade.Cascade` are settled stage by stage by
    :func:`framekit.engine.cascade.run_cascades`, each stage a run of this planner.
    """
    single = [share for share in prepared if share.judge.cascade is None]
    cascaded = [share for share in prepared if share.judge.cascade is not None]
    if single or not cascaded:
        await _run_judges(single, cache, stats, progress, show=show, limiter_for=limiter_for)
    if cascaded:

        async def run_stage(stage: list[Prepared], stage_stats: RunStats) -> None:
            await _run_judges(stage, cache, stage_stats, None, show=show, limiter_for=limiter_for)

        await run_cascades(cascaded, stats, progress, run_stage)


async def _run_judges(
    prepared: Sequence[Prepared],
    cache: Cache,
    stats: RunStats,
    progress: ProgressFn | None,
    *,
    show: bool,
    limiter_for: LimiterFor | None,
) -> None:
    """:func:`run` for shares whose judge is one judge."""
    report = progress or _silent
    for share in prepared:
        for record in share.records:
            if record.fields is None:
                record.report(report)  # settled while prepared (an error, a known verdict)
    with bulk():
        read: set[str] = set()  # the keys answered as columns
        odd: dict[str, Any] = {}  # entries found there, read here the general way
        checked: dict[int, TemplateKeys] = {}
        for share in prepared:
            if share.unbuilt is not None:
                template = read_cached(share, cache, report, read, odd)
                if template is not None:
                    checked[id(share)] = template
        plan = ChatPlan(prepared, report, checked)
        # A key one share read as columns and another asks again (it reads the answer
        # otherwise) is one request, and one hit.
        again = sum(1 for key in plan if key in read) if read else 0
        stats.unique_requests += len(plan) + len(read) - again
        stats.cache_hits += len(read) - again
        keys = plan.unasked()  # (the others were asked already, their entries in odd)
        if odd:
            stats.cache_hits += plan.receive_cached(odd)
            odd.clear()
        for hits in cache.lookup(keys) if keys else ():  # each chunk's, let go as used
            stats.cache_hits += plan.receive_cached(hits)
        for share in prepared:
            prepare_waiting(share)  # the misses, looked up before they were prepared
    for share in prepared:
        share.distinct = None  # planned: the records carry on, the columns can go
    pending = plan.by_judge()
    embedding = [share for share in prepared if share.embeds]
    likelihood = [share for share in prepared if share.scores_likelihood]
    if pending and embedding:
        await ready_embedders(embedding)
    if pending and likelihood:
        await ready_likelihood(likelihood)
    limiter_of = limiter_for or (lambda judge: None)

    async def answer(judge: Judge, keys: list[str]) -> None:
        executor = (
            BatchExecutor(judge, cache, stats, show, limiter_of(judge))
            if judge.batch
            else ChatExecutor(judge, cache, stats, limiter_of(judge))
        )
        # The executor sends and reports; the plan alone writes what came back.
        async for key, outcome in executor.outcomes(plan.requests(keys)):
            plan.receive(key, outcome)

    await asyncio.gather(*(answer(judge, keys) for judge, keys in pending))
    if likelihood:
        await likelihood_stage(likelihood, cache, stats, show)
        # What the likelihood stage left (records kept for the embedding proxy) is
        # embedded with the rest.
        embedding += [share for share in likelihood if share.pending()]
    if embedding:
        await embedding_stage(embedding, cache, stats, show)
    for share in prepared:
        for record in share.records:
            if not record.reported:  # what no stage has counted yet (a request not built)
                record.report(report)
        stats.confidence[share.evaluator.name] = share.confidence_summary()
        failed = share.failures()
        stats.failures += failed
        if failed:
            stats.per_evaluator_failures[share.evaluator.name] = failed
