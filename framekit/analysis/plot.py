"""Charts of scored frames: ``fk.plot.distributions``, ``fk.plot.means``, ``fk.plot.save``.

Figures are built on ``matplotlib.figure.Figure`` directly, never through pyplot, so
nothing touches global state or needs a display: a figure renders with the Agg canvas when
saved, and shows inline in Jupyter when it is the value of a cell. matplotlib is imported
only when a chart is drawn (``pip install 'framekit[plot]'``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl

from framekit._dependencies import import_optional
from framekit._paths import check_regular_or_new
from framekit.analysis import _inputs
from framekit.analysis._table import terminal_safe
from framekit.analysis.summary import summarize

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# Bin widths tried, widest first: rubric scores (0, 0.25, ..., 1) get one wide bar per level,
# continuous scores (AnswerRelevancy's cosine) 21 bins 0.05 wide.
_STEPS = (1.0, 0.5, 0.25, 0.2, 0.1, 0.05)  # 1.0: a two-level rubric gets no empty 0.5 bin
_PANEL = (4.0, 3.0)  # inches per evaluator panel
_COLUMNS = 3
_LEGEND_COLUMNS = 8  # groups per legend line: more wrap onto further lines


def _figure(width: float, height: float) -> Figure:
    figure = import_optional("matplotlib.figure", extra="plot", purpose="framekit.plot")
    return figure.Figure(figsize=(width, height), layout="constrained")


def _edges(data: list[np.ndarray]) -> list[float]:
    """Bin edges centred on multiples of the widest step all scores are multiples of."""
    values = np.concatenate(data) if data else np.empty(0)
    step = next(
        (s for s in _STEPS if np.allclose(values / s, np.round(values / s), atol=1e-9)),
        _STEPS[-1],
    )
    return [i * step - step / 2 for i in range(round(1 / step) + 2)]


def _label(value: object) -> str:
    # Control characters from the data have no glyph: drawn as their escapes instead.
    return "(null)" if value is None else terminal_safe(str(value))


def distributions(
    scored: _inputs.FrameLike,
    evaluators: str | Sequence[str] | None = None,
    by: str | None = None,
) -> Figure:
    """Histogram of the scores of each evaluator, one panel each, groups side by side.

    Rows whose evaluation failed (errors) have no score; each panel's title counts them.

    Parameters
    ----------
    scored
        A frame returned by ``evaluate_dataframe``.
    evaluators
        Evaluators to draw; default all.
    by
        Optional group column: one bar colour per group.

    Returns
    -------
    matplotlib.figure.Figure
        Four by three inches per panel, at most three panels per row; with ``by``, one
        legend of the groups above the panels (``fig.legends[0]``), clear of every bar.

    Examples
    --------
    >>> df = pl.DataFrame({"coherence_score": [1.0, 0.75, None],
    ...                    "coherence_error": [None, None, "timeout"]})
    >>> fig = distributions(df)
    >>> fig.axes[0].get_title()
    'coherence\\n2 scored, 1 error'
    """
    frame = _inputs.to_polars(scored)
    names = _inputs.resolve_evaluators(frame, evaluators)
    keys = _inputs.resolve_columns(frame, by, "by")
    groups = frame.get_column(by).unique().sort(nulls_last=True).to_list() if by else [None]
    ncols = min(_COLUMNS, len(names))
    nrows = math.ceil(len(names) / ncols)
    fig = _figure(_PANEL[0] * ncols, _PANEL[1] * nrows)
    for i, name in enumerate(names):
        ax = fig.add_subplot(nrows, ncols, i + 1)
        score = _inputs.score(name)
        series = [
            (frame.filter(pl.col(keys[0]).eq_missing(g)) if keys else frame)
            .select(score)
            .to_series()
            for g in groups
        ]
        data = [s.drop_nulls().to_numpy() for s in series]
        errors = sum(s.null_count() for s in series)
        edges = _edges(data)
        ax.hist(data, bins=edges, label=[_label(g) for g in groups] if keys else None)
        ax.set_xlim(edges[0], edges[-1])
        if len(edges) <= 12:  # a rubric: one tick per level
            ax.set_xticks([(lo + hi) / 2 for lo, hi in itertools.pairwise(edges)])
        ax.set_xlabel("score")
        ax.set_ylabel("rows")
        counts = f"{sum(d.size for d in data)} scored, {errors} error{'' if errors == 1 else 's'}"
        ax.set_title(f"{name}\n{counts}", fontsize=9)
    if keys:
        _legend(fig, by)
    return fig


def _legend(fig: Figure, title: str | None) -> None:
    """One legend for the figure, above the panels: inside an axes it would cover bars
    (a group's colour is the same in every panel, so one legend says it all)."""
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(
        handles,
        labels,
        title=title,
        loc="outside upper center",
        ncols=min(len(labels), _LEGEND_COLUMNS),
        fontsize=8,
        title_fontsize=8,
    )


def means_from_summary(summary: pl.DataFrame, by: str | None) -> Figure:
    """Grouped bars of ``mean`` with ``[ci_low, ci_high]`` error bars from ``summarize``."""
    names = summary.get_column("evaluator").unique(maintain_order=True).to_list()
    groups = summary.get_column(by).unique(maintain_order=True).to_list() if by else [None]
    width = 0.8 / len(groups)
    fig = _figure(max(5.0, 1.0 + len(names) * (0.6 + 0.4 * len(groups))), 4.0)
    ax = fig.add_subplot()
    x = np.arange(len(names))
    for j, g in enumerate(groups):
        rows = summary.filter(pl.col(by).eq_missing(g)) if by else summary
        stats = {r["evaluator"]: r for r in rows.iter_rows(named=True)}
        mean = np.array([_nan(stats.get(n, {}).get("mean")) for n in names])
        low = np.array([_nan(stats.get(n, {}).get("ci_low")) for n in names])
        high = np.array([_nan(stats.get(n, {}).get("ci_high")) for n in names])
        ax.bar(
            x + (j - (len(groups) - 1) / 2) * width,
            np.nan_to_num(mean),
            width,
            yerr=np.nan_to_num(np.vstack([mean - low, high - mean])),
            capsize=3,
            label=_label(g) if by else None,
        )
    ax.set_xticks(x, names, rotation=20 if len(names) > 3 else 0)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("mean score")
    if by:
        _legend(fig, by)
    return fig


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def means(
    scored: _inputs.FrameLike,
    by: str | None = "strategy",
    evaluators: str | Sequence[str] | None = None,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Figure:
    """Mean score per evaluator and group, with bootstrap interval error bars.

    The numbers are those of ``fk.summarize(scored, by, ...)`` with the same options.

    Parameters
    ----------
    scored
        A frame returned by ``evaluate_dataframe``.
    by
        Group column (one bar per group); ``None`` for one bar per evaluator.
    evaluators
        Evaluators to draw; default all.
    confidence, n_resamples, seed
        Passed to ``summarize``.

    Returns
    -------
    matplotlib.figure.Figure
        With ``by``, the legend of the groups sits above the bars (``fig.legends[0]``).

    Examples
    --------
    >>> df = pl.DataFrame({"strategy": ["a", "b"], "coherence_score": [1.0, 0.5],
    ...                    "coherence_error": [None, None]})
    >>> [t.get_text() for t in means(df, n_resamples=100).legends[0].get_texts()]
    ['a', 'b']
    """
    summary = summarize(
        scored,
        by,
        evaluators=evaluators,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
    )
    return means_from_summary(summary, by)


def save(fig: Figure, path: str | Path, *, dpi: int = 100) -> Path:
    """Write ``fig`` to ``path`` (format from the suffix: png, svg, pdf...); return the path.

    A PNG is ``figure width x dpi`` by ``figure height x dpi`` pixels.

    Examples
    --------
    >>> import tempfile
    >>> df = pl.DataFrame({"coherence_score": [1.0], "coherence_error": [None]})
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     save(distributions(df), Path(tmp) / "scores.png").read_bytes()[:4]
    b'\\x89PNG'
    """
    target = Path(path)
    check_regular_or_new(target, "path")
    fig.savefig(target, dpi=dpi)
    return target


def chart_names(by: str | None = None) -> tuple[str, str]:
    """File names of the two standard charts (used by ``framekit report --png`` and ``demo``):
    ``score_distributions.png`` and ``scores_by_<by>.png`` (``scores.png`` without groups)."""
    return "score_distributions.png", f"scores_by_{by}.png" if by else "scores.png"


def save_charts(
    scored: _inputs.FrameLike,
    out_dir: str | Path,
    by: str | None = None,
    evaluators: str | Sequence[str] | None = None,
) -> list[Path]:
    """Write the score distributions and the means chart into ``out_dir``; their paths.

    Examples
    --------
    >>> save_charts(scored, "charts", by="strategy")  # doctest: +SKIP
    [PosixPath('charts/score_distributions.png'), PosixPath('charts/scores_by_strategy.png')]
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dist_name, means_name = chart_names(by)
    return [
        save(distributions(scored, evaluators, by), out / dist_name),
        save(means(scored, by, evaluators), out / means_name),
    ]


__all__ = ["chart_names", "distributions", "means", "save", "save_charts"]
