"""How the ``judge=`` argument becomes a judge: a model string, ``"local"``, a judge, a
:class:`~framekit.Cascade` of judges, or ``None`` (``$FRAMEKIT_JUDGE``, else the offline
judge); and each evaluator's judge in a run."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Union

from framekit._errors import JudgeSpecError
from framekit.judges.cascade import Cascade, judge_of
from framekit.judges.decoding import with_decoding
from framekit.judges.judge import Judge

if TYPE_CHECKING:
    from framekit.judges.local import LocalJudge

#: What ``judge=`` takes: a judge of any kind, or a model string (``"local"`` for the
#: offline judge).
JudgeLike = Union[Judge, "LocalJudge", Cascade, str]

#: Where the default judge's model string is read (``judge=None``).
ENV_JUDGE = "FRAMEKIT_JUDGE"

_announced = False


def resolve_judge(judge: JudgeLike | None) -> Judge | LocalJudge | Cascade:
    """``None`` -> ``$FRAMEKIT_JUDGE`` or the offline judge (announced once); a model
    string -> :class:`Judge`; ``"local"`` -> :class:`~framekit.LocalJudge`; a judge or a
    :class:`~framekit.Cascade` as it is."""
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
    if isinstance(judge, Cascade):
        return judge
    if isinstance(judge, (str, Judge, LocalJudge)):
        return judge_of(judge)
    raise JudgeSpecError(
        f"judge must be a model string, 'local', fk.Judge, fk.Cascade or None, not {judge!r}"
    )


class JudgeResolver:
    """The judge of each evaluator of a run (its own ``judge=``, else the run's), resolved
    once per distinct spec, so evaluators sharing a judge share its limits and worker
    processes. An evaluator with decoding options (``temperature=``...) gets a copy of
    that judge with them set, shared by the evaluators asking for the same options."""

    def __init__(self, default: JudgeLike | None) -> None:
        self.default = default
        self.judges: dict[Any, Judge | LocalJudge | Cascade] = {}

    def __call__(
        self, own: JudgeLike | None, options: Mapping[str, Any] | None = None
    ) -> Judge | LocalJudge | Cascade:
        """The judge of an evaluator whose own ``judge=`` is ``own`` and whose decoding
        options are ``options`` (a cascade gets them on every stage)."""
        spec = own if own is not None else self.default
        key = spec if isinstance(spec, str) or spec is None else id(spec)
        if key not in self.judges:
            self.judges[key] = resolve_judge(spec)
        if not options:
            return self.judges[key]
        derived = (key, repr(sorted(options.items())))
        if derived not in self.judges:
            base = self.judges[key]
            if isinstance(base, Cascade):
                stages = [with_decoding(stage, options) for stage in base.judges]
                self.judges[derived] = Cascade(
                    stages, base.escalate_below, expected_share=base.expected_share
                )
            else:
                self.judges[derived] = with_decoding(base, options)
        return self.judges[derived]
