"""The shape every evaluator shares.

An evaluator turns one record (a dict of canonical fields: ``input``, ``output``,
``context``, ``history``, ``reference``) into a :class:`~framekit.Score`. It never calls
a judge itself: it *describes* the work (a chat request, texts to embed) and *interprets* the answers,
so that the engine can deduplicate, cache, pace and retry every call for a whole frame.
"""

from __future__ import annotations

import inspect
import re
import warnings
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from numbers import Real
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeAlias, TypedDict

from framekit._errors import InputError, JudgeConfigurationError, MappingError, RecordError
from framekit._record_scorer import installed as record_scorer
from framekit._results import Verdict
from framekit._score import Direction, Score
from framekit.judges.decoding import check_decoding

if TYPE_CHECKING:
    import numpy as np

    from framekit.engine.cache import Cache
    from framekit.judges.resolve import JudgeLike
    from framekit.judges.transport import EmbeddingBackend
from framekit.judges.request import ChatRequest

#: A record's fields, or a judge's parsed answer: a field's or a property's name -> value.
Fields: TypeAlias = Mapping[str, Any]
#: The embeddings an evaluator asked for, one per text it named (``None``: it asked none).
Vectors: TypeAlias = "list[np.ndarray] | None"

#: ``reference`` is the text a response or the documents are checked against: the
#: reference (gold) answer for ContextRecall, as Ragas names it, and whatever a copied
#: Phoenix template's ``{reference}`` shows (Phoenix's "reference text", often the
#: retrieved document: map that column to ``reference`` and the template runs as
#: written). It was once an alias of ``context``; one name now means one field.
FIELDS = ("input", "output", "context", "history", "reference")

#: How a verdict's score is read: the answered label's score, or the probability-weighted
#: score over the rubric (G-Eval's), when the judge's label probabilities are known.
Scoring = Literal["label", "expected"]
SCORINGS = ("label", "expected")

#: Field names other projects use, accepted in ``mapping=`` and ``score(...)``: Fiddler's
#: ContextRelevance reads ``user_query`` and ``retrieved_documents``; Phoenix's templates
#: say ``query``.
FIELD_ALIASES = {
    "user_query": "input",
    "query": "input",
    "retrieved_documents": "context",
}

#: Aliases unambiguous enough to pick a column by its name when no mapping is given.
#: ("query" often names a search string: map it.)
COLUMN_ALIASES = ("user_query", "retrieved_documents")


def canonical_fields(fields: Mapping[str, Any], owner: str = "score") -> dict[str, Any]:
    """``fields`` with alias names (:data:`FIELD_ALIASES`) renamed to canonical ones.

    Examples
    --------
    >>> canonical_fields({"user_query": "q", "retrieved_documents": ["d"]})
    {'input': 'q', 'context': ['d']}
    """
    out: dict[str, Any] = {}
    given_as: dict[str, str] = {}
    for key, value in fields.items():
        canonical = FIELD_ALIASES.get(key, key)
        if canonical in out:
            raise InputError(
                f"{owner}: field {canonical!r} is given twice, as {given_as[canonical]!r} "
                f"and as {key!r}; give it once"
            )
        out[canonical], given_as[canonical] = value, key
    return out


class OptionsAfterThreshold(TypedDict, total=False):
    """:class:`EvaluatorOptions` but ``threshold``, for an evaluator that takes its
    threshold first (``AnswerRelevancy(0.8)``)."""

    name: str | None
    judge: JudgeLike | None
    direction: Direction | None
    scoring: Scoring
    temperature: float
    max_tokens: int
    top_p: float
    seed: int
    stop: str | list[str]
    presence_penalty: float
    frequency_penalty: float
    reasoning_effort: str


