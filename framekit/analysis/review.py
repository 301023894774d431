"""``fk.sample_for_review``: which rows a person should label next.

Three ways to choose, for three uses:

- ``"random"``: a uniform sample. The one to label for ``fk.estimate``: prediction-powered
  inference assumes the labelled rows are a random sample of the scored ones, and a
  sample chosen any other way biases its estimate.
- ``"uncertain"``: the rows the judge is least sure of, for fixing the verdicts most
  likely wrong and for calibrating a cascade's thresholds where they matter.
- ``"stratified"``: as many rows of each label (and group) as there are to share out, so
  that rare labels are checked too (per-label agreement, a confusion matrix).

Rows whose evaluation failed are never chosen: there is no verdict to review.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import polars as pl

from framekit import _result_columns as result_columns
from framekit._errors import InputError
from framekit._frames import to_polars
from framekit.analysis import _outcome as outcome
from framekit.analysis._rubric import pass_mark

__all__ = ["sample_for_review"]

_STRATEGIES = ("uncertain", "stratified", "random")


def sample_for_review(
    scored: Any,
    n: int,
    evaluator: str,
    strategy: str = "uncertain",
    seed: int | None = None,
    *,
    by: str | None = None,
    labelled: str | None = None,
    threshold: float | None = None,
) -> Any:
    """The rows of ``scored`` a person should label, with their result columns.

    Parameters
    ----------
    scored
        A scored frame (polars, pandas, Arrow).
    n
        How many rows to return (fewer when fewer can be chosen, with a warning).
    evaluator
        The evaluator whose verdicts are to be reviewed.
    strategy
        ``"uncertain"``: lowest ``<evaluator>_confidence`` first; a frame without that
        column (scored before judges reported confidences) is ordered by how close each
        score is to the pass mark instead, which says little for a pass/fail rubric
        (every score is equally far). ``"stratified"``: an equal share of rows per label
        (``<evaluator>_label``, else ``_passed``) and ``by`` group, drawn at random, a
        small stratum's leftover share going to the others. ``"random"``: uniform.
        See the module docstring for which to use when.
    seed
        Seeds the random draws and the order among equally uncertain rows.
    by
        A column to stratify by as well as the label (``"stratified"`` only).
    labelled
        A column whose non-null rows are labelled already: they are not chosen again.
    threshold
        The pass mark for the ``"uncertain"`` fallback (default: read off the frame).

    Returns
    -------
    polars.DataFrame or pandas.DataFrame
        The chosen input rows, every column kept (pandas in, pandas out, index kept):
        most uncertain first for ``"uncertain"``, else in input order.

    Raises
    ------
    InputError
        An unknown strategy, a negative ``n``, a missing column or evaluator.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({
    ...     "q": ["a", "b", "c", "d"],
    ...     "rel_score": [1.0, 0.0, 1.0, None],
    ...     "rel_label": ["relevant", "irrelevant", "relevant", None],
    ...     "rel_error": [None, None, None, "timeout"],
    ...     "rel_confidence": [0.97, 0.55, 0.71, None],
    ... })
    >>> sample_for_review(df, 2, evaluator="rel")["q"].to_list()
    ['b', 'c']
    """
    frame_in = to_polars(scored)
    frame = frame_in.frame
    if strategy not in _STRATEGIES:
        raise InputError(f"strategy {strategy!r}: choose one of {_STRATEGIES}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InputError(f"n must be a whole number >= 0, got {n!r}")
    name = result_columns.resolve_evaluators(frame.columns, evaluator)[0]
    for column in (by, labelled):
        if column is not None and column not in frame.columns:
            raise InputError(f"column {column!r} is not in the frame; columns: {frame.columns}")
    open_rows = ~outcome.is_error(name)
    if labelled is not None:
        open_rows = open_rows & pl.col(labelled).is_null()
    candidates = frame.with_row_index("_row").filter(open_rows)
    rng = np.random.default_rng(seed)
    if strategy == "random":
        picked = np.sort(rng.permutation(candidates["_row"].to_numpy())[:n])
    elif strategy == "uncertain":
        picked = _most_uncertain(frame, candidates, name, n, rng, threshold)
    else:
        picked = _stratified(candidates, name, by, n, rng)
    if len(picked) < n:
        warnings.warn(
            f"only {len(picked)} row(s) of {name} can be chosen (scored"
            + (f", not yet in {labelled!r}" if labelled else "")
            + f"); returning them, not {n}",
            stacklevel=2,
        )
    rows = [int(i) for i in picked]
    if frame_in.kind == "pandas":
        return frame_in.original.iloc[rows]
    return frame[rows]


def _most_uncertain(
    frame: pl.DataFrame,
    candidates: pl.DataFrame,
    name: str,
    n: int,
    rng: np.random.Generator,
    threshold: float | None,
) -> np.ndarray:
    """Row positions, least confident first (ties in a seeded random order)."""
    confidence = result_columns.column(name, "confidence")
    if confidence in frame.columns:
        if not frame.schema[confidence].is_numeric():
            raise InputError(f"column {confidence!r} holds {frame.schema[confidence]}, not numbers")
        # A verdict without a confidence is the least known of all: it comes first.
        doubt = candidates[confidence].cast(pl.Float64).fill_nan(None).fill_null(-1.0)
    else:
        mark = pass_mark(frame, name, threshold)
        mark = 0.5 if mark is None else mark
        doubt = (candidates.select(result_columns.score(name)).to_series() - mark).abs()
    ties = rng.random(candidates.height)
    order = np.lexsort((ties, doubt.to_numpy()))
    return candidates["_row"].to_numpy()[order[:n]]


def _stratified(
    candidates: pl.DataFrame, name: str, by: str | None, n: int, rng: np.random.Generator
) -> np.ndarray:
    """Row positions: equal shares per stratum, each drawn at random, in input order."""
    label = result_columns.column(name, "label")
    if label not in candidates.columns or candidates[label].null_count() == candidates.height:
        label = result_columns.column(name, "passed")
    keys = [c for c in (label, by) if c is not None and c in candidates.columns]
    if not keys:
        raise InputError(f"stratified sampling needs {name}_label or {name}_passed")
    pools = [
        rng.permutation(part["_row"].to_numpy())
        for _, part in candidates.group_by(keys, maintain_order=True)
    ]
    chosen: list[int] = []
    taken = [0] * len(pools)
    # Round robin: one row from each stratum in turn until n are chosen or all are empty.
    while len(chosen) < n and any(t < len(p) for t, p in zip(taken, pools)):
        for i, pool in enumerate(pools):
            if len(chosen) == n:
                break
            if taken[i] < len(pool):
                chosen.append(int(pool[taken[i]]))
                taken[i] += 1
    return np.sort(np.array(chosen, dtype=np.int64))
