"""``fk.calibrate_cascade``: a cascade's thresholds chosen on labelled rows, with a guarantee.

The labelled frame is scored through every stage of the cascade (each stage an ordinary
run of its judge over every row, cached like any run), and each stage's labels and
confidences go to :func:`framekit.analysis.cascade_calibration.calibrate_thresholds`,
which holds the method (fixed-sequence testing with an exact binomial bound, after Jung,
Brahman and Choi 2024) and its guarantee. What comes back is that calibration, the
cascade with the chosen thresholds and the expected share of rows reaching each stage (the
dry run prices it with them), and the per-stage labels the choice was made on.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from framekit._aio import run_sync
from framekit._errors import InputError
from framekit._frames import to_polars
from framekit._result_columns import column
from framekit.analysis._rubric import is_label_dtype
from framekit.analysis.cascade_calibration import CascadeCalibration, calibrate_thresholds
from framekit.engine.cache import Cache
from framekit.engine.mapping import MappingValue
from framekit.evaluate import evaluate_with_stats
from framekit.evaluators.base import Evaluator
from framekit.judges.cascade import Cascade

__all__ = ["CalibratedCascade", "calibrate_cascade"]


@dataclass(frozen=True)
class CalibratedCascade:
    """What :func:`calibrate_cascade` found.

    Attributes
    ----------
    calibration
        The thresholds' test (:class:`~framekit.analysis.cascade_calibration.CascadeCalibration`):
        ``reachable``, ``escalate_below``, ``agreement`` and its lower bound,
        ``decided_share`` per stage, ``cost_per_1000``, the ``table`` of every candidate
        (a cost/agreement curve) and a one-line ``reason``.
    cascade
        The cascade with the chosen thresholds and its expected share of rows per stage,
        or ``None`` when the target is not reachable.
    stages
        Per labelled row, each stage's ``stage{k}_label`` / ``stage{k}_confidence`` (1
        based) and the ``reference``: what the thresholds were chosen on.
    prices
        Mean cost of one row per stage (USD; 0 for the offline judge), ``None`` when a
        stage's cost is unknown.
    """

    calibration: CascadeCalibration
    cascade: Cascade | None
    stages: pl.DataFrame
    prices: tuple[float, ...] | None

    @property
    def reachable(self) -> bool:
        """Whether the target agreement is reachable with the guarantee."""
        return self.calibration.reachable

    def __repr__(self) -> str:
        return f"CalibratedCascade({self.calibration.reason})"


def calibrate_cascade(
    labelled: Any,
    cascade: Cascade,
    evaluator: Evaluator,
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    reference: str | None = None,
    target_agreement: float = 0.9,
    risk: float = 0.1,
    cache: Cache | str | bool | None = None,
    candidates: Sequence[Sequence[float]] | Sequence[float] | None = None,
) -> CalibratedCascade:
    """Choose ``escalate_below`` so that the cascade agrees with a reference at least
    ``target_agreement`` of the time, with probability at least ``1 - risk``.

    Every labelled row is scored by every stage (what a calibration costs: the rows times
    the stages; the answers are cached, so a second calibration or a run over the same
    rows pays nothing). A stage's failed row has no label and no confidence: it escalates,
    and a failure at the last stage counts as a disagreement.

    Parameters
    ----------
    labelled
        The rows to calibrate on (any frame ``evaluate_dataframe`` takes): a random
        sample of the rows the cascade will score, or the guarantee does not carry over.
    cascade
        The judges, cheapest first; its thresholds are ignored (they are what is chosen).
    evaluator
        The evaluator the cascade will serve (its own ``judge=``, if any, is not used).
    mapping
        As for :func:`framekit.evaluate_dataframe`.
    reference
        The column of ``labelled`` holding the labels to agree with (human labels, as the
        rubric's label text, or booleans compared with ``<name>_passed``); rows where it
        is null are left out. ``None``: the last stage's labels (agreement with the
        strongest judge at a fraction of its cost).
    target_agreement, risk
        The guarantee asked for, both in (0, 1).
    cache
        As for :func:`framekit.evaluate_dataframe`.
    candidates
        Thresholds to test, most conservative first (see
        :func:`~framekit.analysis.cascade_calibration.calibrate_thresholds`).

    Returns
    -------
    CalibratedCascade
        ``.cascade`` is ready for ``judge=``; ``None`` when the target is not reachable
        (``.calibration.reason`` says why).

    Raises
    ------
    InputError
        A cascade that is not an :class:`~framekit.Cascade`; a ``reference`` column that
        is missing, holds no label (all null or NaN), holds numbers (0/1 for a rubric:
        cast them to booleans for pass/fail) or labels outside the evaluator's rubric,
        naming the column, the row and the labels expected; or what
        ``calibrate_thresholds`` refuses. All before any judge is asked.

    Examples
    --------
    >>> import framekit as fk
    >>> from framekit.evaluators import RetrievalRelevance
    >>> cascade = fk.Cascade(["local", "openai/gpt-4o-mini"], escalate_below=[0.9])
    >>> found = fk.calibrate_cascade(labelled, cascade, RetrievalRelevance(),
    ...     {"input": "question", "context": "docs"}, reference="human")  # doctest: +SKIP
    >>> scored = fk.evaluate_dataframe(df, [RetrievalRelevance()], mapping,
    ...     judge=found.cascade)  # doctest: +SKIP
    """
    if not isinstance(cascade, Cascade):
        raise InputError(f"calibrate_cascade takes an fk.Cascade, not {cascade!r}")
    frame = to_polars(labelled).frame
    if reference is not None:
        check_reference(frame, reference, evaluator)  # before any stage is paid for
    by_passed = reference is not None and frame.schema[reference] == pl.Boolean
    ev = copy.copy(evaluator)
    ev.judge = None  # each stage's judge, not the evaluator's own
    kind = "passed" if by_passed else "label"
    columns: list[pl.Series] = []
    prices: list[float] | None = []
    for k, judge in enumerate(cascade.judges, start=1):
        scored, _ = run_sync(
            evaluate_with_stats(
                frame, [ev], mapping, judge=judge, cache=cache, progress=False, details=True,
                overwrite=True,
            )
        )  # fmt: skip
        labels = scored.get_column(column(ev.name, kind))
        confidence = (
            scored.get_column(column(ev.name, "confidence")).cast(pl.Float64)
            if column(ev.name, "confidence") in scored.columns
            else pl.Series([None] * scored.height, dtype=pl.Float64)
        )
        columns += [labels.alias(f"stage{k}_label"), confidence.alias(f"stage{k}_confidence")]
        prices = _add_price(prices, judge, scored.get_column(column(ev.name, "cost_usd")))
    truth = (
        frame.get_column(reference).alias("reference")
        if reference is not None
        else columns[-2].alias("reference")
    )
    stages = pl.DataFrame([*columns, truth])
    n = len(cascade.judges)
    calibration = calibrate_thresholds(
        stages,
        [(f"stage{k}_label", f"stage{k}_confidence") for k in range(1, n + 1)],
        "reference",
        target_agreement=target_agreement,
        risk=risk,
        prices=prices,
        candidates=candidates,
    )
    chosen = None
    if calibration.reachable and calibration.escalate_below is not None:
        decided = calibration.decided_share or (1.0,) + (0.0,) * (n - 1)
        reach = [max(0.0, 1.0 - sum(decided[:k])) for k in range(n)]
        chosen = cascade.with_thresholds(calibration.escalate_below, expected_share=reach)
    return CalibratedCascade(calibration, chosen, stages, None if prices is None else tuple(prices))


def check_reference(frame: pl.DataFrame, reference: str, evaluator: Evaluator) -> None:
    """Raise :class:`InputError` unless ``reference`` holds what the stages' verdicts are
    compared with: the evaluator's labels (as text), or booleans for pass/fail.

    Without this, a column of the wrong kind (0/1 integers, all NaN, another rubric's
    labels) agrees with no stage on any row, and the answer would be "target not
    reachable", blaming the judges for the column.
    """
    if reference not in frame.columns:
        raise InputError(f"reference column {reference!r} is not in the frame: {frame.columns}")
    labels = list(evaluator.label_scores())
    expected = (
        f"the labels of {evaluator.name} ({', '.join(repr(lb) for lb in labels)}) or booleans "
        "(compared with pass/fail)"
        if labels
        else "booleans (compared with pass/fail)"
    )
    values = frame.get_column(reference)
    if values.dtype.is_float():
        values = values.fill_nan(None)
    if values.null_count() == values.len():
        raise InputError(
            f"reference column {reference!r} holds no label (its {values.len()} values are "
            f"all null or NaN); expected {expected}"
        )
    if values.dtype == pl.Boolean:
        return
    if not is_label_dtype(values.dtype):
        hint = "; for pass/fail, cast 0/1 to booleans" if values.dtype.is_numeric() else ""
        raise InputError(
            f"reference column {reference!r} holds {values.dtype} values (e.g. "
            f"{values.drop_nulls()[0]!r}); expected {expected}{hint}"
        )
    if not labels:  # an evaluator without a rubric: its labels are not known here
        return
    known = {label.strip().casefold() for label in labels}
    for row, value in enumerate(values.cast(pl.String)):
        if value is not None and value.strip().casefold() not in known:
            raise InputError(
                f"reference column {reference!r}, row {row}: {value!r} is not one of {expected}"
            )


def _add_price(prices: list[float] | None, judge: Any, cost: pl.Series) -> list[float] | None:
    """The stage's mean cost of a row appended (0 offline); ``None`` once one is unknown."""
    if prices is None:
        return None
    if judge.offline is not None:
        return [*prices, 0.0]
    mean = cost.drop_nulls().mean()
    return None if mean is None else [*prices, float(mean)]  # type: ignore[arg-type]
