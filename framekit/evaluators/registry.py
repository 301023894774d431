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
#: ``-e`` names of the built-in pairwise evaluators (``framekit pairwise``): they judge two
#: candidates at once, so ``framekit evaluate`` and the demo's pointwise runs leave them out.
PAIRWISE_EVALUATORS = {"preference": "Preference"}


def evaluator_by_name(name: str) -> Evaluator:
    """A default-configured built-in evaluator from its ``-e`` name.

    Examples
    --------
    >>> evaluator_by_name("retrieval_relevance").name
    'retrieval_relevance'
    """
    import framekit.evaluators as evaluators

    key = name.strip().lower().replace("-", "_")
    if key in PAIRWISE_EVALUATORS:
        raise InputError(
            f"{name!r} compares two answers at once: use it with fk.evaluate_pairwise or "
            "`framekit pairwise`"
        )
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


def pairwise_evaluators_by_names(values: Sequence[str]) -> list[Evaluator]:
    """Pairwise evaluators from comma-separated lists of names; none given: Preference.

    Examples
    --------
    >>> [ev.name for ev in pairwise_evaluators_by_names([])]
    ['preference']
    """
    import framekit.evaluators as evaluators

    names = [n.strip().lower().replace("-", "_") for v in values for n in v.split(",")]
    names = [n for n in names if n] or ["preference"]
    out = []
    for key in names:
        if key not in PAIRWISE_EVALUATORS:
            hint = (
                " It scores one answer at a time: use `framekit evaluate`."
                if key in BUILTIN_EVALUATORS
                else did_you_mean(key, PAIRWISE_EVALUATORS)
            )
            raise InputError(
                f"unknown pairwise evaluator {key!r}.{hint} Choose from "
                f"{', '.join(PAIRWISE_EVALUATORS)}"
            )
        out.append(getattr(evaluators, PAIRWISE_EVALUATORS[key])())
    return out


def available_evaluators() -> tuple[list[Evaluator], list[str]]:
    """The built-in evaluators this installation has, and the names of those it lacks."""
    found, missing = [], []
    for name in BUILTIN_EVALUATORS:
        try:
            found.append(evaluator_by_name(name))
        except InputError:
            missing.append(name)
    return found, missing
