"""From a frame to what each evaluator will be asked: one :class:`Prepared` per evaluator.

Every run goes through here (``evaluate_dataframe``, ``evaluate_parquet``'s slices, Ray's
blocks), and so do one record (``Evaluator.score``) and the dry run, so all of them read
a frame the same way:

1. the mapping gives one column per canonical field (a column name, a polars
   expression, or a callable taking the row as a dict; a callable that raises fails only
   its row);
2. per evaluator, identical rows become one distinct :class:`Record` (``inverse`` maps
   each row back to its record, ``weight`` counts the rows behind one);
3. a record whose text fields together exceed the judge's character budget
   (:meth:`Judge.char_budget <framekit.judges.judge.Judge.char_budget>`, from its context
   window) is cut to fit rather than failed: short fields keep everything, long ones
   share the rest, each cut text ends with a visible mark, and the row's explanation says
   what was cut;
4. the evaluator prepares each record (:meth:`Evaluator.prepare
   <framekit.evaluators.base.Evaluator.prepare>`): a record it cannot evaluate, or a row
   whose mapping raised, is settled with its error; a record whose verdict needs no judge
   (an empty retrieval) is settled with that verdict. Only the others are asked about.
   Records that the evaluator vouches for from the columns (preparing them surely passes
   and changes no prompt) wait until the cache has been asked: a cached re-run prepares
   only what it sends (:attr:`Record.raw`). Where it vouches for every row of a plain
   template asked of an LLM judge, the records are not even built
   (:attr:`Prepared.unbuilt`): the cache is read into columns first
   (:mod:`framekit.engine.cached_columns`), and only the rows it does not answer become
   records.

Problems with the mapping itself (a missing column, an unmapped required field) are
raised here, before any judge call.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from framekit._errors import InputError, MappingError, RecordError, did_you_mean, one_line
from framekit._frames import clean_text
from framekit.evaluators.base import (
    COLUMN_ALIASES,
    FIELD_ALIASES,
    FIELDS,
    Evaluator,
    Verdict,
    canonical_fields,
)
from framekit.judges.cascade import Cascade
from framekit.judges.judge import Judge
from framekit.judges.local import LocalJudge
from framekit.judges.logprobs import expected_score
from framekit.judges.resolve import JudgeResolver

MappingValue = str | pl.Expr | Callable[[dict[str, Any]], Any]
ProgressFn = Callable[[int, str], None]  # (rows, "done" | "cached" | "failed")


@dataclass(slots=True, eq=False)
class Record:
    """One distinct record of one evaluator, and what became of it.

    ``fields`` is the prepared record while something is still to be asked about it
    (``None`` once it is settled); the other fields are its result, written as it comes
    in, and read into the result columns of every row behind it.
    """

    fields: dict[str, Any] | None
    #: Rows behind this record.
    weight: int = 1
    #: What was cut to fit the judge's context window (added to the explanation).
    note: str | None = None
    #: An LLM judge's answer that embeddings must follow before the verdict.
    answer: dict[str, Any] | None = None
    value: float | None = None
    label: str | None = None
    explanation: str | None = None
    confidence: float | None = None
    #: Scored by the labels' probabilities (``scoring="expected"``), not the label alone.
    weighted: bool = False
    error: str | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    cached: bool | None = None
    latency_s: float | None = None
    #: The verdict's structured findings (Groundedness's claim list), if any.
    details: dict[str, Any] | None = None
    #: The model of the judge whose verdict stands, where a cascade chose one.
    judge: str | None = None
    reported: bool = False  # already counted by the progress display
    #: ``fields`` are the mapping's values, not yet prepared: the evaluator vouched that
    #: preparing them passes and leaves the prompt as it is
    #: (:meth:`RubricEvaluator.prepared_as_given
    #: <framekit.evaluators.rubric.RubricEvaluator.prepared_as_given>`), so its answer may
    #: be looked up first; :func:`ready` prepares it before anything else reads it.
    raw: bool = False
    #: Its request's cache key, where it was looked up before the plan and not found
    #: (:mod:`framekit.engine.cached_columns`): the plan keys it so and does not ask the
    #: cache again.
    missed_key: str | None = None

    def settle(self, verdict: Verdict) -> None:
        """The record's verdict (its value clipped to [0, 1]); nothing more to ask."""
        self.value = min(1.0, max(0.0, float(verdict.value)))
        self.label, self.explanation = verdict.label, verdict.explanation
        self.details = verdict.details
        self.confidence = verdict.confidence
        self.fields = self.answer = None

    def fail(self, error: str | None) -> None:
        """The record's one-line error; nothing more to ask."""
        self.error = error or "no answer"
        self.fields = self.answer = None

    def free(self) -> None:
        """Scored without any call: no tokens, no cost, no wait."""
        self.tokens, self.cost_usd, self.cached = 0, 0.0, False

    def report(self, progress: ProgressFn) -> None:
        """Count this record's rows on the progress display, once, as what it came to."""
        if not self.reported:
            self.reported = True
            kind = "failed" if self.error else "cached" if self.cached else "done"
            progress(self.weight, kind)


