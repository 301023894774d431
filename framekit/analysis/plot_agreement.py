"""``fk.plot.agreement``: a confusion matrix and a calibration plot for one evaluator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from framekit._dependencies import import_optional
from framekit._errors import InputError
from framekit._frames import to_polars
from framekit.analysis._rubric import check_labels, is_label_dtype, rubric_of
from framekit.analysis.agreement import agreement as _agreement

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def agreement(
    scored: Any,
    human: str,
    evaluator: str,
    *,
    rubric: Mapping[str, float] | Any = None,
) -> Figure:
    """Confusion matrix (people vs judge) and calibration plot of one evaluator.

    The calibration panel puts each judge score level (or a tenth of the score range) on
    the x axis and what people said about those rows on the y axis: the mean rubric score
    of their labels, the share they passed (booleans), or their mean rating rescaled to
    [0, 1] (numbers). A well-calibrated judge follows the diagonal. Numbers alone (no
    labels) leave the confusion panel out.

    Parameters
    ----------
    scored
        A scored frame with ``human`` and the evaluator's result columns.
    human
        The column of human judgements (labels, booleans or numbers).
    evaluator
        The evaluator's name.
    rubric
        As for :func:`framekit.agreement`: extra labels, or the evaluator itself.

    Returns
    -------
    matplotlib.figure.Figure

    Examples
    --------
    >>> import polars as pl
    >>> df = pl.DataFrame({"human": [True, False, True],
    ...                    "rel_score": [1.0, 0.0, 0.0], "rel_passed": [True, False, False],
    ...                    "rel_error": [None, None, None]})
    >>> len(agreement(df, "human", "rel").axes)
    2
    """
    Figure = import_optional("matplotlib.figure", extra="plot", purpose="fk.plot").Figure
    frame = to_polars(scored).frame
    row = _agreement(frame, human=human, evaluators=[evaluator], rubric=rubric, n_resamples=1).row(
        0, named=True
    )
    has_matrix = row["confusion"] is not None
    fig = Figure(figsize=(9.0 if has_matrix else 4.5, 4.0), layout="constrained")
    axes = fig.subplots(1, 2) if has_matrix else [fig.subplots(1, 1)]
    # What the figure is about goes above both panels: a long panel title would run into
    # the other panel's axis label.
    fig.suptitle(_headline(evaluator, human, row))
    if has_matrix:
        _matrix(axes[0], np.asarray(row["confusion"]), row["labels"], human, evaluator)
    _calibration(axes[-1], frame, human, evaluator, rubric)
    return fig


def _headline(name: str, human: str, row: dict[str, Any]) -> str:
    """``relevance vs human: weighted kappa 0.58, n = 60`` (no kappa for numbers)."""
    if row["confusion"] is None:
        return f"{name} vs {human}: n = {row['n']}"
    several = len(row["labels"]) > 2
    kappa = row["weighted_kappa"] if several else row["kappa"]
    shown = "n/a" if kappa is None else f"{kappa:.2f}"
    return f"{name} vs {human}: {'weighted kappa' if several else 'kappa'} {shown}, n = {row['n']}"


def _matrix(ax: Any, table: np.ndarray, labels: list[str], human: str, name: str) -> None:
    ax.imshow(table, cmap="Blues")
    for (i, j), count in np.ndenumerate(table):
        dark = count > table.max() / 2
        ax.text(j, i, str(count), ha="center", va="center", color="white" if dark else "black")
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel(f"judge ({name})")
    ax.set_ylabel(f"people ({human})")
    ax.set_title("confusion matrix")


def _human_values(frame: pl.DataFrame, human: str, name: str, rubric: Any) -> np.ndarray:
    dtype = frame.schema[human]
    if dtype == pl.Boolean:
        return frame[human].cast(pl.Float64).to_numpy()
    if is_label_dtype(dtype):
        scale = rubric_of(frame, name, rubric)
        check_labels(frame, human, name, scale)
        codes = [scale.code(v) for v in frame[human].cast(pl.String)]
        return np.array([scale.scores[c] for c in codes if c is not None])
    if not dtype.is_numeric():
        raise InputError(f"human column {human!r} holds {dtype}")
    values = frame[human].cast(pl.Float64).to_numpy()
    span = float(np.ptp(values)) or 1.0
    return (values - values.min()) / span


def _calibration(ax: Any, frame: pl.DataFrame, human: str, name: str, rubric: Any) -> None:
    rows = frame.filter(pl.col(human).is_not_null() & pl.col(f"{name}_score").is_not_null())
    scores = rows[f"{name}_score"].cast(pl.Float64).to_numpy()
    people = _human_values(rows, human, name, rubric)
    levels = np.unique(scores)
    if len(levels) > 10:
        edges = np.linspace(0.0, 1.0, 11)
        bins = np.clip(np.digitize(scores, edges[1:-1]), 0, 9)
        centres = (edges[:-1] + edges[1:]) / 2
    else:
        bins = np.searchsorted(levels, scores)
        centres = levels
    xs, ys, ns = [], [], []
    for b, centre in enumerate(centres):
        members = bins == b
        if members.any():
            xs.append(centre)
            ys.append(float(people[members].mean()))
            ns.append(int(members.sum()))
    ax.plot([0, 1], [0, 1], color="0.7", linestyle="--", linewidth=1)
    ax.plot(xs, ys, marker="o")
    for x, y, n in zip(xs, ys, ns):
        # Each count sits above its point (below it at the top), turned inwards at the
        # sides, so none is drawn over the frame or cut off at the figure's edge; a white
        # backing keeps it readable where the line passes under it.
        top = y > 0.85
        ax.annotate(
            f"n={n}",
            (x, y),
            textcoords="offset points",
            xytext=(0, -8 if top else 8),
            ha="left" if x < 0.15 else "right" if x > 0.85 else "center",
            va="top" if top else "bottom",
            fontsize=8,
            bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none"},
        )
    ax.set_xlim(-0.05, 1.05)
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel(f"judge score ({name})")
    ax.set_ylabel(f"people ({human})\nmean on [0, 1]")
    ax.set_title("calibration")
