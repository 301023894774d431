"""From a frame to what each evaluator will be asked: one :class:`Prepared` per evaluator.

Every run goes through here (``evaluate_dataframe``, ``evaluate_parquet``'s slices, Ray's
blocks), and so do one record (``Evaluator.score``) and the dry run, so all of them read
a frame the same way:

1. the mapping gives one column per canonical field (:mod:`framekit.engine.mapping`: a
   column name, a polars expression, or a callable taking the row as a dict; a callable
   that raises fails only its row);
2. per evaluator, identical rows become one distinct :class:`~framekit._results.Record`
   (:mod:`framekit.engine.records`: ``inverse`` maps each row back to its record,
   ``weight`` counts the rows behind one);
3. a record whose text fields together exceed the judge's character budget is cut to fit
   rather than failed (:mod:`framekit.engine.context_window`);
4. the evaluator prepares each record (:meth:`Evaluator.prepare
   <framekit.evaluators.base.Evaluator.prepare>`): a record it cannot evaluate, or a row
   whose mapping raised, is settled with its error; a record whose verdict needs no judge
   (an empty retrieval) is settled with that verdict. Only the others are asked about.
   Records that the evaluator vouches for from the columns (preparing them surely passes
   and changes no prompt) wait until the cache has been asked: a cached re-run prepares
   only what it sends (:attr:`Record.raw <framekit._results.Record.raw>`). Where it vouches for every row of a plain
   template asked of an LLM judge, the records are not even built
   (:attr:`Prepared.unbuilt`): the cache is read into columns first
   (:func:`framekit.engine.plan.read_cached`), and only the rows it does not answer become
   records.

Problems with the mapping itself (a missing column, an unmapped required field) are
raised here, before any judge call.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import polars as pl

from framekit._errors import RecordError, one_line
from framekit._results import Answered, Record, Verdict
from framekit.engine.context_window import ALWAYS_FITS, fit_to_context, needs_fitting
from framekit.engine.mapping import (
    MappingValue,
    ResolvedFields,
    computed_fields,
    mapping_sources,
)
from framekit.engine.records import (
    grouped_rows,
    most_text,
    ready_record,
    ready_records,
    records_of,
    ungrouped_rows,
)
from framekit.evaluators.base import Evaluator
from framekit.judges.cascade import Cascade
from framekit.judges.judge import Judge
from framekit.judges.local import LocalJudge
from framekit.judges.logprobs import expected_score
from framekit.judges.resolve import JudgeResolver


def embeds_answers(ev: Evaluator) -> bool:
    """Whether ``ev``'s verdict follows embeddings of an LLM judge's answers
    (AnswerRelevancy's regenerated questions)."""
    return type(ev).embedding_texts is not Evaluator.embedding_texts


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
    #: answers as columns (:func:`framekit.engine.plan.read_cached`) and build records only
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
        return (self.judge.embeds_locally and not self.scores_likelihood) or self.embeds_answers

    @property
    def scores_likelihood(self) -> bool:
        """Whether the offline judge reads this evaluator with the likelihood scorer
        (the ``lm`` extra: :meth:`LocalJudge.scores_likelihood
        <framekit.judges.local.LocalJudge.scores_likelihood>`)."""
        return self.judge.scores_likelihood(self.evaluator)

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
        self.records = records_of(distinct, weights, raw=True)

    def ready_waiting(self) -> None:
        """Prepare the records still waiting as the mapping gave them (:attr:`Record.raw`):
        the cache did not answer them, so they are sent (or planned) as prepared records."""
        ev = self.evaluator
        for record in self.records:
            if record.raw and record.fields is not None:
                ready(ev, record)

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
        endpoint = self.judge.chat_endpoint
        assert endpoint is not None, "only an LLM judge's answers are read so"
        out = answered.column(kind, endpoint.model)
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
        return self.judge.confidence_method

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


def resolved_fields(
    frame: pl.DataFrame, mapping: Mapping[str, MappingValue] | None, needed: set[str]
) -> ResolvedFields:
    """The columns of the ``needed`` fields of ``frame`` under ``mapping`` (checked by
    :func:`~framekit.engine.mapping.mapping_sources`, from the column names alone)."""
    sources = mapping_sources(frame.columns, mapping, needed)
    # A field mapped to a column is that column; only an expression or a callable reads rows.
    fields = ResolvedFields(
        {
            name: frame.get_column(source)
            for name, source in sources.items()
            if isinstance(source, str)
        }  # fmt: skip
    )
    computed = {name: source for name, source in sources.items() if not isinstance(source, str)}
    if computed:
        fields.add(computed_fields(frame, computed))
    return fields


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
    fields = resolved_fields(frame, mapping, {f for ev in evaluators for f in ev.fields})
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
            grouped = grouped_rows(fields.columns, names, frame.height, row_errors)
            if grouped is None:
                records, inverse = ungrouped_rows(fields.columns, names, frame.height, row_errors)
            else:
                weights, inverse, distinct = grouped
                vouching = _vouched(ev, judge, distinct.schema)
                if vouching is not None:  # (the evaluator saw names; polars reads the rows)
                    given = distinct.select(vouching.alias("given")).to_series().to_list()
                if given is not None and all(given) and _unbuilt(ev, judge, most):
                    prepared.append(Prepared(ev, judge, [], inverse, distinct, unbuilt=weights))
                    continue
                records = records_of(distinct, weights)
        if needs_fitting(judge, most):  # (a whole column's length said none can be too long)
            await fit_to_context(records, judge, most)
        share = Prepared(ev, judge, records, inverse, distinct)
        with bulk():
            ready_records(ev, records, given)
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
    ready_record(evaluator, record, strict=True)
    return Prepared(evaluator, judge, [record], [0])


def _vouched(
    ev: Evaluator, judge: Judge | LocalJudge | Cascade, schema: pl.Schema
) -> pl.Expr | None:
    """Which distinct rows may wait to be prepared until their answer is not in the cache,
    as an expression over the distinct rows' columns (``schema``): those the evaluator
    vouches for (:meth:`RubricEvaluator.given_rows
    <framekit.evaluators.rubric.RubricEvaluator.given_rows>`), asked of one LLM judge
    whose answers the plan reads in bulk; ``None`` for any other share. Preparing was a
    quarter of a fully cached re-run's time."""
    vouch = getattr(ev, "given_rows", None)
    if vouch is None or judge.chat_endpoint is None or embeds_answers(ev):
        return None
    given: pl.Expr | None = vouch(schema)
    return given


def _unbuilt(ev: Evaluator, judge: Judge | LocalJudge | Cascade, most: int | None) -> bool:
    """Whether a share whose every distinct row is vouched for (:func:`_vouched`) may
    keep its records unbuilt (:attr:`Prepared.unbuilt`): none can need cutting to the
    judge's window (no window set, little text), and the evaluator's prompts are a plain
    template polars renders, read by label (:func:`framekit.engine.plan.read_cached` checks
    the rest)."""
    if most is None or most > ALWAYS_FITS:
        return False
    endpoint = judge.chat_endpoint
    if endpoint is None or endpoint.context_window:
        return False
    return all(
        callable(getattr(ev, hook, None))
        for hook in ("prompt_renderer", "prompt_column", "plain_verdicts")
    )


def ready(ev: Evaluator, record: Record) -> None:
    """Prepare ``record`` if it still holds the mapping's values (:attr:`Record.raw`)."""
    if record.raw:
        record.raw = False
        ready_record(ev, record)
        assert record.fields is not None, f"{type(ev).__name__} vouched for a record it settles"
