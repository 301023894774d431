"""The result of one evaluator on one record, and the pass rule."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Direction = Literal["maximize", "minimize"]


def passes(value: Any, threshold: float, direction: Direction) -> Any:
    """The pass rule: ``value >= threshold`` (``<=`` when minimizing), for one score or a
    whole column (a polars Series or expression: null stays null).

    Examples
    --------
    >>> passes(0.75, 0.5, "maximize"), passes(0.75, 0.5, "minimize")
    (True, False)
    """
    if direction == "minimize":
        return value <= threshold
    return value >= threshold


@dataclass(frozen=True)
class Score:
    """One evaluator's verdict on one record.

    ``value`` is in [0, 1] and is ``None`` when the evaluation failed; ``error`` then holds a
    one-line reason. A failure is never reported as a score of 0. ``confidence`` is the
    judge's probability of its verdict, in [0, 1] (from token logprobs, the offline judge's
    calibration, or the agreement of several samples); ``None`` when the judge gives none.

    Examples
    --------
    >>> s = Score(name="coherence", value=0.75, label="Generally Yes", explanation="ok",
    ...           threshold=0.5)
    >>> s.passed
    True
    >>> Score(name="coherence", value=None, error="judge refused").passed is None
    True
    >>> s.score, s.reasoning  # read-only aliases, as Phoenix and Fiddler name them
    (0.75, 'ok')
    """

    name: str
    value: float | None
    label: str | None = None
    explanation: str | None = None
    threshold: float = 0.5
    direction: Direction = "maximize"
    metadata: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    confidence: float | None = None

    @property
    def passed(self) -> bool | None:
        """``value >= threshold`` (``<=`` when minimizing); ``None`` when there is no value."""
        if self.value is None:
            return None
        return bool(passes(self.value, self.threshold, self.direction))

    @property
    def score(self) -> float | None:
        """Alias of :attr:`value` (Phoenix's name for it); read-only."""
        return self.value

    @property
    def reasoning(self) -> str | None:
        """Alias of :attr:`explanation` (Fiddler's name for it); read-only."""
        return self.explanation
