"""A run's plan: one table of (record, evaluator, key), the cache asked once, one reader.

:func:`run` is the heart of every run. Its input is one :class:`~framekit.engine.prepare.Prepared`
per evaluator (the frame layer has already collapsed duplicate rows). The plan
(:class:`ChatPlan`) keys each record's request (:mod:`framekit.engine.keys`: the bytes of
the rendered messages), so identical requests across evaluators are one key; the cache is
asked once, in bulk, for every key; the misses go to an executor
(:class:`~framekit.engine.executor.ChatExecutor`, or
:class:`~framekit.engine.batch.BatchExecutor` for a batch judge), which renders each
request just before it is sent and hands back ``(key, outcome)`` pairs.

Every answer, from the cache or from the judge, any transport, any batch line, is read
by one :class:`Reader`: a plain rubric's answer by its label (the label's score, its
explanation, the label's probability), any other through the evaluator's own reading
(:meth:`Prepared.judge_answer <framekit.engine.prepare.Prepared.judge_answer>`).

A share whose every row is vouched for and asked by a plain template (:attr:`Prepared.unbuilt
<framekit.engine.prepare.Prepared.unbuilt>`) is looked up before any record is built
(:func:`read_cached`): polars renders the distinct rows' prompts slice by slice, each is
keyed from its user message (:class:`~framekit.engine.keys.RenderedKeys`), all keys are
asked at once (the cache reads its whole table when they are many of its rows), and the
reader writes every answer it reads by label into the share's
:class:`~framekit._results.Answered` columns. Only the other rows become records, each
with the key the cache was asked for, and the plan does not ask for those keys again.
Building a record per cached row, then settling it, was a third of a fully cached
re-run's time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from framekit._errors import RecordError
from framekit._results import Answered, Outcome, ProgressFn, Record
from framekit.engine.batch import BatchExecutor
from framekit.engine.cache import Cache
from framekit.engine.cascade import run_cascades
from framekit.engine.embeddings import embedding_stage, ready_embedders
from framekit.engine.executor import ChatExecutor, Executor, Requests
from framekit.engine.keys import RenderedKeys, chat_key, chat_prefix
from framekit.engine.likelihood import likelihood_stage, ready_likelihood
from framekit.engine.limiter import Limiter
from framekit.engine.prepare import Prepared, bulk, ready
from framekit.engine.stats import RunStats
from framekit.evaluators.base import Evaluator
from framekit.judges.judge import Judge
from framekit.judges.request import ChatRequest, answer_text
from framekit.judges.shared_prefix import SHARED_UNTIL

#: The limiter a judge's calls are paced by (``None``: a limiter of its own limits).
LimiterFor = Callable[[Judge], "Limiter | None"]

#: A plain template's renderer: a prepared record's user message.
Render = Callable[[Mapping[str, Any]], str]

#: A record waiting for an answer, with the evaluator's share it belongs to.
Waiting = tuple[Prepared, Record]

#: Distinct records whose prompts polars renders at once: the texts of at most two slices
#: are held together (one being keyed, the next being rendered), so a million records
#: never hold all their prompts at the same time; their keys are kept.
RENDER_SLICE = 20_000

#: Requests rendered to be keyed that the plan keeps for sending, at most: the first this
#: many keys of a plan are sent as they were rendered (a run of up to this many distinct
#: prompts renders each once); the later ones are rendered again from their record when
#: they go out, so that a cold run of 100,000 rows does not hold every prompt at once
#: (480 MB against 277: docs/bulk.md). About 3 MB of prompts.
KEEP_RENDERED = 1024

#: A request kept from the plan: built whole, or a plain template's user message.
Kept = ChatRequest | str

#: A plain rubric's reading of an answer: ``(value, label, explanation, confidence)``.
Plain = tuple[float, str, "str | None", "float | None"]


class Reader:
    """How one share reads an answer, cached or fresh: the one place where an answer
    becomes a record's result (:meth:`take`) or a row of the columns read from the cache
    (:func:`read_cached`).

    A plain rubric (:meth:`RubricEvaluator.plain_verdicts
    <framekit.evaluators.rubric.RubricEvaluator.plain_verdicts>`) is read by its label
    alone (:meth:`plain`), in one loop, without a verdict object; every other answer, and
    a label's probability that changes the score (``scoring="expected"``), goes through
    the evaluator's own reading.
    """

    __slots__ = ("share", "scores", "by_label")

    def __init__(self, share: Prepared) -> None:
        self.share = share
        plain = getattr(share.evaluator, "plain_verdicts", None)
        choices = plain() if plain is not None and not share.embeds_answers else None
        #: Label -> score (clipped to [0, 1], as a settled record's value), or ``None``:
        #: the evaluator reads every answer itself.
        self.scores: dict[str, float] | None = (
            None if choices is None
            else {label: min(1.0, max(0.0, float(s))) for label, s in choices.items()}
        )  # fmt: skip
        #: Whether a label's probability leaves its score as it is (``scoring="label"``).
        self.by_label = share.evaluator.scoring != "expected"

    def plain(self, answer: Any, probabilities: Any) -> Plain | None:
        """``(value, label, explanation, confidence)`` of an answer as this share's plain
        rubric and :func:`~framekit.engine.prepare.weigh` read it (the confidence is the
        label's probability); ``None`` where the evaluator's own reading is needed (no
        plain rubric, no string label, a label it does not score, probabilities of
        another shape, or a probability that changes the score).

        Examples
        --------
        >>> from framekit.evaluators import RetrievalRelevance
        >>> reader = Reader(Prepared(RetrievalRelevance(), Judge("openai/gpt-4o-mini"), []))
        >>> reader.plain({"label": "relevant", "explanation": "It says so."},
        ...              {"relevant": 0.9, "irrelevant": 0.1})
        (1.0, 'relevant', 'It says so.', 0.9)
        >>> reader.plain({"label": 1}, None) is None
        True
        """
        scores = self.scores
        if scores is None or type(answer) is not dict:
            return None
        label = answer.get("label")
        if type(label) is not str or label not in scores:
            return None
        confidence = None
        if probabilities:
            if type(probabilities) is not dict:
                return None
            if label in probabilities:
                confidence = probabilities[label]
                if type(confidence) is not float or not self.by_label:
                    return None
        explanation = answer.get("explanation")
        if explanation is not None and type(explanation) is not str:
            explanation = answer_text(explanation)
        return scores[label], label, explanation, confidence

    def take(self, record: Record, outcome: Outcome) -> None:
        """Settle ``record`` with ``outcome``: what it cost, then its verdict (or error);
        an answer that embeddings must follow is kept for them."""
        record.tokens, record.cost_usd = outcome.tokens, outcome.cost_usd
        record.cached, record.latency_s = outcome.cached, outcome.latency_s
        answer = outcome.answer
        if answer is None:
            record.fail(outcome.error)
            return
        share = self.share
        if share.embeds_answers:
            record.answer = answer  # its verdict follows its embeddings
            return
        plain = self.plain(answer, outcome.probabilities)
        if plain is None:
            share.judge_answer(record, answer, probabilities=outcome.probabilities)
            return
        record.value, record.label, record.explanation, record.confidence = plain
        record.details = record.fields = record.answer = None


class TemplateKeys(NamedTuple):
    """What keying an evaluator's requests from their user message needs (:func:`template_keys`)."""

    keys: RenderedKeys
    #: The request built for the record checked, and its user message as rendered.
    request: ChatRequest
    render: Render
    prompt: str


def template_keys(
    evaluator: Evaluator, prefix: bytes, fields: Mapping[str, Any]
) -> TemplateKeys | None:
    """:class:`~framekit.engine.keys.RenderedKeys` for ``evaluator``'s requests when its
    prompt is a plain template (:meth:`RubricEvaluator.prompt_renderer
    <framekit.evaluators.rubric.RubricEvaluator.prompt_renderer>`), checked on one record's
    ``fields``: the request built for it must hash as its other messages then the rendered
    one. ``None`` for any other evaluator, or when that record's request cannot be built."""
    renderer = getattr(evaluator, "prompt_renderer", None)
    render = renderer() if renderer is not None else None
    if render is None:
        return None
    try:
        request = evaluator.build_request(fields)
        prompt = render(fields)
    except RecordError:
        return None
    keys = RenderedKeys(prefix, request)
    if keys(prompt) != chat_key(prefix, request):
        return None
    return TemplateKeys(keys, request, render, prompt)


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
        kept: dict[str, Kept] | None = None,
    ) -> None:
        self.progress: ProgressFn = progress or _silent
        # The requests rendered for their keys and kept to be sent (KEEP_RENDERED at
        # most; those of a share read as columns arrive with ``kept``).
        self._kept: dict[str, Kept] = {} if kept is None else kept
        # Per share (by id), the template keys its rows were already keyed by (read as
        # columns): checked once, on the first row, not again on the first record.
        self._checked = checked or {}
        self._waiting: dict[str, list[Waiting]] = {}
        # Per key, who answers it and the shape of its answer (the request without its
        # messages), as one pair shared by every key of an evaluator and judge.
        self._asked: dict[str, tuple[Judge, ChatRequest]] = {}
        pairs: dict[tuple[Any, ...], tuple[Judge, ChatRequest]] = {}
        # Per share (by id), how it reads answers: the one reader, cached or fresh.
        self._readers: dict[int, Reader] = {}
        # Per share (by id) planned from its renderer: how its requests are built when
        # sent, from the text its keys were hashed from (see _plan_rendered).
        self._senders: dict[int, tuple[Callable[[str], ChatRequest], Render]] = {}
        for share in prepared:
            judge = share.judge.chat_endpoint
            if judge is None:
                continue  # the offline judge embeds: see the embedding stage
            self._readers[id(share)] = Reader(share)
            prefix = chat_prefix(share.evaluator, judge)
            pending = share.pending()
            if self._plan_rendered(share, judge, prefix, pending, pairs):
                continue
            for record in pending:
                if record.raw:
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
                    if len(self._kept) < KEEP_RENDERED:
                        self._kept[key] = request  # sent as rendered here
                    self._asked[key] = _pair(
                        pairs, judge, request.schema_name, request.schema,
                        request.label_field, request.choices, request.extra,
                    )  # fmt: skip
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
        self._senders[id(share)] = (_sender(request), render)
        pair = _pair(pairs, judge, request.schema_name, request.schema, request.label_field,
                     request.choices, request.extra)  # fmt: skip
        waiting_of, asked, kept = self._waiting, self._asked, self._kept
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
                if user is not None and len(kept) < KEEP_RENDERED:
                    kept[key] = user  # sent as rendered here
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
        """The request behind ``key``: as it was rendered to be keyed, where the plan
        kept it (:data:`KEEP_RENDERED`), else rendered now from the first record that
        asks it (by the evaluator's plain renderer where it has one: :func:`_sender`)."""
        kept = self._kept.pop(key, None)
        if isinstance(kept, ChatRequest):
            return kept
        share, record = self._waiting[key][0]
        sender = self._senders.get(id(share))
        if sender is not None and kept is not None:
            return sender[0](kept)
        if record.raw:
            ready(share.evaluator, record)
        fields = record.fields
        assert fields is not None, "a waiting record is never settled"
        if sender is not None:
            build, render = sender
            return build(render(fields))
        return share.evaluator.build_request(fields)

    def requests(self, keys: Sequence[str]) -> Requests:
        """The requests of ``keys`` for an executor, each rendered only when it is taken
        (just before it is sent)."""
        return Requests(keys, self.request, self.shape)

    def unasked(self) -> list[str]:
        """The keys, in plan order, that the cache has not been asked for yet: all but
        those planned from a record it had no answer for (:attr:`Record.missed_key
        <framekit.engine.prepare.Record.missed_key>`). Read before any record is settled:
        such a record of a share planned from its renderer waits under that key. (Worked
        out from the waiting records, 0.4 µs a key, rather than kept as a set of the missed
        keys: 10 MB in a cold run of 100,000 rows, where every key is one.)"""
        senders = self._senders
        unasked = []
        for key, waiting in self._waiting.items():
            for share, record in waiting:  # (usually one)
                if record.missed_key is not None and id(share) in senders:
                    break
            else:
                unasked.append(key)
        return unasked

    def by_judge(self) -> list[tuple[Judge, list[str]]]:
        """The requests still unanswered, grouped by the judge that answers them: each
        judge sends under its own limits."""
        groups: dict[int, tuple[Judge, list[str]]] = {}
        for key in self._waiting:
            judge = self._asked[key][0]
            groups.setdefault(id(judge), (judge, []))[1].append(key)
        return list(groups.values())

    async def answer(self, executor: Executor, keys: Sequence[str]) -> None:
        """Have ``executor`` answer ``keys`` (its judge's), and take each outcome as it
        comes: the executor sends and reports, the plan alone writes what came back."""
        async for key, outcome in executor.outcomes(self.requests(keys)):
            self.receive(key, outcome)

    def receive_cached(self, hits: Mapping[str, Any]) -> int:
        """Take the cache's entries for their keys, read as a fresh answer is
        (:meth:`receive` of each entry's :meth:`Outcome.from_entry
        <framekit._results.Outcome.from_entry>`); returns how many were answers. A
        foreign value is no answer: it is asked again, and overwritten. The rows are
        counted on the progress display once, for all the entries."""
        answered = 0
        tally: dict[str, int] = {}

        def count(rows: int, kind: str) -> None:
            tally[kind] = tally.get(kind, 0) + rows

        for key, entry in hits.items():
            cached = Outcome.from_entry(entry)
            if cached is not None:
                answered += 1
                self.receive(key, cached, count)
        for kind, rows in tally.items():
            self.progress(rows, kind)
        return answered

    def receive(self, key: str, outcome: Outcome, progress: ProgressFn | None = None) -> None:
        """Take the outcome of ``key`` for every record waiting on it (each read by its
        share's :class:`Reader`). The request leaves the plan (a long run's plan shrinks
        as results grow)."""
        self._asked.pop(key, None)
        self._kept.pop(key, None)
        readers = self._readers
        for share, record in self._waiting.pop(key, ()):
            readers[id(share)].take(record, outcome)
            if record.answer is None:  # (else its verdict waits for embeddings)
                # Counted now, so that the display moves during an hours-long run.
                record.report(progress or self.progress)