def embeds_answers(ev: Evaluator) -> bool:
    """Whether ``ev``'s verdict follows embeddings of an LLM judge's answers
    (AnswerRelevancy's regenerated questions)."""
    return type(ev).embedding_texts is not Evaluator.embedding_texts


@dataclass(slots=True, eq=False)
class Answered:
    """Cached answers of a share's distinct rows, read as columns rather than into a
    :class:`Record` each (:mod:`framekit.engine.cached_columns`): entry ``i`` is distinct
    row ``i``'s result; ``None`` in ``label`` marks a row answered otherwise, whose record
    holds its result (:attr:`Prepared.record_rows`). Every answered row was read from the
    cache (no tokens spent now, no wait), scored by its label, never failed.
    """

    value: list[float | None]
    label: list[str | None]
    explanation: list[str | None]
    confidence: list[float | None]
    tokens: list[int | None]
    cost_usd: list[float | None]
    #: Rows behind the answered distinct rows, and those with a confidence (:meth:`count`).
    rows: int = 0
    confident_rows: int = 0

    @classmethod
    def empty(cls, count: int) -> Answered:
        """No row of ``count`` answered yet."""
        return cls(*([None] * count for _ in range(6)))  # type: ignore[arg-type]

    def count(self, weights: Sequence[int]) -> None:
        """Count :attr:`rows` and :attr:`confident_rows` from the columns, once they are
        read (``weights``: the rows behind each distinct row)."""
        self.rows = sum(w for w, label in zip(weights, self.label) if label is not None)
        self.confident_rows = sum(w for w, c in zip(weights, self.confidence) if c is not None)

    def columns(self) -> tuple[list[Any], ...]:
        """The six lists, one per result column (a row is copied across all of them)."""
        return (self.value, self.label, self.explanation, self.confidence, self.tokens,
                self.cost_usd)  # fmt: skip

    def column(self, kind: str, model: str) -> list[Any]:
        """The answered rows' values of result column ``kind`` (``"score"``, ``"label"``,
        ..., ``"judge"``: ``model``), ``None`` elsewhere; a new list."""
        by_kind: dict[str, list[Any]] = {
            "score": self.value,
            "label": self.label,
            "explanation": self.explanation,
            "confidence": self.confidence,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
        }
        values = by_kind.get(kind)
        if values is not None:
            return list(values)
        constant = {"cached": True, "latency_s": 0.0, "judge": model}.get(kind)
        return [None if label is None else constant for label in self.label]


