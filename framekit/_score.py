"""The result of one evaluator on one record, the pass rule, and who scores a record.

``Evaluator.score`` (a public convenience for one record) runs the engine, which sits
above the evaluators: the evaluator must not import it. It calls the *record scorer*
installed here instead, a function the package installs when it is imported (the root
``framekit/__init__.py``, the one module that knows every layer, may import downward),
which scores the record through the entry layer (:func:`framekit.evaluate.ascore_record`).
Every import points down, and nothing is looked up by name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

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
    one-line reason. A failure is never reported as a score of 0.

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


class RecordScorer(Protocol):
    """Scores one record of an evaluator, as ``Evaluator.ascore`` asks."""

    def __call__(
        self, evaluator: Any, fields: Mapping[str, Any], *, judge: Any, cache: Any
    ) -> Awaitable[Score]: ...


_scorer: list[RecordScorer] = []


def install_record_scorer(scorer: RecordScorer) -> None:
    """Make ``scorer`` the one ``Evaluator.score`` calls (done once, by the package)."""
    _scorer[:] = [scorer]


def record_scorer() -> RecordScorer:
    """The installed record scorer."""
    if not _scorer:  # pragma: no cover - the package installs it when imported
        raise RuntimeError("framekit's record scorer is not installed: import framekit")
    return _scorer[0]