def _sender(template: ChatRequest) -> Callable[[str], ChatRequest]:
    """A function building a share's requests as ``build_request`` builds them, from the
    user message's text: the ``template`` request's other messages, schema and extras
    (checked by :meth:`ChatPlan._plan_rendered` on the first record, through the key both
    hash to)."""
    before, extra = template.messages[:-1], template.extra
    name, schema = template.schema_name, template.schema
    label_field, choices = template.label_field, template.choices

    def build(user: str) -> ChatRequest:
        messages = [dict(message) for message in before]
        messages.append({"role": "user", "content": user})
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


def _pair(
    pairs: dict[tuple[Any, ...], tuple[Judge, ChatRequest]],
    judge: Judge,
    name: str,
    schema: dict[str, Any],
    label_field: str | None,
    choices: tuple[str, ...],
    extra: dict[str, Any],
) -> tuple[Judge, ChatRequest]:
    """Who answers a key and what reading and ordering its answer need (the request's
    schema, labels and sending hints, without messages): one pair shared by every key of
    an evaluator and judge."""
    # The shape holds the schema, so its id is not reused meanwhile.
    shared_until = tuple(extra.get(SHARED_UNTIL) or ())
    ident = (id(judge), id(schema), name, label_field, choices, shared_until)
    pair = pairs.get(ident)
    if pair is None:
        shape = ChatRequest([], name, schema, label_field, choices, extra=dict(extra))
        pair = pairs[ident] = (judge, shape)
    return pair


