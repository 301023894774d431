"""``assert_meets``: one record, one evaluator, a plain ``assert`` for test suites.

The counterpart of the Java evaluator's ``meetsMetric`` in JUnit: score a record and fail
the test with the judge's own words when the score is below the bar.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from framekit._score import Score
    from framekit.evaluators.base import Evaluator
    from framekit.judges.resolve import JudgeLike


def assert_meets(
    evaluator: Evaluator,
    threshold: float | None = None,
    *,
    judge: JudgeLike | None = None,
    cache: Any = False,
    **fields: Any,
) -> Score:
    """Score one record and raise ``AssertionError`` unless it meets the threshold.

    Parameters
    ----------
    evaluator
        Any framekit evaluator, e.g. ``ResponseRelevance()``.
    threshold
        The bar (default: the evaluator's own ``threshold``); a minimizing evaluator must
        stay at or below it.
    judge
        The judge (default: the evaluator's judge, else ``$FRAMEKIT_JUDGE``, else the
        offline judge). The ``framekit_judge`` pytest fixture supplies one.
    cache
        As in :meth:`Evaluator.score`; off by default so a test sees a fresh verdict.
    **fields
        The record: ``input=``, ``output=``, ``context=``, ``history=``.

    Returns
    -------
    Score
        The score, for further checks.

    Raises
    ------
    AssertionError
        The score is below the bar, or the evaluation failed; the message shows the
        score, label, threshold and the judge's explanation (or the error).

    Examples
    --------
    >>> from framekit.evaluators import ResponseRelevance
    >>> assert_meets(ResponseRelevance(), input="What is the capital of France?",
    ...              output="Paris is the capital of France.")  # doctest: +SKIP
    """
    bar = evaluator.threshold if threshold is None else float(threshold)
    score = evaluator.score(judge=judge or evaluator.judge, cache=cache, **fields)
    if score.value is None:
        raise AssertionError(f"{evaluator.name}: evaluation failed: {score.error}")
    maximize = score.direction != "minimize"
    if (score.value >= bar) if maximize else (score.value <= bar):
        return score
    relation = "below" if maximize else "above"
    raise AssertionError(
        f"{evaluator.name}: score {score.value:.3f} ({score.label or 'no label'}) is "
        f"{relation} the threshold {bar:g}\n  judge's explanation: {score.explanation}"
    )
