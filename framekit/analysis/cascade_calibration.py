"""Thresholds for a cascade of judges that agree with a reference, with a guarantee.

A cascade sends every row to its first (cheapest) judge; a row whose confidence there is
below ``t_1`` goes on to the second judge, and so on; the last judge's verdict stands.
:func:`calibrate_thresholds` chooses ``escalate_below=[t_1, ...]`` on a labelled frame so
that, on fresh rows from the same distribution, the cascade agrees with the reference
(human labels, or the strongest judge's) at least ``target_agreement`` of the time, with
probability at least ``1 - risk`` over the labelled sample.

The method is fixed-sequence testing, as in "Trust or Escalate: LLM Judges with Provable
Guarantees for Human Agreement" (Jung, Brahman and Choi 2024, arXiv:2407.18370), adapted
to a cascade in which the last judge decides every row left (that paper's last judge may
abstain). Candidate thresholds are put in a fixed order before looking at the data, most
conservative first: "every row goes to the last judge" (``inf``), then one common
threshold for every stage but the last from 1.00 down to 0.00 in steps of 0.01 (trust a
judge whose confidence is at least ``t``: confidences are probabilities, so one scale
serves every stage), or the caller's own candidates. Each candidate is a hypothesis
"agreement < target", tested at level ``risk``; testing goes down the list while the
hypotheses are rejected and stops at the first that is not. The last rejected candidate
(the one escalating least) is chosen. Because the order is fixed and testing stops at the
first failure, the chance of rejecting any true hypothesis is at most ``risk``, with no
correction for the number of candidates: that is the guarantee.

The test of one candidate is the exact binomial test: with ``k`` of the ``n`` labelled rows
agreeing, the p-value is ``P(Binomial(n, target) >= k)`` (equivalently, the one-sided
Clopper-Pearson lower bound at ``1 - risk`` is above the target). Exact, and valid for
any ``n``: the rows are independent and each agrees or not, so the count *is* binomial.
Hoeffding's bound would also be valid but ignores that agreement near 0.9 has a small
variance (it uses the worst case 1/4), so it needs several times more labelled rows for
the same guarantee; Jung et al. use the same exact binomial bound.

When not even the first candidate passes, the target is not reachable with these judges
and this many labels, and the result says so (``reachable`` is False) instead of handing
back thresholds that would pass by luck.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from framekit._errors import InputError
from framekit._frames import to_polars

__all__ = ["CascadeCalibration", "calibrate_thresholds", "default_candidates"]


@dataclass(frozen=True)
class CascadeCalibration:
    """Chosen thresholds, or why there are none, and the table they were chosen from.

    Attributes
    ----------
    reachable
        Whether some candidate reaches the target with the guarantee.
    escalate_below
        One threshold per stage but the last (``inf``: every row goes on), or ``None``.
    target_agreement, risk
        What was asked.
    agreement, agreement_lower
        At the chosen thresholds on the labelled rows: the agreement, and its one-sided
        Clopper-Pearson lower bound at ``1 - risk``. (For an unreachable target: those of
        the first candidate, every row to the last judge.)
    decided_share
        The share of rows each stage decides (they sum to 1).
    cost_per_1000
        Expected cost of 1,000 rows: each stage's price per row times the share of rows
        that reach it (an escalated row is paid at every stage it passes); ``None``
        without prices.
    n
        Labelled rows used.
    table
        Every candidate: ``escalate_below`` (a list), ``agreement``, ``p_value``,
        ``tested``, ``passed``, ``decided_share`` (a list) and ``cost_per_1000``.
    reason
        One line saying what was found.
    """

    reachable: bool
    escalate_below: tuple[float, ...] | None
    target_agreement: float
    risk: float
    agreement: float | None
    agreement_lower: float | None
    decided_share: tuple[float, ...] | None
    cost_per_1000: float | None
    n: int
    table: pl.DataFrame
    reason: str

    def __repr__(self) -> str:
        return f"CascadeCalibration({self.reason})"


def default_candidates(stages: int) -> np.ndarray:
    """The fixed order of candidates for ``stages`` judges: every row to the last judge,
    then one common threshold from 1.00 down to 0.00, shape ``(102, stages - 1)``.

    Examples
    --------
    >>> default_candidates(3)[:3].tolist()
    [[inf, inf], [1.0, 1.0], [0.99, 0.99]]
    """
    common = np.concatenate([[math.inf], np.round(np.arange(100, -1, -1) / 100.0, 2)])
    return np.repeat(common[:, None], max(stages - 1, 0), axis=1)


def calibrate_thresholds(
    labelled: Any,
    stages: Sequence[tuple[str, str]],
    reference: str,
    *,
    target_agreement: float = 0.9,
    risk: float = 0.1,
    prices: Sequence[float] | None = None,
    candidates: Sequence[Sequence[float]] | Sequence[float] | None = None,
) -> CascadeCalibration:
    """Thresholds under which a cascade agrees with ``reference`` at least
    ``target_agreement`` of the time, with probability at least ``1 - risk``.

    Parameters
    ----------
    labelled
        A frame with, per row, each stage's label and confidence and the reference label.
    stages
        ``(label column, confidence column)`` per judge, cheapest first. A null confidence
        (or label) escalates the row; the last stage's confidence is not used, and a null
        label there counts as a disagreement.
    reference
        The labels to agree with (rows where it is null are left out). Labels are compared
        as text, case-insensitively; booleans work too (against booleans).
    target_agreement, risk
        Agreement at least ``target_agreement`` on fresh rows, with probability at least
        ``1 - risk`` (see the module docstring).
    prices
        Price per row of each stage (e.g. USD), for ``cost_per_1000``.
    candidates
        Thresholds to test, in the fixed order to test them, most conservative first:
        numbers (one common threshold) or one tuple per candidate with a threshold per
        stage but the last. Default: :func:`default_candidates`. Choose them without
        looking at this frame, or the guarantee is void.

    Returns
    -------
    CascadeCalibration
        With ``reachable`` False when no candidate passes.

    Raises
    ------
    InputError
        A missing column, no stage, target or risk outside (0, 1), prices or candidates of
        the wrong length, or no labelled row.

    Examples
    --------
    >>> import polars as pl
    >>> rows = 400
    >>> df = pl.DataFrame({
    ...     "small": ["yes"] * rows, "small_conf": [0.99] * 300 + [0.6] * 100,
    ...     "big": ["yes"] * 300 + ["no"] * 100, "big_conf": [0.9] * rows,
    ...     "human": ["yes"] * 300 + ["no"] * 100,
    ... })
    >>> cal = calibrate_thresholds(df, [("small", "small_conf"), ("big", "big_conf")],
    ...                            "human", prices=[0.0, 0.002])
    >>> cal.escalate_below, cal.decided_share, cal.cost_per_1000
    ((0.61,), (0.75, 0.25), 0.5)
    """
    frame = to_polars(labelled).frame
    if not stages:
        raise InputError("a cascade needs at least one stage: (label column, confidence column)")
    for name, value in (("target_agreement", target_agreement), ("risk", risk)):
        if not 0.0 < float(value) < 1.0:
            raise InputError(f"{name} must be between 0 and 1, got {value!r}")
    columns = [c for pair in stages for c in pair] + [reference]
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"column {missing[0]!r} is not in the frame; columns: {frame.columns}")
    if prices is not None and len(prices) != len(stages):
        raise InputError(f"prices: one per stage ({len(stages)}), got {len(prices)}")
    grid = _candidates(candidates, len(stages))
    rows = frame.filter(pl.col(reference).is_not_null())
    if rows.height == 0:
        raise InputError(f"no row of {reference!r} holds a label to calibrate against")
    truth = _text(rows[reference])
    agrees = np.stack([_text(rows[label]) == truth for label, _ in stages])
    agrees &= np.stack([rows[label].is_not_null().to_numpy() for label, _ in stages])
    confidence = np.array(
        [_confidence(rows, label, conf) for label, conf in stages[:-1]], dtype=np.float64
    ).reshape(len(stages) - 1, rows.height)
    decided = _deciding_stage(confidence, grid)
    return _test_in_order(decided, agrees, grid, float(target_agreement), float(risk), prices)


def _candidates(candidates: Any, stages: int) -> np.ndarray:
    if candidates is None:
        return default_candidates(stages)
    grid = np.asarray(candidates, dtype=np.float64)
    if grid.ndim == 1:
        grid = np.repeat(grid[:, None], stages - 1, axis=1)
    if grid.ndim != 2 or grid.shape[1] != stages - 1 or grid.shape[0] == 0:
        raise InputError(
            f"candidates: numbers, or tuples of {stages - 1} threshold(s) (one per stage but "
            "the last)"
        )
    return grid


def _text(series: pl.Series) -> np.ndarray:
    values = series.cast(pl.String).to_list()
    return np.array([None if v is None else v.strip().casefold() for v in values], dtype=object)


def _confidence(rows: pl.DataFrame, label: str, column: str) -> np.ndarray:
    if not rows.schema[column].is_numeric():
        raise InputError(f"confidence column {column!r} holds {rows.schema[column]}, not numbers")
    # No confidence, or no verdict: the row cannot be trusted here and goes on.
    values = rows.select(
        pl.when(pl.col(label).is_not_null()).then(pl.col(column).cast(pl.Float64).fill_nan(None))
    ).to_series()
    return values.fill_null(-math.inf).to_numpy()


def _deciding_stage(confidence: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """For each candidate (rows of ``grid``) and labelled row, the stage that decides it."""
    stages = confidence.shape[0] + 1
    decided = np.full((grid.shape[0], confidence.shape[1]), stages - 1, dtype=np.int64)
    for k in range(stages - 2, -1, -1):
        trusted = confidence[k][None, :] >= grid[:, k][:, None]
        decided = np.where(trusted, k, decided)
    return decided


def _test_in_order(
    decided: np.ndarray,
    agrees: np.ndarray,
    grid: np.ndarray,
    target: float,
    risk: float,
    prices: Sequence[float] | None,
) -> CascadeCalibration:
    beta, binom = _scipy_distributions()
    stages, n = agrees.shape
    agreeing = np.take_along_axis(agrees, decided, axis=0).sum(axis=1)
    # P(Binomial(n, target) >= k): the exact p-value of "agreement < target".
    p_values = binom.sf(agreeing - 1, n, target)
    passed = p_values <= risk
    failures = np.flatnonzero(~passed)
    stop = int(failures[0]) if failures.size else len(grid)
    tested = np.arange(len(grid)) <= stop
    shares = np.stack([(decided == k).mean(axis=1) for k in range(stages)], axis=1)
    reach = 1.0 - np.cumsum(shares, axis=1) + shares
    cost = None if prices is None else 1000.0 * reach @ np.asarray(prices, dtype=np.float64)
    table = pl.DataFrame(
        [
            _lists("escalate_below", grid),
            pl.Series("agreement", agreeing / n),
            pl.Series("p_value", p_values),
            pl.Series("tested", tested),
            pl.Series("passed", passed & tested),
            _lists("decided_share", shares),
            pl.Series("cost_per_1000", cost, dtype=pl.Float64)
            if cost is not None
            else pl.Series("cost_per_1000", [None] * len(grid), dtype=pl.Float64),
        ]
    )
    pick = stop - 1
    at = max(pick, 0)
    lower = float(beta.ppf(risk, agreeing[at], n - agreeing[at] + 1)) if agreeing[at] else 0.0
    common = {
        "target_agreement": target,
        "risk": risk,
        "agreement": float(agreeing[at] / n),
        "agreement_lower": lower,
        "n": n,
        "table": table,
    }
    if pick < 0:
        return CascadeCalibration(
            reachable=False,
            escalate_below=None,
            decided_share=None,
            cost_per_1000=None,
            reason=(
                f"not reachable: the first candidate ({_first(grid[0])}) agrees on "
                f"{agreeing[0]} of {n} labelled rows ({agreeing[0] / n:.3f}, lower bound "
                f"{lower:.3f} at {1 - risk:.0%}), short of {target} with risk {risk}"
            ),
            **common,
        )
    share = tuple(float(s) for s in shares[pick])
    money = None if cost is None else float(cost[pick])
    spent = "" if money is None else f", {money:.4g} per 1,000 rows"
    return CascadeCalibration(
        reachable=True,
        escalate_below=tuple(float(t) for t in grid[pick]),
        decided_share=share,
        cost_per_1000=money,
        reason=(
            f"escalate_below={_thresholds(grid[pick])}: agreement {agreeing[pick] / n:.3f} on "
            f"{n} labelled rows (lower bound {lower:.3f} >= {target} at {1 - risk:.0%}); "
            f"stages decide {', '.join(f'{s:.1%}' for s in share)}{spent}"
        ),
        **common,
    )


def _scipy_distributions() -> tuple[Any, Any]:
    """scipy's beta and binomial distributions (the exact bound), imported on first use."""
    try:
        from scipy.stats import beta, binom
    except ModuleNotFoundError as exc:  # scipy is the `stats` extra
        raise ModuleNotFoundError(
            "cascade calibration needs scipy for its exact binomial bound: "
            "pip install 'framekit[stats]'"
        ) from exc
    return beta, binom


def _lists(name: str, values: np.ndarray) -> pl.Series:
    """A 2-d array as a column of lists (one list per candidate)."""
    if values.shape[1] == 0:
        return pl.Series(name, [[] for _ in range(len(values))], dtype=pl.List(pl.Float64))
    return pl.Series(name, values).cast(pl.List(pl.Float64))


def _first(row: np.ndarray) -> str:
    if np.isinf(row).all():
        return "every row decided by the last judge"
    return f"escalate_below={_thresholds(row)}"


def _thresholds(row: np.ndarray) -> str:
    return "[" + ", ".join("inf" if math.isinf(t) else f"{t:g}" for t in row) + "]"
