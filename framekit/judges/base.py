"""What evaluators ask of a judge, and how the ``judge=`` argument is resolved."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from framekit.judges.litellm_judge import Judge
    from framekit.judges.local import LocalJudge

JudgeLike = Union["Judge", "LocalJudge", str]

ENV_JUDGE = "FRAMEKIT_JUDGE"


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


_announced = False


def resolve_judge(judge: JudgeLike | None) -> Judge | LocalJudge:
    """``None`` -> ``$FRAMEKIT_JUDGE`` or the offline judge (announced once); a model
    string -> :class:`Judge`; ``"local"`` -> :class:`LocalJudge`."""
    from framekit.judges.litellm_judge import Judge
    from framekit.judges.local import LocalJudge

    global _announced
    if judge is None:
        env = os.environ.get(ENV_JUDGE, "").strip()
        if env:
            judge = env
        else:
            if not _announced:
                print(
                    "framekit: no judge given and FRAMEKIT_JUDGE unset; using the offline "
                    "local judge (embedding similarity, no API calls)",
                    file=sys.stderr,
                )
                _announced = True
            return LocalJudge()
    if isinstance(judge, str):
        if judge.strip().lower() == "local":
            return LocalJudge()
        return Judge(judge)
    if isinstance(judge, (Judge, LocalJudge)):
        return judge
    raise TypeError(f"judge must be a model string, 'local', fk.Judge or None, not {judge!r}")