@dataclass(eq=False)
class Prepared:
    """One evaluator's share of a frame: its judge, its distinct records, and for each row
    of the frame the record it is (``inverse``)."""

    evaluator: Evaluator
    #: A cascade's share is settled stage by stage (:mod:`framekit.engine.cascade`).
    judge: Judge | LocalJudge | Cascade
    records: list[Record]
    inverse: list[int] = field(default_factory=list)
    #: The distinct records' values as the mapping gave them, one column per field (row
    #: ``i`` is ``records[i]``), when polars grouped the rows; the planner renders their
    #: prompts from it in bulk (:meth:`RubricEvaluator.prompt_column
    #: <framekit.evaluators.rubric.RubricEvaluator.prompt_column>`).
    distinct: pl.DataFrame | None = None
    #: The weights of the distinct rows while their records are not built: every one was
    #: vouched for and is asked of a plain template, so a cached re-run may read their
    #: answers as columns (:mod:`framekit.engine.cached_columns`) and build records only
    #: for the rows the cache does not answer (:meth:`build_records`).
    unbuilt: list[int] | None = None
    #: The answers read as columns, where some were; ``records`` then hold the other
    #: distinct rows, ``records[i]`` being row ``record_rows[i]``.
    answered: Answered | None = None
    record_rows: list[int] | None = None

    @property
    def embeds(self) -> bool:
        """Whether its verdicts follow embeddings: the offline judge's (unless it reads
        likelihoods), or of an LLM judge's answers (AnswerRelevancy's regenerated
        questions)."""
        return (
            isinstance(self.judge, LocalJudge) and not self.scores_likelihood
        ) or self.embeds_answers

    @property
    def scores_likelihood(self) -> bool:
        """Whether the offline judge reads this evaluator with the likelihood scorer
        (the ``lm`` extra: :meth:`LocalJudge.scores_likelihood
        <framekit.judges.local.LocalJudge.scores_likelihood>`)."""
        return isinstance(self.judge, LocalJudge) and self.judge.scores_likelihood(self.evaluator)

    @property
    def embeds_answers(self) -> bool:
        """Whether an LLM judge's answers are embedded before the verdict."""
        return embeds_answers(self.evaluator)

    def build_records(self, rows: Sequence[int] | None = None) -> None:
        """Build the records of the distinct rows not built yet (:attr:`unbuilt`): those of
        ``rows`` (the others having been answered as columns), or all. Each holds the
        mapping's values, prepared when first read (:attr:`Record.raw`)."""
        weights, distinct = self.unbuilt, self.distinct
        if weights is None or distinct is None:
            return
        self.unbuilt = None
        if rows is not None and len(rows) < distinct.height:
            self.record_rows = list(rows)
            distinct = self.distinct = distinct[self.record_rows]
            weights = [weights[i] for i in self.record_rows]
        self.records = _records_of(distinct, weights, raw=True)

    def pending(self) -> list[Record]:
        """The records still to be asked about."""
        self.build_records()
        return [r for r in self.records if r.fields is not None]

    def spread(self, kind: str, values: list[Any]) -> list[Any]:
        """Result column ``kind`` for every distinct row, from ``values`` (one per record)
        and the answers read as columns."""
        answered = self.answered
        if answered is None or self.record_rows is None:
            return values
        assert isinstance(self.judge, Judge), "only an LLM judge's answers are read so"
        out = answered.column(kind, self.judge.model)
        for row, value in zip(self.record_rows, values):
            out[row] = value
        return out

    def failures(self) -> int:
        """Rows whose evaluation failed."""
        return sum(r.weight for r in self.records if r.error)

    def confidence_method(self) -> str:
        """How this share's judge gives a confidence: ``"calibrated offline"`` (the
        offline judge's fitted map), ``"self-consistency k=N"`` (``samples=N``), or
        ``"logprobs"`` (token log-probabilities, where the endpoint reports them)."""
        if isinstance(self.judge, LocalJudge):
            share = self.judge.relevant_share
            return "calibrated offline" + (f" (relevant share {share:g})" if share else "")
        if isinstance(self.judge, Cascade):  # its stages' methods: see framekit.engine.cascade
            return "cascade"
        if self.judge.samples > 1:
            return f"self-consistency k={self.judge.samples}"
        return "logprobs"

    def confidence_summary(self) -> dict[str, Any]:
        """This evaluator's confidence figures for the run record. ``method`` is ``None``
        when no row got a confidence (a judge without logprobs, an evaluator without
        labels): nothing is reported that the judge did not give."""
        scored = [r for r in self.records if r.value is not None]
        confident = sum(r.weight for r in scored if r.confidence is not None)
        answered = self.answered
        by_answers = answered.rows if answered is not None else 0
        confident += answered.confident_rows if answered is not None else 0
        entry: dict[str, Any] = {
            "method": self.confidence_method() if confident else None,
            "scored_rows": sum(r.weight for r in scored) + by_answers,
            "rows_with_confidence": confident,
            "scoring": self.evaluator.scoring,
        }
        if self.evaluator.scoring == "expected":  # (answers read as columns: by label)
            by_label = sum(r.weight for r in scored if not r.weighted) + by_answers
            entry["rows_scored_by_label"] = by_label
        return entry

    def judge_answer(
        self,
        record: Record,
        answer: Mapping[str, Any],
        vectors: list[np.ndarray] | None = None,
        probabilities: Mapping[str, float] | None = None,
    ) -> None:
        """Settle ``record`` with the evaluator's reading of an LLM judge's answer (and of
        the embeddings it needed, and the labels' probabilities), or with why the answer
        could not be read."""
        assert record.fields is not None, "a settled record is not judged again"
        if record.raw:
            plain = getattr(self.evaluator, "plain_verdicts", None)
            if plain is None or plain() is None:  # a plain verdict reads only the answer
                ready(self.evaluator, record)
        try:
            verdict = self.evaluator.verdict(record.fields, answer, vectors or None)
            weighed = weigh(self.evaluator, verdict, probabilities)
        except RecordError as exc:
            record.fail(str(exc))
        except (KeyError, ValueError, TypeError) as exc:
            detail = f"{type(exc).__name__}: {one_line(str(exc), 120)}"
            record.fail(f"could not read the judge's answer: {detail}")
        else:
            record.settle(weighed)
            record.weighted = weighed is not verdict and self.evaluator.scoring == "expected"