def _silent(rows: int, kind: str) -> None:
    """A progress display that shows nothing."""


def read_cached(
    share: Prepared,
    cache: Cache,
    progress: ProgressFn,
    read: set[str],
    odd: dict[str, Any] | None = None,
    kept: dict[str, Kept] | None = None,
) -> TemplateKeys | None:
    """Write the cached answers of ``share``'s unbuilt rows that a plain rubric reads into
    :attr:`Prepared.answered <framekit.engine.prepare.Prepared.answered>`, and build the
    records of the others; ``read`` gains the keys answered, ``odd`` the entries found
    but left to the plan's general reading (without ``odd``, their records are left
    unkeyed, and the plan asks for them again). Where anything is not as the bulk reading
    assumes, every record is built and nothing is read here. Returns the share's
    :class:`~framekit.engine.keys.TemplateKeys` where its rows were keyed by them (the
    plan keys the records left with the same, checked once). ``kept`` gains the user
    messages of the first keys missed (:data:`KEEP_RENDERED` in all), to be sent as
    rendered here."""
    weights, distinct = share.unbuilt, share.distinct
    reading = _reading(share) if cache.enabled else None
    if reading is None or weights is None or distinct is None:
        share.build_records()
        return None
    texts: dict[str, str] = {}
    keys = _keys(share, reading, texts, KEEP_RENDERED - len(kept) if kept is not None else 0)
    if keys is None:
        share.build_records()  # polars's text is not the renderer's: nothing read
        return None
    template, reader = reading
    found_odd: dict[str, Any] = {} if odd is None else odd
    answered = Answered.empty(distinct.height)
    # Distinct rows may still ask the same prompt: each key is read into its first row,
    # and copied to the others ("twins") once the lookup is done. (The dict is built from
    # the last row up, so that each key's first row is the one it keeps.)
    first: dict[Any, int] = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))
    first.pop(None, None)
    asked = len(keys) - keys.count(None)
    twins = [] if len(first) == asked else [
        i for i, key in enumerate(keys) if key is not None and first[key] != i
    ]  # fmt: skip
    for found in cache.lookup(first):  # (the whole table read tests its rows against it)
        rows = _read_found(found, first, answered, weights, reader, read, found_odd)
        if rows:
            progress(rows, "cached")
    twins_read = 0
    for i in twins:
        source = first[keys[i]]  # type: ignore[index]
        if answered.label[source] is not None:
            for column in answered.columns():
                column[i] = column[source]
            twins_read += weights[i]
    if twins_read:
        progress(twins_read, "cached")
    if kept is not None:  # the prompts of the keys the cache did not answer
        kept.update((key, text) for key, text in texts.items() if key not in read)
    answered.count(weights)
    if answered.rows:  # (a cold run reads none: its records are built as they would have been)
        share.answered = answered
    if odd is None and found_odd:  # the caller takes no entries: the plan asks again
        keys = [None if key in found_odd else key for key in keys]
    # The rows left to records, each with the key the cache was asked for (None: a row
    # polars did not render, keyed and asked by the plan).
    label = answered.label
    unread = [(i, key) for i, key in enumerate(keys) if label[i] is None] if None in label else []
    share.build_records([i for i, _ in unread])
    for record, (_, key) in zip(share.records, unread):
        record.missed_key = key
    return template


