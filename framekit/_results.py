"""The result model: what a judge answered and what an evaluator read from it.

One row's way through a run ends in these values, and every layer that handles a row
holds them, so they sit below all of those layers: the evaluators read an answer into a
:class:`Verdict`; the engine sends or looks up a request and gets an :class:`Outcome`
(the answer, or its error, and what it cost); a :class:`Record` is one distinct row of
one evaluator and what became of it; :class:`Answered` holds cached answers read as
columns rather than as records. None of them knows a judge, an evaluator or the cache.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: The progress display's counter: ``(rows, "done" | "cached" | "failed")``.
ProgressFn = Callable[[int, str], None]


@dataclass(frozen=True)
class Verdict:
    """An evaluator's reading of the judge's answer for one record; ``confidence`` is the
    judge's probability of it (``None``: the judge gives none).

    ``details`` holds structured findings behind the verdict (Groundedness's claim list),
    JSON-ready; it reaches ``Score.metadata["details"]`` and the ``<name>_details`` column
    of ``details=True``.
    """

    value: float
    label: str | None
    explanation: str | None
    confidence: float | None = None
    details: dict[str, Any] | None = None


@dataclass
class Outcome:
    """The result of one unique request: its answer or its error, and what it cost.

    ``probabilities`` are the rubric labels' probabilities read from the answer's token
    logprobs (``None``: the judge gave none); they are cached with the answer, so a
    cached re-run has the same confidence.
    """

    answer: dict[str, Any] | None
    error: str | None
    tokens: int = 0
    cost_usd: float | None = None
    latency_s: float | None = None
    cached: bool = False
    probabilities: dict[str, float] | None = None

    @classmethod
    def from_entry(cls, entry: Any) -> Outcome | None:
        """The outcome of a request answered from the cache (free, instant): the one
        place a cached outcome is made, for the planner's lookup, the executor's look
        just before sending, and another run's answer to the same request. ``None`` for
        an entry that is not one of ours (a foreign value under the key): a miss."""
        if not isinstance(entry, dict) or not isinstance(entry.get("answer"), dict):
            return None
        return cls(
            entry["answer"],
            None,
            entry.get("tokens", 0),
            entry.get("cost_usd"),
            0.0,
            True,
            entry.get("probabilities"),
        )

    def entry(self) -> dict[str, Any]:
        """What the cache keeps of an answered request."""
        kept = {"answer": self.answer, "tokens": self.tokens, "cost_usd": self.cost_usd}
        if self.probabilities is not None:
            kept["probabilities"] = self.probabilities
        return kept


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
    #: be looked up first; :func:`~framekit.engine.prepare.ready` prepares it before
    #: anything else reads it.
    raw: bool = False
    #: Its request's cache key, where it was looked up before the plan and not read
    #: there (:func:`framekit.engine.plan.read_cached`: no entry, or one handed to the plan
    #: to read the general way): the plan keys it so and does not ask the cache again.
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

    def start_stages(self) -> None:
        """Asked stage by stage (a cascade): its costs are running totals, nothing spent
        yet, and cached until a stage pays (:meth:`add_stage`)."""
        self.tokens, self.cost_usd, self.latency_s, self.cached = 0, None, 0.0, True

    def add_stage(self, stage: Record) -> None:
        """What ``stage`` (this record asked of one stage's judge) cost, added to the
        running totals: an escalated row is paid at every stage, and cached only when
        every stage answered from the cache."""
        self.tokens = (self.tokens or 0) + (stage.tokens or 0)
        if stage.cost_usd is not None:
            self.cost_usd = (self.cost_usd or 0.0) + stage.cost_usd
        self.latency_s = (self.latency_s or 0.0) + (stage.latency_s or 0.0)
        self.cached = bool(self.cached) and bool(stage.cached)

    def take(self, stage: Record, judge: str) -> None:
        """``stage``'s result (its verdict or its error) becomes this record's, decided by
        ``judge`` (named only for a verdict); nothing more to ask."""
        self.value, self.label, self.explanation = stage.value, stage.label, stage.explanation
        self.confidence, self.weighted = stage.confidence, stage.weighted
        self.error = stage.error
        self.judge = judge if stage.error is None else None
        self.fields = self.answer = None

    def report(self, progress: ProgressFn) -> None:
        """Count this record's rows on the progress display, once, as what it came to."""
        if not self.reported:
            self.reported = True
            kind = "failed" if self.error else "cached" if self.cached else "done"
            progress(self.weight, kind)


@dataclass(slots=True, eq=False)
class Answered:
    """Cached answers of a share's distinct rows, read as columns rather than into a
    :class:`Record` each (:func:`framekit.engine.plan.read_cached`): entry ``i`` is distinct
    row ``i``'s result; ``None`` in ``label`` marks a row answered otherwise, whose record
    holds its result (:attr:`Prepared.record_rows
    <framekit.engine.prepare.Prepared.record_rows>`). Every answered row was read from the
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