def weigh(
    evaluator: Evaluator, verdict: Verdict, probabilities: Mapping[str, float] | None
) -> Verdict:
    """``verdict`` with the judge's confidence in it, and with the probability-weighted
    score when ``evaluator.scoring == "expected"``; unchanged without probabilities of
    its label.

    Examples
    --------
    >>> from framekit.evaluators import RetrievalRelevance
    >>> ev = RetrievalRelevance(scoring="expected")
    >>> v = weigh(ev, Verdict(1.0, "relevant", None), {"relevant": 0.8, "irrelevant": 0.2})
    >>> v.value, v.confidence
    (0.8, 0.8)
    """
    label = verdict.label
    if not probabilities or label is None or label not in probabilities:
        return verdict
    value = verdict.value
    if evaluator.scoring == "expected":
        value = expected_score(probabilities, evaluator.label_scores())
    return replace(verdict, value=value, confidence=float(probabilities[label]))


async def prepare(
    frame: pl.DataFrame,
    evaluators: Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None,
    judge_for: JudgeResolver,
) -> list[Prepared]:
    """Each evaluator's distinct records of ``frame``, prepared (see the module docstring).

    Raises :class:`~framekit.MappingError` for a bad mapping or a required field without
    a source, naming the field, the evaluator and the available columns.
    """
    needed = {f for ev in evaluators for f in ev.fields}
    fields = resolve_mapping(frame, mapping, needed)
    for ev in evaluators:
        ev.check_fields(fields.available, frame.columns)
    prepared = []
    for ev in evaluators:
        names = [f for f in ev.fields if f in fields.available]
        row_errors = {i: msg for f in names for i, msg in fields.row_errors.get(f, {}).items()}
        judge = judge_for(ev.judge, ev.judge_options)
        most = most_text(fields.columns, names)
        given: list[bool] | None = None  # the distinct rows the evaluator vouches for
        distinct: pl.DataFrame | None = None
        with bulk():
            grouped = _grouped(fields.columns, names, frame.height, row_errors)
            if grouped is None:
                records, inverse = _ungrouped(fields.columns, names, frame.height, row_errors)
            else:
                weights, inverse, distinct = grouped
                given = _vouched(ev, judge, distinct)
                if given is not None and all(given) and _unbuilt(ev, judge, most):
                    prepared.append(Prepared(ev, judge, [], inverse, distinct, unbuilt=weights))
                    continue
                records = _records_of(distinct, weights)
        await fit_to_context(records, judge, most)
        share = Prepared(ev, judge, records, inverse, distinct)
        with bulk():
            for record, deferred in zip(records, given or [False] * len(records)):
                if deferred and record.note is None:  # (a record cut to fit is prepared)
                    record.raw = True
                else:
                    _prepare_record(ev, record)
        prepared.append(share)
    return prepared


