"""Who scores one record: how ``Evaluator.score`` reaches the engine without importing it.

``Evaluator.score`` (a public convenience for one record) runs the engine, which sits
above the evaluators, so the evaluator must not import it. It calls the scorer installed
here instead: a function that the package installs when it is imported (the root
``framekit/__init__.py``, the one module that knows every layer, may import downward),
and that scores the record through the entry layer
(:func:`framekit.evaluate.ascore_record`). Every import points down, none is exempt
from the import contract, and nothing is looked up by name. Kept apart and free of
imports so that ``import framekit`` stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Mapping

    from framekit._score import Score


class RecordScorer:
    """The signature of the installed scorer (a protocol, for readers and type checkers)."""

    def __call__(
        self, evaluator: Any, fields: Mapping[str, Any], *, judge: Any, cache: Any
    ) -> Awaitable[Score]:
        raise NotImplementedError


_installed: list[Any] = []


def install(scorer: Any) -> None:
    """Make ``scorer`` the one ``Evaluator.score`` calls (done once, by the package)."""
    _installed[:] = [scorer]


def installed() -> RecordScorer:
    """The installed scorer."""
    if not _installed:  # pragma: no cover - the package installs it when imported
        raise RuntimeError("framekit's record scorer is not installed: import framekit")
    scorer: RecordScorer = _installed[0]
    return scorer
