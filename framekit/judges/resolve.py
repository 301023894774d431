"""How the ``judge=`` argument becomes a judge: a model string, ``"local"``, a judge, or
``None`` (``$FRAMEKIT_JUDGE``, else the offline judge); and each evaluator's judge in a run."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from framekit._errors import JudgeSpecError
from framekit.judges.decoding import with_decoding
from framekit.judges.judge import Judge, JudgeLike

if TYPE_CHECKING:
    from framekit.judges.local import LocalJudge

#: Where the default judge's model string is read (``judge=None``).
ENV_JUDGE = "FRAMEKIT_JUDGE"

_announced = False


def resolve_judge(judge: JudgeLike | None) -> Judge | LocalJudge:
    """``None`` -> ``$FRAMEKIT_JUDGE`` or the offline judge (announced once); a model
    string -> :class:`Judge`; ``"local"`` -> :class:`~framekit.LocalJudge`."""
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


class JudgeResolver:
    """The judge of each evaluator of a run (its own ``judge=``, else the run's), resolved
    once per distinct spec, so evaluators sharing a judge share its limits and worker
    processes. An evaluator with decoding options (``temperature=``...) gets a copy of
    that judge with them set, shared by the evaluators asking for the same options."""

    def __init__(self, default: JudgeLike | None) -> None:
        self.default = default
        self.judges: dict[Any, Judge | LocalJudge] = {}

    def __call__(
        self, own: JudgeLike | None, options: Mapping[str, Any] | None = None
    ) -> Judge | LocalJudge:
        """The judge of an evaluator whose own ``judge=`` is ``own`` and whose decoding
        options are ``options``."""
        spec = own if own is not None else self.default
        key = spec if isinstance(spec, str) or spec is None else id(spec)
        if key not in self.judges:
            self.judges[key] = resolve_judge(spec)
        if not options:
            return self.judges[key]
        derived = (key, repr(sorted(options.items())))
        if derived not in self.judges:
            self.judges[derived] = with_decoding(self.judges[key], options)
        return self.judges[derived]