@contextlib.contextmanager
def bulk() -> Iterator[None]:
    """A stretch of code that builds one object per record and frees none: the cyclic
    garbage collector is held off meanwhile. Its passes would walk every record built so
    far, again and again (a fifth of a fully cached re-run's time), to find no garbage.
    Nothing inside may await: the pause is the process's."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def prepare_one(
    evaluator: Evaluator, judge: Judge | LocalJudge | Cascade, fields: Mapping[str, Any]
) -> Prepared:
    """One record (``Evaluator.score``), prepared as a frame's row would be; a record the
    evaluator cannot evaluate raises its :class:`~framekit._errors.RecordError` here."""
    record = Record({f: fields.get(f) for f in evaluator.fields})
    await fit_to_context([record], judge)
    _prepare_record(evaluator, record, strict=True)
    return Prepared(evaluator, judge, [record], [0])


def _vouched(
    ev: Evaluator, judge: Judge | LocalJudge | Cascade, distinct: pl.DataFrame
) -> list[bool] | None:
    """Which distinct rows may wait to be prepared until their answer is not in the cache:
    those the evaluator vouches for (:meth:`RubricEvaluator.prepared_as_given
    <framekit.evaluators.rubric.RubricEvaluator.prepared_as_given>`), asked of one LLM
    judge whose answers the planner reads in bulk; ``None`` for any other share.
    Preparing was a quarter of a fully cached re-run's time."""
    vouch = getattr(ev, "prepared_as_given", None)
    if vouch is None or not isinstance(judge, Judge) or embeds_answers(ev):
        return None
    given: list[bool] | None = vouch(distinct)
    return given


def _unbuilt(ev: Evaluator, judge: Judge | LocalJudge | Cascade, most: int | None) -> bool:
    """Whether a share whose every distinct row is vouched for (:func:`_vouched`) may
    keep its records unbuilt (:attr:`Prepared.unbuilt`): none can need cutting to the
    judge's window (no window set, little text), and the evaluator's prompts are a plain
    template polars renders, read by label (:mod:`framekit.engine.cached_columns` checks
    the rest)."""
    if most is None or most > _ALWAYS_FITS:
        return False
    if not isinstance(judge, Judge) or judge.context_window:
        return False
    return all(
        callable(getattr(ev, hook, None))
        for hook in ("prompt_renderer", "prompt_column", "plain_verdicts")
    )


def ready(ev: Evaluator, record: Record) -> None:
    """Prepare ``record`` if it still holds the mapping's values (:attr:`Record.raw`)."""
    if record.raw:
        record.raw = False
        _prepare_record(ev, record)
        assert record.fields is not None, f"{type(ev).__name__} vouched for a record it settles"


def prepare_waiting(share: Prepared) -> None:
    """Prepare the records of ``share`` still waiting as the mapping gave them: the cache
    did not answer them, so they are sent (or planned) as prepared records."""
    ev = share.evaluator
    for record in share.records:
        if record.raw and record.fields is not None:
            ready(ev, record)


def _prepare_record(ev: Evaluator, record: Record, strict: bool = False) -> None:
    """The evaluator's preparation of one record, in place: the record it will be asked
    about, or settled (its error; a verdict known without a judge). ``strict``: a record
    that cannot be evaluated raises instead."""
    if record.fields is None:
        return  # its rows' mapping raised: the error is already its result
    try:
        ready = ev.prepare(record.fields)
    except RecordError as exc:
        if strict:
            raise
        record.fail(str(exc))
        return
    known = ev.known_verdict(ready)
    if known is None:
        record.fields = ready
        return
    # Scored without a judge (an empty retrieval): nothing to send or cache.
    record.settle(known)
    record.free()
    record.latency_s = 0.0


# -- identical rows --------------------------------------------------------------------


#: The key of rows whose mapping raised, with the error (they are never asked about).
_ROW_ERROR = "row error"


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    return value


