"""From a frame's rows to the planner's jobs: checked evaluators, distinct records, judges.

Shared by every run (``evaluate_dataframe``, ``evaluate_parquet``) and by the dry run, so
all of them collapse duplicate rows and resolve judges the same way.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from framekit._errors import InputError
from framekit.evaluators.base import Evaluator
from framekit.judges.judge import Judge, JudgeLike, resolve_judge
from framekit.judges.local import LocalJudge


def check_evaluators(evaluators: Any) -> list[Evaluator]:
    """``evaluators`` as a non-empty list of evaluators with distinct names, or InputError."""
    if isinstance(evaluators, Evaluator):
        evaluators = [evaluators]
    evaluators = list(evaluators or [])
    if not evaluators:
        raise InputError("evaluators is empty: pass at least one evaluator")
    for ev in evaluators:
        if not isinstance(ev, Evaluator):
            raise InputError(
                f"{ev!r} is not an evaluator; pass instances such as RetrievalRelevance()"
            )
    names = [ev.name for ev in evaluators]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputError(f"two evaluators are named {dupes[0]!r}; give one a different name=...")
    return evaluators


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple((k, _hashable(v)) for k, v in value.items())
    return value


def distinct_records(
    columns: dict[str, pl.Series], names: list[str], height: int
) -> tuple[list[dict[str, Any]], list[int], list[int]]:
    """Collapse identical rows: (records, row -> record index, rows per record)."""
    if not names:  # an evaluator reading no field: every row is the same record
        return ([{}], [0] * height, [height]) if height else ([], [], [])
    series = [columns[n] for n in names]
    nested = [s.dtype.is_nested() or s.dtype == pl.Object for s in series]
    lists = [s.to_list() for s in series]
    index: dict[Any, int] = {}
    key: Any
    records: list[dict[str, Any]] = []
    weights: list[int] = []
    inverse: list[int] = []
    for row in zip(*lists):
        key = tuple(_hashable(v) if n else v for v, n in zip(row, nested)) if any(nested) else row
        try:
            r = index.get(key)
        except TypeError:  # an unhashable value from a callable mapping: keep the row apart
            r, key = None, object()
        if r is None:
            r = index[key] = len(records)
            records.append(dict(zip(names, row)))
            weights.append(0)
        weights[r] += 1
        inverse.append(r)
    return records, inverse, weights


class JudgeResolver:
    """The judge of each evaluator (its own ``judge=``, else the run's), resolved once per
    distinct spec, so evaluators sharing a judge share its limits and worker processes."""

    def __init__(self, default: JudgeLike | None) -> None:
        self.default = default
        self.judges: dict[Any, Judge | LocalJudge] = {}

    def __call__(self, ev: Evaluator) -> Judge | LocalJudge:
        spec = ev.judge if ev.judge is not None else self.default
        key = spec if isinstance(spec, str) or spec is None else id(spec)
        if key not in self.judges:
            self.judges[key] = resolve_judge(spec)
        return self.judges[key]
