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

from framekit import _record_scorer
from framekit._version import __version__

_EXPORTS = {
    "evaluate_dataframe": "framekit.evaluate",
    "aevaluate_dataframe": "framekit.evaluate",
    "EvaluationFailed": "framekit._errors",
    "evaluate_pairwise": "framekit.pairwise",
    "aevaluate_pairwise": "framekit.pairwise",
    "evaluate_parquet": "framekit.parquet",
    "evaluate_sql": "framekit.parquet",
    "Judge": "framekit.judges.judge",
    "LocalJudge": "framekit.judges.local",
    "Cascade": "framekit.judges.cascade",
    "calibrate_cascade": "framekit.cascades",
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
    "side_by_side": "framekit.analysis.side_by_side",
    "rank": "framekit.analysis.rank",
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
    "MissingDependency": "framekit._errors",
}
_SUBMODULES = {"plot", "traces", "evaluators", "testing", "data", "io", "report", "ray"}
# Submodules that moved: ``fk.report`` (and ``from framekit import report``), the old
# home of summarize and compare, is the analysis package that holds them now.
_MOVED = {"report": "framekit.analysis"}

__all__ = sorted([*_EXPORTS, *_SUBMODULES])

if TYPE_CHECKING:
    from framekit import analysis as report
    from framekit import data, evaluators, io, plot, testing, traces
    from framekit._errors import (
        BatchPending,
        EvaluationFailed,
        FramekitError,
        InputError,
        JudgeAuthenticationError,
        JudgeConfigurationError,
        JudgeError,
        LocalModelError,
        MappingError,
        MissingDependency,
        RecordError,
        RunInterrupted,
    )
    from framekit._score import Score
    from framekit.analysis import compare, summarize, write_html_report
    from framekit.analysis.agreement import agreement
    from framekit.analysis.calibrate import calibrate
    from framekit.analysis.estimate import estimate
    from framekit.analysis.gate import gate
    from framekit.analysis.rank import rank
    from framekit.analysis.review import sample_for_review
    from framekit.analysis.side_by_side import side_by_side
    from framekit.cascades import calibrate_cascade
    from framekit.engine.cache import Cache
    from framekit.engine.stats import RunStats, last_run
    from framekit.evaluate import aevaluate_dataframe, evaluate_dataframe
    from framekit.judges.cascade import Cascade
    from framekit.judges.judge import Judge
    from framekit.judges.local import LocalJudge
    from framekit.pairwise import aevaluate_pairwise, evaluate_pairwise
    from framekit.parquet import evaluate_parquet, evaluate_sql


async def _score_record(evaluator: Any, fields: Any, *, judge: Any, cache: Any) -> Any:
    """``Evaluator.score``'s way to the engine: the entry layer's scorer of one record,
    imported when first used (this package may import downward; the evaluators may not)."""
    from framekit.evaluate import ascore_record

    return await ascore_record(evaluator, fields, judge=judge, cache=cache)


_record_scorer.install(_score_record)


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