def distinct_records(
    columns: Mapping[str, pl.Series],
    names: list[str],
    height: int,
    row_errors: Mapping[int, str] | None = None,
) -> tuple[list[Record], list[int]]:
    """Collapse identical rows into records (their ``weight`` counts the rows), and for
    each row the index of its record.

    A row in ``row_errors`` (its mapping raised) is not a record to ask about: it goes to
    a record holding that error (rows with the same error share one).
    """
    grouped = _grouped(columns, names, height, row_errors)
    if grouped is not None:
        weights, inverse, distinct = grouped
        return _records_of(distinct, weights), inverse
    return _ungrouped(columns, names, height, row_errors)


def _ungrouped(
    columns: Mapping[str, pl.Series],
    names: list[str],
    height: int,
    row_errors: Mapping[int, str] | None = None,
) -> tuple[list[Record], list[int]]:
    """:func:`distinct_records` of what :func:`_grouped` leaves: no field read, a row whose
    mapping raised, Python objects. Grouped row by row, in Python."""
    row_errors = row_errors or {}
    if not names:  # an evaluator reading no field: every row is the same record
        return ([Record({}, height)], [0] * height) if height else ([], [])
    series = [columns[n] for n in names]
    nested = [s.dtype.is_nested() or s.dtype == pl.Object for s in series]
    lists = [s.to_list() for s in series]
    index: dict[Any, int] = {}
    key: Any
    records: list[Record] = []
    inverse: list[int] = []
    for i, row in enumerate(zip(*lists)):
        failed = row_errors.get(i)
        if failed is not None:
            key = (_ROW_ERROR, failed)
        elif any(nested):
            key = tuple(_hashable(v) if n else v for v, n in zip(row, nested))
        else:
            key = row
        try:
            r = index.get(key)
        except TypeError:  # an unhashable value from a callable mapping: keep the row apart
            r, key = None, object()
        if r is None:
            r = index[key] = len(records)
            fresh = Record(dict(zip(names, row)), 0) if failed is None else Record(None, 0)
            fresh.error = failed
            records.append(fresh)
        records[r].weight += 1
        inverse.append(r)
    return records, inverse


def _grouped(
    columns: Mapping[str, pl.Series],
    names: list[str],
    height: int,
    row_errors: Mapping[int, str] | None,
) -> tuple[list[int], list[int], pl.DataFrame] | None:
    """``(weights, inverse, distinct)`` of typed columns, grouped by polars: only the
    distinct rows become Python values, and only when their records are built (a frame
    of repeated rows costs its distinct ones). ``None`` where polars cannot group them
    (no field, a row whose mapping raised, Python objects): :func:`_ungrouped` does."""
    series = [columns[n] for n in names]
    if not names or row_errors or not height or any(s.dtype == pl.Object for s in series):
        return None
    frame = pl.DataFrame([s.alias(n) for s, n in zip(series, names)])
    groups = frame.with_row_index("__row").group_by(names, maintain_order=True).agg("__row")
    rows = groups.get_column("__row")
    weights = rows.list.len().to_list()
    spread = groups.select(pl.int_range(pl.len()).alias("record"), "__row").explode("__row")
    inverse = np.empty(frame.height, dtype=np.int64)
    inverse[spread.get_column("__row").to_numpy()] = spread.get_column("record").to_numpy()
    return weights, inverse.tolist(), groups.select(names)


def _records_of(distinct: pl.DataFrame, weights: list[int], raw: bool = False) -> list[Record]:
    """One record per distinct row, holding the mapping's values (``raw``: vouched for,
    to be prepared when first read)."""
    names = distinct.columns
    values = [distinct.get_column(n).to_list() for n in names]
    rows = zip(zip(*values), weights)
    return [Record(dict(zip(names, row)), w, raw=raw) for row, w in rows]


# -- the context window ------------------------------------------------------------------

#: Records with fewer characters of fields than this are not measured against a model's
#: window (that would mean importing litellm to look it up, which a fully cached run never
#: needs): every chat model of the last years takes them. Set ``judge.context_window``
#: to have every record checked.
_ALWAYS_FITS = 8_000


