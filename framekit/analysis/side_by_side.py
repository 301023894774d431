"""``side_by_side``: the same item (question, trace) under every group, one row per key.

Comparing retrieval strategies, to the person doing it, means reading one question's
answer and documents under ``bm25`` next to the same question under ``dense``, starting
where their scores differ most. :func:`compare` says *whether* the groups differ; this
frame shows *where*.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from framekit import _result_columns as contract
from framekit._errors import InputError
from framekit.analysis import _outcome as outcome
from framekit.analysis._inputs import FrameLike, resolve_columns, resolve_evaluators, to_polars
from framekit.analysis._report_rows import text_columns

#: The result columns carried per group, in this order, when the frame has them.
_KINDS = ("score", "label", "passed", "explanation", "error")


def gap_column(name: str) -> str:
    """The column of ``side_by_side`` holding evaluator ``name``'s largest score gap."""
    return f"{name}_gap"


def side_by_side(
    scored: FrameLike,
    by: str,
    on: str | Sequence[str],
    *,
    evaluators: str | Sequence[str] | None = None,
    columns: Sequence[str] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> pl.DataFrame:
    """One row per key, a group of columns per value of ``by``, largest score gaps first.

    Parameters
    ----------
    scored
        A frame returned by ``evaluate_dataframe`` (any supported frame type).
    by
        The group column (strategy, model, prompt version).
    on
        The key column(s) naming the same item in every group (``question_id``).
    evaluators
        Evaluators to show; default all in the frame.
    columns
        Data columns to show per group; default the mapped (or guessed) output and
        context columns (``answer``, ``documents``...). The input column, the same for
        every group of a key, is shown once, from the first group that has the key.
    provenance
        The run record, whose mapping says which columns are input, output and context.

    Returns
    -------
    polars.DataFrame
        The key column(s); ``gap`` (the largest of the evaluators' gaps) and, with more
        than one evaluator, ``<name>_gap`` per evaluator: the highest minus the lowest
        score among the groups, errors left out, null with fewer than two scores; the
        input column; then per group (in sorted order) ``<group>/<column>`` for each data
        column and each result column (``score``, ``label``, ``passed``,
        ``explanation``, ``error``). Sorted by ``gap``, largest first (nulls last), then
        by key. A key missing from a group has nulls in that group's columns.

    Raises
    ------
    InputError
        A column missing, fewer than two groups, or a key repeated within one group.

    Examples
    --------
    >>> df = pl.DataFrame({"q": [1, 1, 2, 2], "s": ["a", "b", "a", "b"],
    ...                    "answer": ["x", "y", "z", "w"],
    ...                    "rr_score": [1.0, 0.0, 0.5, 0.5], "rr_error": [None] * 4})
    >>> out = side_by_side(df, by="s", on="q")
    >>> out.select("q", "gap", "a/rr_score", "b/rr_score").rows()
    [(1, 1.0, 1.0, 0.0), (2, 0.0, 0.5, 0.5)]
    """
    frame = to_polars(scored)
    names = resolve_evaluators(frame, evaluators)
    resolve_columns(frame, by, "by")
    keys = resolve_columns(frame, on, "on")
    if by in keys:
        raise InputError(f"the key {keys} must not include the group column {by!r}")
    texts = text_columns(frame.columns, provenance)
    shared = [texts["input"]] if "input" in texts and texts["input"] not in keys else []
    data = (
        resolve_columns(frame, list(columns), "columns")
        if columns is not None
        else [texts[f] for f in ("output", "context") if f in texts]
    )
    data = [c for c in data if c not in (*keys, by, *shared)]
    results = [
        contract.column(n, k) for n in names for k in _KINDS if contract.column(n, k) in frame
    ]
    groups = frame.get_column(by).drop_nulls().unique().sort().to_list()
    if len(groups) < 2:
        raise InputError(f"side_by_side needs at least two groups in {by!r}, found {groups}")

    keyed = frame.drop_nulls(keys)
    # An error's score is no score: it must not make (or hide) a gap.
    keyed = keyed.with_columns(
        [outcome.scored(n) for n in names if contract.column(n, "score") in frame]
    )
    parts: list[pl.DataFrame] = []
    for g in groups:
        part = keyed.filter(pl.col(by) == g)
        dupes = part.filter(pl.struct(keys).is_duplicated())
        if dupes.height:
            raise InputError(
                f"key {keys} does not identify one row per group: "
                f"{dupes.select(keys).row(0, named=True)} appears more than once in "
                f"group {g!r}"
            )
        parts.append(
            part.select(
                *keys,
                *[pl.col(c).alias(f"{g}/{c}") for c in (*shared, *data, *results)],
            )
        )
    wide = parts[0]
    for part in parts[1:]:
        wide = wide.join(part, on=keys, how="full", coalesce=True, nulls_equal=True)
    if shared:
        wide = wide.with_columns(
            pl.coalesce([f"{g}/{c}" for g in groups]).alias(c) for c in shared
        ).drop([f"{g}/{c}" for g in groups for c in shared])

    gaps = []
    for name in names:
        scores = [f"{g}/{contract.column(name, 'score')}" for g in groups]
        scores = [c for c in scores if c in wide.columns]
        enough = pl.sum_horizontal(pl.col(c).is_not_null() for c in scores) >= 2
        spread = pl.max_horizontal(scores) - pl.min_horizontal(scores)
        gaps.append(pl.when(enough).then(spread).alias(gap_column(name)))
    wide = wide.with_columns(gaps)
    wide = wide.with_columns(pl.max_horizontal([gap_column(n) for n in names]).alias("gap"))
    order = [*keys, "gap", *([gap_column(n) for n in names] if len(names) > 1 else []), *shared]
    rest = [c for c in wide.columns if c not in order and c not in map(gap_column, names)]
    return wide.select(*order, *rest).sort(
        ["gap", *keys], descending=[True, *[False] * len(keys)], nulls_last=True
    )
