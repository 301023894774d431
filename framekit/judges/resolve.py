"""How the ``judge=`` argument becomes a judge: a model string, ``"local"``, or ``None``."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from framekit._errors import JudgeSpecError
from framekit.judges.base import JudgeLike

if TYPE_CHECKING:
    from framekit.judges.litellm_judge import Judge
    from framekit.judges.local import LocalJudge

ENV_JUDGE = "FRAMEKIT_JUDGE"

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
    raise JudgeSpecError(f"judge must be a model string, 'local', fk.Judge or None, not {judge!r}")
