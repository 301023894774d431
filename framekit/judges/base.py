"""What evaluators ask of a judge: one structured chat request (``resolve_judge`` is in
``framekit.judges.resolve``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from framekit.judges.litellm_judge import Judge
    from framekit.judges.local import LocalJudge

JudgeLike = Union["Judge", "LocalJudge", str]


@dataclass(frozen=True)
class ChatRequest:
    """One structured judge request built by an evaluator for one record.

    ``schema`` is the JSON schema of the answer object. ``label_field`` and ``choices``
    name the property that must hold one of the rubric's labels: an answer outside them
    is re-asked, then recorded as that row's error.
    """

    messages: list[dict[str, Any]]
    schema_name: str
    schema: dict[str, Any]
    label_field: str | None = "label"
    choices: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