async def fit_to_context(
    records: Sequence[Record], judge: Judge | LocalJudge | Cascade, most: int | None = None
) -> None:
    """Cut the fields of over-long ``records`` (in place) to the judge's character
    budget, each with the note for its explanation (a cascade's: every stage's, so the
    smallest window decides). ``most``: no record has more characters of text than this
    (:func:`most_text`), so none is measured when that always fits."""
    if isinstance(judge, Cascade):
        for stage in judge.judges:
            await fit_to_context(records, stage, most)
        return
    if not isinstance(judge, Judge):
        return  # the local judge truncates to its model's 256 tokens by itself
    if not judge.context_window and most is not None and most <= _ALWAYS_FITS:
        return
    unsettled = [r for r in records if r.fields is not None]
    sizes = [sum(map(text_size, r.fields.values())) for r in unsettled if r.fields is not None]
    if judge.context_window:
        budget = judge.char_budget()
    elif max(sizes, default=0) <= _ALWAYS_FITS:
        return
    else:  # litellm's figure: imported (seconds) off the event loop
        budget = await asyncio.to_thread(judge.char_budget)
    for record, size in zip(unsettled, sizes):
        if size > budget and record.fields is not None:
            record.note = fit_record(record.fields, budget) or record.note


def most_text(columns: Mapping[str, pl.Series], names: Sequence[str]) -> int | None:
    """At least as many characters as :func:`text_size` gives any row's ``names`` in
    total, read off typed columns by polars (``None``: a column of another type).

    Examples
    --------
    >>> most_text({"q": pl.Series(["ab", "abcd"]), "d": pl.Series([["x"], ["yy", "z"]])},
    ...           ["q", "d"])
    7
    """
    total = 0
    for name in names:
        column = columns[name]
        if column.dtype == pl.String:
            lengths = column.str.len_chars()
        elif column.dtype == pl.List(pl.String):
            lengths = column.list.eval(pl.element().str.len_chars()).list.sum()
        else:
            return None
        total += int(lengths.max() or 0)  # type: ignore[arg-type]
    return total


