"""Judges: :class:`Judge` (over the http or litellm transport) and the offline
:class:`LocalJudge`; :mod:`framekit.judges.transport` is the boundary the engine uses."""

from framekit.judges.base import ChatRequest, JudgeLike
from framekit.judges.faults import Fault
from framekit.judges.litellm_judge import Judge
from framekit.judges.local import LocalJudge
from framekit.judges.resolve import resolve_judge
from framekit.judges.transport import RawReply, Transport

__all__ = [
    "ChatRequest",
    "Fault",
    "Judge",
    "JudgeLike",
    "LocalJudge",
    "RawReply",
    "Transport",
    "resolve_judge",
]