def _read_found(
    found: dict[str, Any],
    first: dict[str, int],
    answered: Answered,
    weights: list[int],
    reader: Reader,
    read: set[str],
    odd: dict[str, Any],
) -> int:
    """Read the cached ``found`` entries into ``answered`` (at each key's ``first`` row)
    by ``reader``'s plain reading; ``odd`` gains an entry it leaves to the plan. Returns
    the rows answered, for the progress display. (Names are bound once: this runs a
    million times in a re-run of a million rows.)"""
    value, label, explanation, confidence, tokens, cost = answered.columns()
    rows = 0
    add, plain = read.add, reader.plain
    for key, entry in found.items():
        i = first[key]
        got = (
            plain(entry.get("answer"), entry.get("probabilities")) if type(entry) is dict else None
        )
        if got is None:
            odd[key] = entry  # the plan reads it the general way
            continue
        value[i], label[i], explanation[i], confidence[i] = got
        tokens[i], cost[i] = entry.get("tokens", 0), entry.get("cost_usd")
        rows += weights[i]
        add(key)
    return rows


def _keys(
    share: Prepared, reading: tuple[TemplateKeys, Reader], texts: dict[str, str], keep: int
) -> list[str | None] | None:
    """The cache key of each of ``share``'s distinct rows, rendered by polars
    :data:`RENDER_SLICE` rows at a time (``None``: a row whose text polars leaves to the
    renderer, keyed by the plan from its record); ``None`` when polars's first prompt is
    not the renderer's. ``texts`` gains the first ``keep`` prompts by key."""
    keyed, first_prompt = reading[0].keys, reading[0].prompt
    column = share.evaluator.prompt_column  # type: ignore[attr-defined]
    distinct = share.distinct
    assert distinct is not None
    keys: list[str | None] = []
    slices = [
        distinct.slice(begin, RENDER_SLICE) for begin in range(0, distinct.height, RENDER_SLICE)
    ]
    # polars renders the next slice (without the GIL) while this thread hashes the
    # prompts of the one before: at 1M rows, 2.5-2.7 µs a row for both against 2.95 one
    # after the other (a third of the rendering's 1.2 hidden, on two busy cores).
    with ThreadPoolExecutor(1, thread_name_prefix="framekit-render") as renders:
        ahead = renders.submit(column, slices[0]) if slices else None
        for n, rows in enumerate(slices):
            assert ahead is not None
            prompts: list[str | None] | None = ahead.result()
            # (one slice ahead, no more: see RENDER_SLICE)
            ahead = renders.submit(column, slices[n + 1]) if n + 1 < len(slices) else None
            if n == 0 and (prompts is None or prompts[0] != first_prompt):
                return None
            if prompts is None:
                keys.extend([None] * rows.height)
            else:
                keys.extend([keyed(user) if user is not None else None for user in prompts])
                if len(texts) < keep:
                    part = keys[-len(prompts) :]
                    texts.update(
                        (key, user)
                        for key, user in zip(part[: keep - len(texts)], prompts)
                        if key is not None and user is not None
                    )
    return keys