def text_size(value: Any) -> int:
    """Characters of text in a field value: a string, or the strings of a list."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, (list, tuple)):
        if all(type(v) is str for v in value):  # the usual list: documents
            return sum(map(len, value))
        return sum(text_size(v if not isinstance(v, Mapping) else v.get("content")) for v in value)
    return 0


def _shares(sizes: list[int], budget: int) -> list[int]:
    """Per-item limits within ``budget``: short items keep all, long ones split the rest."""
    limits = [0] * len(sizes)
    left = budget
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    for k, i in enumerate(order):
        limits[i] = min(sizes[i], left // (len(sizes) - k))
        left -= limits[i]
    return limits


TRUNCATION_MARK = "\n[... cut by framekit to fit the judge's context window ...]"


def _cut(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + TRUNCATION_MARK
    if isinstance(value, (list, tuple)):
        limits = _shares([text_size([v]) for v in value], limit)
        out = []
        for item, lim in zip(value, limits):
            if isinstance(item, Mapping) and isinstance(item.get("content"), str):
                item = {**item, "content": _cut(item["content"], lim)}
            elif isinstance(item, str):
                item = _cut(item, lim)
            out.append(item)
        return out
    return value


def fit_record(record: dict[str, Any], budget: int) -> str | None:
    """Cut the text fields of ``record`` (in place) to ``budget`` characters in total.

    Fields shorter than an even share keep everything; the longer ones share the rest, and
    each cut text ends with a visible mark so the judge knows it is partial. Returns the
    note for the explanation column, or ``None`` when nothing was cut.

    Examples
    --------
    >>> record = {"input": "short question", "output": "x" * 100}
    >>> fit_record(record, 50)
    "[framekit: cut to fit the judge's context window: output 100 -> 36 characters]"
    >>> len(record["output"]) > 36, record["input"]
    (True, 'short question')
    """
    sizes = {f: text_size(v) for f, v in record.items()}
    if sum(sizes.values()) <= budget:
        return None
    limits = dict(zip(sizes, _shares(list(sizes.values()), budget)))
    cuts = []
    for f, size in sizes.items():
        if size > limits[f]:
            record[f] = _cut(record[f], limits[f])
            cuts.append(f"{f} {size:,} -> {limits[f]:,}")
    return f"[framekit: cut to fit the judge's context window: {'; '.join(cuts)} characters]"


# -- the mapping -------------------------------------------------------------------------


@dataclass
class ResolvedFields:
    """Field name -> column of values, plus per-row errors from callables."""

    columns: dict[str, pl.Series]
    row_errors: dict[str, dict[int, str]] = field(default_factory=dict)

    @property
    def available(self) -> set[str]:
        return set(self.columns)


def _columns_text(frame: pl.DataFrame) -> str:
    return ", ".join(repr(c) for c in frame.columns) or "(none)"


def resolve_mapping(
    frame: pl.DataFrame, mapping: Mapping[str, MappingValue] | None, needed: set[str]
) -> ResolvedFields:
    """Resolve the fields in ``needed`` (others in the mapping are ignored)."""
    if mapping is None:
        mapping = {f: f for f in FIELDS if f in frame.columns}
        # Columns named as other projects name the fields (user_query, ...) fill the rest.
        for alias in COLUMN_ALIASES:
            canonical = FIELD_ALIASES[alias]
            if canonical not in mapping and alias in frame.columns:
                mapping[canonical] = alias
    elif not isinstance(mapping, Mapping):
        raise MappingError(
            f"mapping must be a dict of field -> column, got {type(mapping).__name__}"
        )
    unknown = [k for k in mapping if k not in FIELDS and k not in FIELD_ALIASES]
    if unknown:
        raise MappingError(
            f"mapping key {unknown[0]!r} is not a field; fields are {', '.join(FIELDS)} "
            f"(aliases: {', '.join(FIELD_ALIASES)}; map a field to a column: "
            "{'input': 'question'})"
        )
    try:
        mapping = canonical_fields(mapping, "mapping")
    except InputError as exc:
        raise MappingError(str(exc)) from None
    resolved = ResolvedFields({})
    for name, source in mapping.items():
        if name not in needed:
            continue
        if isinstance(source, str):
            if source not in frame.columns:
                raise MappingError(
                    f"mapping {name!r} -> {source!r}: no column {source!r}."
                    f"{did_you_mean(source, frame.columns)} "
                    f"Available columns: {_columns_text(frame)}"
                )
            resolved.columns[name] = frame.get_column(source)
        elif isinstance(source, pl.Expr):
            try:
                resolved.columns[name] = frame.select(source.alias(name)).to_series()
            except Exception as exc:  # polars raises many kinds; all mean a bad expression
                raise MappingError(
                    f"mapping {name!r}: the expression failed: {one_line(str(exc), 200)}. "
                    f"Available columns: {_columns_text(frame)}"
                ) from None
            if resolved.columns[name].len() != frame.height:
                raise MappingError(
                    f"mapping {name!r}: the expression gives {resolved.columns[name].len()} "
                    f"values for {frame.height} rows"
                )
        elif callable(source):
            values: list[Any] = []
            errors: dict[int, str] = {}
            for i, row in enumerate(frame.iter_rows(named=True)):
                try:
                    value = source(row)
                    values.append(clean_text(value) if isinstance(value, str) else value)
                except Exception as exc:
                    values.append(None)
                    errors[i] = (
                        f"mapping for {name!r} raised {type(exc).__name__}: {one_line(str(exc), 120)}"
                    )
            resolved.columns[name] = _series(name, values)
            if errors:
                resolved.row_errors[name] = errors
        else:
            raise MappingError(
                f"mapping {name!r}: expected a column name, a polars expression or a "
                f"callable, got {type(source).__name__}"
            )
    return resolved


def _series(name: str, values: list[Any]) -> pl.Series:
    """Values of one kind as a typed column; mixed kinds (or odd ones) as Python objects."""
    if len({type(v) for v in values if v is not None}) <= 1:
        try:
            return pl.Series(name, values, strict=False)
        except Exception:  # polars cannot type them (ragged structs, custom objects...)
            pass
    return pl.Series(name, values, dtype=pl.Object)