class EvaluatorOptions(OptionsAfterThreshold, total=False):
    """The keywords every evaluator takes besides its own, declared once: each
    evaluator's constructor passes them on as one value (``**options``) to
    :class:`Evaluator`, which reads and checks them.

    ``name`` (default: the class name in snake_case), ``threshold`` (the pass mark in
    [0, 1]), ``judge`` (this evaluator's judge: a model string, a judge, ``"local"``; the
    run's ``judge=`` otherwise), ``direction`` (``"maximize"`` or ``"minimize"``),
    ``scoring`` (``"label"`` or ``"expected"``) and the decoding options its requests
    are sent with, over its judge's (``temperature``, ``max_tokens``, ``top_p``,
    ``seed``, ``stop``, ``presence_penalty``, ``frequency_penalty``,
    ``reasoning_effort``; kept as ``evaluator.invocation_parameters``).
    ``llm=`` and ``model=`` (Phoenix's, Strands' and Fiddler's names for the judge) still
    work, with a :class:`DeprecationWarning`.
    """

    threshold: float | None


#: The judge's names in other projects: Phoenix's ``llm=``, Strands' and Fiddler's
#: ``model=``. Accepted, with a DeprecationWarning: ``judge=`` is the one spelling.
JUDGE_ALIASES = ("llm", "model")


def pick_judge(owner: str, judge: JudgeLike | None, aliases: Mapping[str, Any]) -> JudgeLike | None:
    """The one judge given as ``judge=``, or under an old name (:data:`JUDGE_ALIASES`,
    deprecated). Two of them at once is an error."""
    given = {"judge": judge} if judge is not None else {}
    for alias, value in aliases.items():
        warnings.warn(
            f"{owner}: {alias}= is deprecated; pass the judge as judge=",
            DeprecationWarning,
            stacklevel=_caller_level(),
        )
        if value is not None:
            given[alias] = value
    if len(given) > 1:
        raise InputError(
            f"{owner}: give the judge once; got {' and '.join(f'{k}=' for k in given)} "
            "(llm= and model= are aliases of judge=)"
        )
    return next(iter(given.values()), None)


def _caller_level() -> int:
    """The ``stacklevel`` of a warning about an evaluator's constructor call: the first
    frame outside framekit's evaluators (a subclass's ``__init__`` calls its base's)."""
    frame, level = inspect.currentframe(), 1
    here = Path(__file__).parent
    while frame is not None and Path(frame.f_code.co_filename).parent == here:
        frame, level = frame.f_back, level + 1
    return level - 1  # counted from the caller of warnings.warn, one frame up


