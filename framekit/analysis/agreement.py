"""``fk.agreement``: how far a judge agrees with people (or with another judge).

One row per evaluator (and group): for labels, accuracy, Cohen's kappa, quadratic-weighted
kappa, per-label precision and recall and the confusion matrix; for numbers, Spearman,
Kendall and Pearson; every figure with a percentile bootstrap interval over rows.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from framekit._errors import InputError
from framekit._frames import to_polars
from framekit.analysis import _measures as m
from framekit.analysis import _outcome as outcome
from framekit.analysis._rubric import (
    Rubric,
    check_labels,
    evaluator_names,
    human_codes,
    is_label_dtype,
    rubric_of,
)

__all__ = ["agreement"]

_FIGURES = ("accuracy", "kappa", "weighted_kappa", "spearman", "kendall", "pearson")
# Kendall's tau needs one scipy call per resample: it gets fewer resamples on big tables.
_KENDALL_WORK = 2_000_000


def agreement(
    scored: Any,
    human: str | None = None,
    evaluators: str | Sequence[str] | None = None,
    by: str | None = None,
    *,
    between: tuple[str, str] | None = None,
    rubric: Mapping[str, float] | Any = None,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> pl.DataFrame:
    """Agreement of each evaluator with a column of human judgements.

    Parameters
    ----------
    scored
        A frame with framekit's result columns (polars, pandas, Arrow) and the human column.
    human
        The column of human judgements. Strings are labels, read on the evaluator's rubric
        (the label/score pairs seen in the frame, or ``rubric``); booleans are compared with
        ``<name>_passed``; numbers (e.g. 1-5 ratings) are compared with ``<name>_score``
        by rank and linear correlation.
    evaluators
        Evaluator names (default: every evaluator with results in the frame).
    by
        A column to report agreement per group of.
    between
        Instead of ``human``: two columns to compare with each other, e.g. two evaluators'
        ``_score`` (or ``_label``) columns, or one evaluator under two judges. The first
        plays the reference (rows of the confusion matrix). Two score columns with at most
        ten distinct values in [0, 1] between them (rubric scores) get kappa too.
    rubric
        Label -> score for human labels the frame's judge never chose, or the evaluator
        itself (its ``choices``): ``rubric=Coherence()``.
    confidence, n_resamples, seed
        The bootstrap: interval level, resamples, and the seed that makes it repeatable.

    Returns
    -------
    polars.DataFrame
        One row per evaluator (and group): ``evaluator``, ``reference``, ``kind``
        (``labels`` or ``numbers``), ``n`` (rows compared), ``n_errors`` (rows with a human
        judgement whose evaluation failed, left out), ``n_unlabelled`` (rows without a
        human judgement: null, or NaN in a number column, left out; null with
        ``between``), then for each figure in accuracy, kappa, weighted_kappa
        (quadratic), spearman, kendall, pearson: the value and ``<figure>_ci_low`` /
        ``<figure>_ci_high`` (null where it does not apply);
        ``labels``, ``confusion`` (rows: reference, columns: judge) and ``per_label``
        (label, support, precision, recall, with intervals).

    Raises
    ------
    InputError
        A missing column, no evaluator results, an evaluator whose every evaluation
        failed, or a human label outside the rubric (the message names the row and the
        label).

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({
    ...     "human": ["relevant", "irrelevant", "relevant", "irrelevant"],
    ...     "retrieval_relevance_score": [1.0, 0.0, 0.0, 0.0],
    ...     "retrieval_relevance_label": ["relevant", "irrelevant", "irrelevant", "irrelevant"],
    ...     "retrieval_relevance_error": [None, None, None, None],
    ... })
    >>> row = agreement(df, human="human", n_resamples=200).row(0, named=True)
    >>> row["accuracy"], row["kappa"], row["confusion"]
    (0.75, 0.5, [[2, 0], [1, 1]])
    """
    frame = to_polars(scored).frame
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence must be between 0 and 1, got {confidence!r}")
    if n_resamples < 1:
        raise InputError(f"n_resamples must be at least 1, got {n_resamples}")
    if (human is None) == (between is None):
        raise InputError("give exactly one of human=COLUMN or between=(COLUMN_A, COLUMN_B)")
    _require(frame, [c for c in (human, by, *(between or ())) if c is not None])
    groups = _groups(frame, by)
    rows: list[dict[str, Any]] = []
    if between is not None:
        a, b = between
        for key, part in groups:
            row = _compare_columns(part, a, b, confidence, n_resamples, seed)
            rows.append({"evaluator": f"{a} vs {b}", **_group(by, key), **row})
        return _frame(rows, by)
    assert human is not None
    for name in _names(frame, evaluators):
        _some_scored(frame, name, human)
        scale = rubric_of(frame, name, rubric)
        if is_label_dtype(frame.schema[human]):
            try:
                check_labels(frame, human, name, scale)
            except InputError as exc:
                if evaluators is not None:
                    raise
                # Labels usually belong to one evaluator's rubric: say how to pick it.
                raise InputError(f"{exc}, or evaluators=<the evaluator they rate>") from None
        for key, part in groups:
            row = _against_human(part, human, name, scale, confidence, n_resamples, seed)
            rows.append({"evaluator": name, **_group(by, key), **row})
    return _frame(rows, by)


def _require(frame: pl.DataFrame, columns: Sequence[str]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"column {missing[0]!r} is not in the frame; columns: {frame.columns}")


def _names(frame: pl.DataFrame, evaluators: str | Sequence[str] | None) -> list[str]:
    found = evaluator_names(frame)
    if evaluators is None:
        if not found:
            raise InputError("no evaluator results (<name>_score and <name>_error) in the frame")
        return found
    wanted = [evaluators] if isinstance(evaluators, str) else list(evaluators)
    missing = [n for n in wanted if n not in found]
    if missing:
        raise InputError(f"no results for evaluator {missing[0]!r}; the frame has {found}")
    return wanted


def _some_scored(frame: pl.DataFrame, name: str, human: str) -> None:
    """Refuse an evaluator whose every evaluation failed: there is nothing to compare (and
    its rubric, read from the scored rows, would be empty)."""
    errors = frame.select(outcome.error_count(name)).item()
    if frame.height and errors == frame.height:
        reasons = frame.get_column(f"{name}_error").drop_nulls()
        example = f", e.g. {reasons[0]!r}" if reasons.len() else ""
        raise InputError(
            f"all {errors} evaluations of {name} failed{example}: there is nothing to "
            f"compare with {human!r}; see the {name}_error column"
        )


def _labelled(frame: pl.DataFrame, column: str) -> pl.Expr:
    """Rows where ``column`` holds a judgement: not null, and not NaN (a number column's
    way of saying "not labelled")."""
    present = pl.col(column).is_not_null()
    if frame.schema[column].is_float():
        present = present & ~pl.col(column).is_nan()
    return present


def _groups(frame: pl.DataFrame, by: str | None) -> list[tuple[Any, pl.DataFrame]]:
    if by is None:
        return [(None, frame)]
    return [(key[0], part) for key, part in frame.group_by(by, maintain_order=True)]


def _group(by: str | None, key: Any) -> dict[str, Any]:
    return {} if by is None else {by: key}


def _against_human(
    part: pl.DataFrame,
    human: str,
    name: str,
    scale: Rubric,
    confidence: float,
    n_resamples: int,
    seed: int,
) -> dict[str, Any]:
    flags = part.select(_labelled(part, human).alias("labelled"), outcome.is_error(name))
    labelled, error = flags.to_series(0), flags.to_series(1)
    rows = part.filter(labelled & ~error)
    dtype = part.schema[human]
    base = {
        "reference": human,
        "n_errors": int((labelled & error).sum()),
        "n_unlabelled": int((~labelled).sum()),
    }
    if dtype == pl.Boolean:
        if f"{name}_passed" not in part.columns:
            raise InputError(f"a boolean human column needs {name}_passed in the frame")
        ref = rows[human].cast(pl.Int64).to_numpy()
        judged = rows[f"{name}_passed"].cast(pl.Int64).to_numpy()
        labels = ["not passed", "passed"]
        return {
            **base,
            "kind": "labels",
            **_categorical(ref, judged, labels, None, None, confidence, n_resamples, seed),
        }
    if is_label_dtype(dtype):
        if f"{name}_label" not in part.columns:
            raise InputError(f"human labels need {name}_label in the frame to compare with")
        ref = human_codes(rows, human, scale)
        judged = human_codes(rows, f"{name}_label", scale)
        values = np.asarray(scale.scores, dtype=np.float64)
        return {
            **base,
            "kind": "labels",
            **_categorical(
                ref,
                judged,
                list(scale.labels),
                values[ref],
                values[judged],
                confidence,
                n_resamples,
                seed,
            ),
        }
    if not dtype.is_numeric():
        raise InputError(f"human column {human!r} holds {dtype}: give labels, booleans or numbers")
    x = rows[human].cast(pl.Float64).to_numpy()
    y = rows[f"{name}_score"].cast(pl.Float64).to_numpy()
    return {**base, "kind": "numbers", **_numeric(x, y, confidence, n_resamples, seed)}


def _compare_columns(
    part: pl.DataFrame, a: str, b: str, confidence: float, n_resamples: int, seed: int
) -> dict[str, Any]:
    both = part.filter(_labelled(part, a) & _labelled(part, b))
    base = {"reference": a, "n_errors": part.height - both.height}
    da, db = part.schema[a], part.schema[b]
    if is_label_dtype(da) and is_label_dtype(db):
        labels = sorted(set(both[a].cast(pl.String)) | set(both[b].cast(pl.String)))
        code = {label: i for i, label in enumerate(labels)}
        ref = np.array([code[v] for v in both[a].cast(pl.String)], dtype=np.int64)
        judged = np.array([code[v] for v in both[b].cast(pl.String)], dtype=np.int64)
        # Unordered label sets: no weighted kappa, no correlations.
        return {
            **base,
            "kind": "labels",
            **_categorical(
                ref, judged, labels, None, None, confidence, n_resamples, seed, ordinal=False
            ),
        }
    if not (da.is_numeric() and db.is_numeric()):
        raise InputError(f"between columns must both be labels or both numbers: {a} {da}, {b} {db}")
    x = both[a].cast(pl.Float64).to_numpy()
    y = both[b].cast(pl.Float64).to_numpy()
    levels = np.unique(np.concatenate([x, y]))
    if len(levels) <= 10 and levels.min() >= 0.0 and levels.max() <= 1.0:
        # Two rubric scores on framekit's [0, 1] scale (e.g. five levels): kappa as well
        # as correlations. Other numbers (1-5 ratings vs scores) only correlate.
        ref = np.searchsorted(levels, x).astype(np.int64)
        judged = np.searchsorted(levels, y).astype(np.int64)
        labels = [f"{v:g}" for v in levels]
        return {
            **base,
            "kind": "labels",
            **_categorical(ref, judged, labels, x, y, confidence, n_resamples, seed),
        }
    return {**base, "kind": "numbers", **_numeric(x, y, confidence, n_resamples, seed)}


def _categorical(
    ref: np.ndarray,
    judged: np.ndarray,
    labels: list[str],
    x: np.ndarray | None,
    y: np.ndarray | None,
    confidence: float,
    n_resamples: int,
    seed: int,
    *,
    ordinal: bool = True,
) -> dict[str, Any]:
    k, n = len(labels), len(ref)
    out: dict[str, Any] = {"n": n, "labels": labels}
    if n == 0:
        return {**out, "confusion": None, "per_label": None}
    table = m.confusion(ref, judged, k)
    idx = m.resample_indices(n, n_resamples, seed)
    boot = m.bootstrap_confusions(ref, judged, k, idx)
    accuracy = np.trace(table) / n
    boot_accuracy = np.trace(boot, axis1=1, axis2=2) / n
    _put(out, "accuracy", float(accuracy), boot_accuracy, confidence)
    _put(out, "kappa", float(m.kappa(table)), m.kappa(boot), confidence)
    if ordinal:
        _put(
            out,
            "weighted_kappa",
            float(m.kappa(table, "quadratic")),
            m.kappa(boot, "quadratic"),
            confidence,
        )
    out["confusion"] = table.tolist()
    out["per_label"] = _per_label(table, boot, labels, confidence)
    if ordinal and x is not None and y is not None:
        # Without scipy, labels still get kappa; the correlations stay null, and one
        # warning per process says why and what installs it.
        try:
            out.update(_numeric(x, y, confidence, n_resamples, seed))
        except ModuleNotFoundError as exc:
            _warn_once(f"{exc}; spearman and kendall are null without it")
    return out


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        warnings.warn(message, UserWarning, stacklevel=3)


def _per_label(
    table: np.ndarray, boot: np.ndarray, labels: list[str], confidence: float
) -> list[dict[str, Any]]:
    precision, recall = m.precision_recall(table)
    boot_p, boot_r = m.precision_recall(boot)
    rows = []
    for i, label in enumerate(labels):
        p_low, p_high = m.interval(boot_p[:, i], confidence)
        r_low, r_high = m.interval(boot_r[:, i], confidence)
        rows.append(
            {
                "label": label,
                "support": int(table[i].sum()),
                "precision": _num(precision[i]),
                "precision_ci_low": p_low,
                "precision_ci_high": p_high,
                "recall": _num(recall[i]),
                "recall_ci_low": r_low,
                "recall_ci_high": r_high,
            }
        )
    return rows


def _numeric(
    x: np.ndarray, y: np.ndarray, confidence: float, n_resamples: int, seed: int
) -> dict[str, Any]:
    n = len(x)
    out: dict[str, Any] = {"n": n}
    if n < 3:
        return out
    idx = m.resample_indices(n, n_resamples, seed)
    bx, by_ = x[idx], y[idx]
    _put(out, "spearman", float(m.spearman_rows(x, y)), m.spearman_rows(bx, by_), confidence)
    _put(out, "pearson", float(m.pearson_rows(x, y)), m.pearson_rows(bx, by_), confidence)
    k_resamples = max(200, min(n_resamples, _KENDALL_WORK // max(n, 1)))
    k_boot = np.array([m.kendall(bx[i], by_[i]) for i in range(min(k_resamples, n_resamples))])
    _put(out, "kendall", m.kendall(x, y), k_boot, confidence)
    return out


def _num(value: float) -> float | None:
    return None if not np.isfinite(value) else float(value)


def _put(out: dict[str, Any], figure: str, value: float, samples: Any, confidence: float) -> None:
    out[figure] = _num(value)
    low, high = m.interval(samples, confidence) if out[figure] is not None else (None, None)
    out[f"{figure}_ci_low"], out[f"{figure}_ci_high"] = low, high


def _frame(rows: list[dict[str, Any]], by: str | None) -> pl.DataFrame:
    figures = [c for f in _FIGURES for c in (f, f"{f}_ci_low", f"{f}_ci_high")]
    head = [
        "evaluator",
        *([by] if by else []),
        "reference",
        "kind",
        "n",
        "n_errors",
        "n_unlabelled",
    ]
    tail = ["labels", "confusion", "per_label"]
    schema: dict[str, Any] = {
        "kind": pl.String,
        "reference": pl.String,
        "evaluator": pl.String,
        "n": pl.Int64,
        "n_errors": pl.Int64,
        "n_unlabelled": pl.Int64,
        "labels": pl.List(pl.String),
        "confusion": pl.List(pl.List(pl.Int64)),
        **{c: pl.Float64 for c in figures},
    }
    columns = [*head, *figures, *tail]
    data = {c: [r.get(c) for r in rows] for c in columns}
    return pl.DataFrame(
        data, schema_overrides={c: t for c, t in schema.items() if c in data}, strict=False
    )
