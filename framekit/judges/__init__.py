"""Judges: the litellm-backed :class:`Judge` and the offline :class:`LocalJudge`."""

from framekit.judges.base import ChatRequest, JudgeLike
from framekit.judges.litellm_judge import Judge
from framekit.judges.local import LocalJudge
from framekit.judges.resolve import resolve_judge

__all__ = ["ChatRequest", "Judge", "JudgeLike", "LocalJudge", "resolve_judge"]