def _reading(share: Prepared) -> tuple[TemplateKeys, Reader] | None:
    """What reading ``share``'s rows in bulk needs: its keys from the user message (with
    the first row's rendered prompt, to check polars's against) and its reader; ``None``
    where the share's requests are not a plain template's, or its answers not read by
    label alone."""
    ev, judge, distinct = share.evaluator, share.judge.chat_endpoint, share.distinct
    reader = Reader(share)
    if reader.scores is None or distinct is None or judge is None:
        return None
    # The mapping's values, as vouched for: preparing them would change no prompt.
    fields = dict(zip(distinct.columns, distinct.row(0)))
    template = template_keys(ev, chat_prefix(ev, judge), fields)
    if template is None:
        return None
    return template, reader


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
        kept: dict[str, Kept] = {}  # the first prompts rendered, to be sent as they are
        for share in prepared:
            if share.unbuilt is not None:
                template = read_cached(share, cache, report, read, odd, kept)
                if template is not None:
                    checked[id(share)] = template
        plan = ChatPlan(prepared, report, checked, kept)
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
            share.ready_waiting()  # the misses, looked up before they were prepared
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

    def executor(judge: Judge) -> Executor:
        limiter = limiter_of(judge)
        if judge.batch:
            return BatchExecutor(judge, cache, stats, show, limiter)
        return ChatExecutor(judge, cache, stats, limiter)

    answering = []
    for judge, keys in pending:  # each judge under its own limits, all at once
        answering.append(plan.answer(executor(judge), keys))
    await asyncio.gather(*answering)
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
