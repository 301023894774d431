"""The built-in evaluators by name: what ``framekit evaluate -e NAMES`` and the demo use."""

from __future__ import annotations

from collections.abc import Sequence

from framekit._errors import InputError, did_you_mean
from framekit.evaluators.base import Evaluator

#: ``-e`` names of the built-in evaluators -> their class in ``framekit.evaluators``.
BUILTIN_EVALUATORS = {
    "response_relevance": "ResponseRelevance",
    "coherence": "Coherence",
    "answer_relevancy": "AnswerRelevancy",
    "context_relevance": "ContextRelevance",
    "retrieval_relevance": "RetrievalRelevance",
    "groundedness": "Groundedness",
    "context_recall": "ContextRecall",
}


def evaluator_by_name(name: str) -> Evaluator:
    """A default-configured built-in evaluator from its ``-e`` name.

    Examples
    --------
    >>> evaluator_by_name("retrieval_relevance").name
    'retrieval_relevance'
    """
    import framekit.evaluators as evaluators

    key = name.strip().lower().replace("-", "_")
    if key not in BUILTIN_EVALUATORS:
        raise InputError(
            f"unknown evaluator {name!r}.{did_you_mean(key, BUILTIN_EVALUATORS)} "
            f"Choose from {', '.join(BUILTIN_EVALUATORS)}"
        )
    cls = getattr(evaluators, BUILTIN_EVALUATORS[key], None)
    if cls is None:
        raise InputError(f"evaluator {name!r} is not available in this version of framekit")
    return cls()  # type: ignore[no-any-return]


def evaluators_by_names(values: Sequence[str]) -> list[Evaluator]:
    """Evaluators from comma-separated lists of names (``["coherence,retrieval_relevance"]``).

    Examples
    --------
    >>> [ev.name for ev in evaluators_by_names(["coherence, retrieval_relevance"])]
    ['coherence', 'retrieval_relevance']
    """
    names = [n for value in values for n in value.split(",") if n.strip()]
    if not names:
        raise InputError("no evaluator given; use -e, e.g. -e response_relevance,coherence")
    return [evaluator_by_name(n) for n in names]


def available_evaluators() -> tuple[list[Evaluator], list[str]]:
    """The built-in evaluators this installation has, and the names of those it lacks."""
    found, missing = [], []
    for name in BUILTIN_EVALUATORS:
        try:
            found.append(evaluator_by_name(name))
        except InputError:
            missing.append(name)
    return found, missing
