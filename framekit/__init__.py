"""framekit: score tables of LLM traces with LLM-as-judge evaluators.

>>> import framekit as fk
>>> from framekit.evaluators import RetrievalRelevance
>>> scored = fk.evaluate_dataframe(df, [RetrievalRelevance()],
...                                {"input": "question", "context": "docs"})  # doctest: +SKIP

Public names are imported lazily so that ``import framekit`` stays fast (litellm alone
takes seconds to import and is only loaded when a judge first calls it).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "evaluate_dataframe": "framekit.frame",
    "aevaluate_dataframe": "framekit.frame",
    "EvaluationFailed": "framekit.frame",
    "evaluate_parquet": "framekit.io",
    "evaluate_sql": "framekit.io",
    "Judge": "framekit.judges.litellm_judge",
    "LocalJudge": "framekit.judges.local",
    "Cache": "framekit.engine.cache",
    "Score": "framekit._score",
    "RunStats": "framekit.engine.stats",
    "last_run": "framekit.engine.stats",
    "summarize": "framekit.analysis",
    "compare": "framekit.analysis",
    "write_html_report": "framekit.analysis",
    "agreement": "framekit.analysis.agreement",
    "calibrate": "framekit.analysis.calibrate",
    "gate": "framekit.analysis.gate",
    "estimate": "framekit.analysis.estimate",
    "sample_for_review": "framekit.analysis.review",
    "FramekitError": "framekit._errors",
    "InputError": "framekit._errors",
    "MappingError": "framekit._errors",
    "RecordError": "framekit._errors",
    "JudgeError": "framekit._errors",
    "JudgeAuthenticationError": "framekit._errors",
    "JudgeConfigurationError": "framekit._errors",
    "LocalModelError": "framekit._errors",
    "RunInterrupted": "framekit._errors",
    "BatchPending": "framekit._errors",
}
_SUBMODULES = {"plot", "traces", "evaluators", "testing", "data", "io", "report", "ray"}
# Submodules that moved: ``fk.report`` (and ``from framekit import report``) still work.
_MOVED = {"report": "framekit.analysis.report"}

__all__ = sorted([*_EXPORTS, *_SUBMODULES])

if TYPE_CHECKING:
    from framekit import data, evaluators, io, plot, testing, traces
    from framekit._errors import (
        BatchPending,
        FramekitError,
        InputError,
        JudgeAuthenticationError,
        JudgeConfigurationError,
        JudgeError,
        LocalModelError,
        MappingError,
        RecordError,
        RunInterrupted,
    )
    from framekit._score import Score
    from framekit.analysis import compare, report, summarize, write_html_report
    from framekit.analysis.agreement import agreement
    from framekit.analysis.calibrate import calibrate
    from framekit.analysis.estimate import estimate
    from framekit.analysis.gate import gate
    from framekit.analysis.review import sample_for_review
    from framekit.engine.cache import Cache
    from framekit.engine.stats import RunStats, last_run
    from framekit.frame import EvaluationFailed, aevaluate_dataframe, evaluate_dataframe
    from framekit.io import evaluate_parquet, evaluate_sql
    from framekit.judges.litellm_judge import Judge
    from framekit.judges.local import LocalJudge


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        module = import_module(_MOVED.get(name, f"framekit.{name}"))
        globals()[name] = module
        return module
    raise AttributeError(f"module 'framekit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return __all__
