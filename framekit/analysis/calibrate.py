"""``fk.calibrate``: the pass mark that best separates what people marked good from bad.

Every distinct score is a candidate threshold (a row passes when ``score >= threshold``);
the table behind the choice lists each candidate's counts, precision, recall, F1 and
accuracy, so the choice can be checked or made differently.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from framekit._errors import InputError
from framekit._frames import to_polars
from framekit.analysis._rubric import check_labels, is_label_dtype, rubric_of

__all__ = ["Calibration", "calibrate"]

Target = str | tuple[str, float]
_OBJECTIVES = ("f1", "accuracy", "youden")
_CONSTRAINTS = ("precision", "recall")


@dataclass(frozen=True)
class Calibration:
    """A calibrated threshold and the table it was chosen from.

    ``float(calibration)`` is the threshold, so an evaluator takes it directly:
    ``RetrievalRelevance(threshold=calibration.threshold)``.

    Attributes
    ----------
    evaluator, target, threshold
        What was calibrated, for what, and the threshold found.
    precision, recall, f1, accuracy
        The figures at that threshold on the labelled rows.
    n, positives
        Labelled rows used, and how many of them people marked positive.
    table
        One row per candidate threshold: ``threshold, tp, fp, fn, tn, precision, recall,
        f1, accuracy, youden``.
    """

    evaluator: str
    target: Target
    threshold: float
    precision: float | None
    recall: float | None
    f1: float | None
    accuracy: float
    n: int
    positives: int
    table: pl.DataFrame

    def __float__(self) -> float:
        return self.threshold

    def __repr__(self) -> str:
        def fmt(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.3f}"

        return (
            f"Calibration({self.evaluator}: threshold {self.threshold:.4g} for "
            f"{self.target!r}; precision {fmt(self.precision)}, recall {fmt(self.recall)}, "
            f"f1 {fmt(self.f1)}, accuracy {self.accuracy:.3f} on {self.n} rows, "
            f"{self.positives} positive)"
        )


def calibrate(
    scored: Any,
    human: str,
    evaluator: str,
    target: Target = "f1",
    *,
    positive: Collection[str] | None = None,
    rubric: Mapping[str, float] | Any = None,
) -> Calibration:
    """The threshold on ``<evaluator>_score`` that best reproduces human pass/fail labels.

    For evaluators whose higher scores are better (every built-in): a row passes when
    ``score >= threshold``.

    Parameters
    ----------
    scored
        A scored frame holding ``<evaluator>_score`` and the ``human`` column.
    human
        People's verdicts: booleans, 0/1 numbers, or labels (positive when the label's
        rubric score is >= 0.5, or when it is in ``positive``).
    evaluator
        The evaluator whose threshold is calibrated.
    target
        ``"f1"`` (default), ``"accuracy"`` or ``"youden"`` (recall + specificity - 1): the
        threshold that maximises it. ``("precision", p)``: the lowest threshold whose
        precision reaches ``p`` (the most recall at that precision); ``("recall", r)``:
        the highest threshold whose recall reaches ``r``.
    positive
        Human labels that count as positive (instead of the rubric's upper half).
    rubric
        Label -> score for human labels that the judge never chose, or the evaluator.

    Returns
    -------
    Calibration
        The threshold, its figures and the table of every candidate.

    Raises
    ------
    InputError
        Missing columns, no labelled rows, only one class, an unknown target, or a
        precision/recall target no threshold reaches.

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"human": [False, False, True, True],
    ...                    "relevance_score": [0.1, 0.4, 0.35, 0.8]})
    >>> calibrate(df, human="human", evaluator="relevance").threshold
    0.35
    >>> calibrate(df, "human", "relevance", target=("precision", 1.0)).threshold
    0.8
    """
    frame = to_polars(scored).frame
    column = f"{evaluator}_score"
    for needed in (human, column):
        if needed not in frame.columns:
            raise InputError(f"column {needed!r} is not in the frame; columns: {frame.columns}")
    rows = frame.filter(pl.col(human).is_not_null() & pl.col(column).is_not_null())
    truth = _truth(frame, rows, human, evaluator, positive, rubric)
    scores = rows[column].cast(pl.Float64).to_numpy()
    if len(scores) == 0:
        raise InputError(f"no rows with both {human!r} and a {column} to calibrate on")
    if truth.all() or not truth.any():
        raise InputError(f"{human!r} holds one class only: a threshold needs both to separate")
    table = _table(scores, truth)
    best = _choose(table, target)
    pick = table.row(best, named=True)
    return Calibration(
        evaluator=evaluator,
        target=target,
        threshold=pick["threshold"],
        precision=pick["precision"],
        recall=pick["recall"],
        f1=pick["f1"],
        accuracy=pick["accuracy"],
        n=len(scores),
        positives=int(truth.sum()),
        table=table,
    )


def _truth(
    frame: pl.DataFrame,
    rows: pl.DataFrame,
    human: str,
    evaluator: str,
    positive: Collection[str] | None,
    rubric: Any,
) -> np.ndarray:
    dtype = rows.schema[human]
    if dtype == pl.Boolean:
        return rows[human].to_numpy().astype(bool)
    if is_label_dtype(dtype):
        values = rows[human].cast(pl.String).to_list()
        if positive is not None:
            wanted = {p.casefold() for p in positive}
            return np.array([v.strip().casefold() in wanted for v in values])
        scale = rubric_of(frame, evaluator, rubric)
        check_labels(frame, human, evaluator, scale)
        codes = [scale.code(v) for v in values]
        return np.array([scale.scores[c] >= 0.5 for c in codes if c is not None])
    if dtype.is_numeric():
        numbers = rows[human].cast(pl.Float64).to_numpy()
        if not np.isin(numbers, (0.0, 1.0)).all():
            raise InputError(f"numeric {human!r} must be 0/1 to calibrate a pass mark")
        return numbers == 1.0
    raise InputError(f"{human!r} holds {dtype}: give booleans, 0/1 or labels")


def _table(scores: np.ndarray, truth: np.ndarray) -> pl.DataFrame:
    thresholds = np.unique(scores)
    passed = scores[None, :] >= thresholds[:, None]
    tp = (passed & truth).sum(axis=1)
    fp = (passed & ~truth).sum(axis=1)
    fn = truth.sum() - tp
    tn = (~truth).sum() - fp
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(tp + fp > 0, tp / (tp + fp), np.nan)
        recall = tp / (tp + fn)
        f1 = np.where(tp > 0, 2 * tp / (2 * tp + fp + fn), 0.0)
    accuracy = (tp + tn) / len(scores)
    youden = recall + tn / (tn + fp) - 1.0
    return pl.DataFrame(
        {
            "threshold": thresholds,
            "tp": tp,
            "fp": fp,
            "fn": fn,
            "tn": tn,
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "accuracy": accuracy,
            "youden": youden,
        }
    ).with_columns(pl.col("precision").fill_nan(None))


def _choose(table: pl.DataFrame, target: Target) -> int:
    if isinstance(target, str):
        if target not in _OBJECTIVES:
            raise InputError(f"target {target!r}: choose one of {_OBJECTIVES} or (metric, value)")
        # The first maximum, i.e. the lowest threshold among equals: it passes more rows
        # for the same figure, and the table shows the others.
        return int(np.argmax(table[target].to_numpy()))
    if not isinstance(target, tuple) or len(target) != 2 or target[0] not in _CONSTRAINTS:
        raise InputError(f"target {target!r}: give ('precision', p) or ('recall', r)")
    metric, floor = target
    values = table[metric].fill_null(-1.0).to_numpy()
    meets = np.flatnonzero(values >= float(floor))
    if meets.size == 0:
        best = float(np.nanmax(values))
        raise InputError(f"no threshold reaches {metric} {floor}; the best is {best:.3f}")
    # precision: the lowest threshold that meets it (most recall); recall: the highest.
    return int(meets[0] if metric == "precision" else meets[-1])