def snake_case(name: str) -> str:
    """``ResponseRelevance`` -> ``response_relevance``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class Evaluator(ABC):
    """Base class of every evaluator.

    Subclasses declare ``required_fields`` / ``optional_fields`` and implement the two
    judge paths: :meth:`build_request` + :meth:`verdict` for an LLM judge, and
    :meth:`local_texts` + :meth:`local_verdict` for the offline judge.

    ``scoring="expected"`` scores a row by the judge's probability of each rubric label
    (sum of p(label) x score(label), as G-Eval does) where the judge reports them (token
    logprobs, or the agreement of several samples); a row without them keeps its label's
    score, and the run record counts those rows. The default, ``"label"``, is the
    answered label's score.
    """

    required_fields: ClassVar[tuple[str, ...]] = ()
    optional_fields: ClassVar[tuple[str, ...]] = ()
    default_threshold: ClassVar[float] = 0.5
    direction: Direction = "maximize"
    version: str = "v0"
    #: Whether verdicts carry ``details`` (a ``<name>_details`` column with details=True).
    has_details: ClassVar[bool] = False

    def __init__(
        self,
        *,
        name: str | None = None,
        threshold: float | None = None,
        judge: JudgeLike | None = None,
        direction: Direction | None = None,
        scoring: Scoring = "label",
        **decoding: Any,
    ) -> None:
        self.name = name or snake_case(type(self).__name__)
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", self.name):
            raise InputError(f"evaluator name {self.name!r} must be a valid column prefix")
        if isinstance(threshold, bool) or not (threshold is None or isinstance(threshold, Real)):
            raise InputError(
                f"{self.name}: threshold must be a number in [0, 1], got {threshold!r}"
            )
        self.threshold = self.default_threshold if threshold is None else float(threshold)
        if not 0.0 <= self.threshold <= 1.0:
            raise InputError(f"{self.name}: threshold must be in [0, 1], got {threshold}")
        aliases = {a: decoding.pop(a) for a in JUDGE_ALIASES if a in decoding}
        self.judge = pick_judge(self.name, judge, aliases)
        if direction is not None:
            if direction not in ("maximize", "minimize"):
                raise InputError(f"{self.name}: direction must be 'maximize' or 'minimize'")
            self.direction = direction
        #: Decoding options for this evaluator's requests (``temperature=``,
        #: ``max_tokens=``..., Phoenix's ``invocation_parameters``): they override the
        #: judge's, and the run uses a copy of the judge with them set.
        self.invocation_parameters: dict[str, Any] = check_decoding(self.name, decoding)
        if scoring not in SCORINGS:
            raise InputError(f"{self.name}: scoring must be 'label' or 'expected', got {scoring!r}")
        self.scoring: Scoring = scoring

    @property
    def judge_options(self) -> dict[str, Any]:
        """:attr:`invocation_parameters` under the name the engine reads."""
        return self.invocation_parameters

    # -- fields ---------------------------------------------------------------------
    @property
    def fields(self) -> tuple[str, ...]:
        """Every field this evaluator reads (required first)."""
        return self.required_fields + self.optional_fields

    def check_fields(self, available: Collection[str], columns: Collection[str]) -> None:
        """Raise :class:`MappingError` when a required field has no source."""
        missing = [f for f in self.required_fields if f not in available]
        if missing and missing[0] in columns:
            # mapping={} (or one that leaves the field out) with a column of that name.
            raise MappingError(
                f"evaluator {self.name!r} needs field {missing[0]!r}, which the mapping "
                f"leaves out; a column {missing[0]!r} exists: map it with "
                f"mapping={{{missing[0]!r}: {missing[0]!r}}}, or leave out mapping to read "
                "the columns named like the fields"
            )
        if missing:
            raise MappingError(
                f"evaluator {self.name!r} needs field {missing[0]!r}, which is not mapped; "
                f"map it with mapping={{{missing[0]!r}: <column>}}. "
                f"Available columns: {', '.join(map(repr, columns)) or '(none)'}"
            )

    def prepare(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        """Check and normalise one record; raise :class:`RecordError` to fail that row."""
        record = {f: fields.get(f) for f in self.fields}
        for f in self.required_fields:
            if record[f] is None:
                raise RecordError(f"field {f!r} is null")
        return record

    def known_verdict(self, record: Mapping[str, Any]) -> Verdict | None:
        """A verdict that needs no judge call (an empty retrieval), else ``None``.

        The engine asks this after :meth:`prepare`: a record with a known verdict is
        scored at once, by every kind of judge alike, and never sent or cached.
        """
        return None

    # -- LLM judge path -------------------------------------------------------------
    @abstractmethod
    def build_request(self, record: Mapping[str, Any]) -> ChatRequest:
        """The chat request that asks an LLM judge about one prepared record."""

    def cache_namespace(self) -> str:
        """Identifies the evaluator's template and version in cache keys."""
        return f"{type(self).__name__}:{self.version}"

    def embedding_texts(self, record: Mapping[str, Any], answer: Mapping[str, Any]) -> list[str]:
        """Texts to embed after the judge answered (none for most evaluators)."""
        return []

    def embedding_backend(self, judge: JudgeLike) -> EmbeddingBackend:
        """The backend that embeds :meth:`embedding_texts` for an LLM judge's answers."""
        raise NotImplementedError(f"{type(self).__name__} embeds nothing")

    @abstractmethod
    def verdict(self, record: Fields, answer: Fields, vectors: Vectors = None) -> Verdict:
        """Read the judge's parsed answer (and any embeddings) into a verdict."""

    def label_scores(self) -> Mapping[str, float]:
        """Label -> score of the rubric (empty: the evaluator has no labels)."""
        return {}

    # -- offline judge path ---------------------------------------------------------
    def local_texts(self, record: Mapping[str, Any]) -> list[str]:
        """Texts the offline judge must embed for this record."""
        raise self._no_offline_method()

    def local_verdict(self, record: Mapping[str, Any], vectors: list[np.ndarray]) -> Verdict:
        """The offline verdict from the embeddings of :meth:`local_texts`."""
        raise self._no_offline_method()

    def _no_offline_method(self) -> JudgeConfigurationError:
        return JudgeConfigurationError(
            f"{type(self).__name__} {self.name!r} has no offline method: the local judge "
            "scores the built-in evaluators only (embedding similarity); give this "
            "evaluator an LLM judge (judge='openai/gpt-4o-mini', or any OpenAI-compatible "
            "endpoint with api_base=)"
        )

    # -- one record -----------------------------------------------------------------
    def make_score(
        self,
        verdict: Verdict | None,
        error: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Score:
        return Score(
            name=self.name,
            value=None if verdict is None else verdict.value,
            label=None if verdict is None else verdict.label,
            explanation=None if verdict is None else verdict.explanation,
            threshold=self.threshold,
            direction=self.direction,
            metadata=metadata or {},
            error=error,
            confidence=None if verdict is None else verdict.confidence,
        )

    async def ascore(
        self,
        *,
        judge: JudgeLike | None = None,
        cache: Cache | str | bool | None = None,
        **fields: Any,
    ) -> Score:
        """Score one record; awaitable form of :meth:`score`."""
        # The engine sits above the evaluators: it is reached through the scorer the
        # package installs (see framekit._record_scorer), never imported from here.
        scorer = record_scorer()
        return await scorer(self, canonical_fields(fields, self.name), judge=judge, cache=cache)

    def score(
        self,
        *,
        judge: JudgeLike | None = None,
        cache: Cache | str | bool | None = None,
        **fields: Any,
    ) -> Score:
        """Score one record given as keyword fields (``input=..., output=...``).

        A record that cannot be evaluated (a null or empty required field) raises
        ``ValueError``; a failed judge call returns a :class:`Score` whose ``error`` says why.
        """
        from framekit._aio import run_sync

        return run_sync(self.ascore(judge=judge, cache=cache, **fields))

    def describe(self) -> str:
        """Fields, scale, threshold and template version, in a few lines."""
        req = ", ".join(self.required_fields) or "-"
        opt = ", ".join(self.optional_fields) or "-"
        return (
            f"{type(self).__name__} (name={self.name!r}, version={self.version})\n"
            f"  fields: required {req}; optional {opt}\n"
            f"  scale: {self.scale_text()}\n"
            f"  passes when score {'>=' if self.direction == 'maximize' else '<='} "
            f"{self.threshold}"
        )

    def scale_text(self) -> str:
        return "[0, 1]"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, threshold={self.threshold})"


def check_evaluators(evaluators: Any) -> list[Evaluator]:
    """``evaluators`` as a non-empty list of evaluators with distinct names, or InputError."""
    if isinstance(evaluators, Evaluator):
        evaluators = [evaluators]
    evaluators = list(evaluators or [])
    if not evaluators:
        raise InputError("evaluators is empty: pass at least one evaluator")
    for ev in evaluators:
        if not isinstance(ev, Evaluator):
            raise InputError(
                f"{ev!r} is not an evaluator; pass instances such as RetrievalRelevance()"
            )
    names = [ev.name for ev in evaluators]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(f"two evaluators are named {dupes[0]!r}; give one a different name=...")
    return evaluators
