"""``write_html_report``: one self-contained HTML file of summaries, comparisons and charts."""

from __future__ import annotations

import base64
import html
import io
import math
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from framekit.analysis._inputs import FrameLike, resolve_evaluators, to_polars
from framekit.analysis.report import (
    compare,
    describe_comparison,
    failures,
    summarize,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _cell(value: object) -> str:
    """A table cell's text: floats to 3 decimals, label counts as ``label: n, ...``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        return f"{value:.2e}" if value != 0 and abs(value) < 1e-3 else f"{value:.3f}"
    if isinstance(value, list):
        return ", ".join(
            f"{v['label']}: {v['count']}" if isinstance(v, dict) and "label" in v else str(v)
            for v in value
        )
    return str(value)


def _html_table(frame: pl.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
    numeric = [dtype.is_numeric() for dtype in frame.dtypes]
    body = "\n".join(
        "<tr>"
        + "".join(
            f'<td class="num">{html.escape(_cell(v))}</td>'
            if num
            else f"<td>{html.escape(_cell(v))}</td>"
            for v, num in zip(row, numeric, strict=True)
        )
        + "</tr>"
        for row in frame.iter_rows()
    )
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def _png_tag(fig: Figure, alt: str) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}"></figure>'


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 72rem; color: #222; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.meta { color: #666; } figure { margin: 1rem 0; } img { max-width: 100%; }
"""


def write_html_report(
    scored: FrameLike,
    path: str | Path,
    *,
    by: str | None = None,
    on: str | Sequence[str] | None = None,
    title: str = "framekit report",
    evaluators: str | Sequence[str] | None = None,
) -> Path:
    """Write one self-contained HTML file: summary tables, comparison, charts, failures.

    Charts are embedded as base64 PNG (they need matplotlib: ``pip install
    'framekit[plot]'``; without it the report says so and has tables only). Every string
    taken from the data is HTML-escaped.

    Parameters
    ----------
    scored
        A frame returned by ``evaluate_dataframe``.
    path
        Where to write the file.
    by
        Group column: adds per-group summaries, a ``compare`` table and a means chart.
    on
        Pairing key for the comparison (see ``compare``).
    title
        Page title and heading.
    evaluators
        Evaluators to report on; default all.

    Returns
    -------
    pathlib.Path
        The path written.

    Examples
    --------
    >>> import tempfile
    >>> df = pl.DataFrame({"coherence_score": [1.0, 0.5], "coherence_error": [None, None]})
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     out = write_html_report(df, Path(tmp) / "report.html")
    ...     "<table>" in out.read_text()
    True
    """
    frame = to_polars(scored)
    names = resolve_evaluators(frame, evaluators)
    sections = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="meta">{frame.height} rows; evaluators: {html.escape(", ".join(names))}</p>',
        "<h2>Summary</h2>",
        _html_table(summarize(frame, evaluators=names)),
    ]
    summary_by = None
    if by is not None:
        summary_by = summarize(frame, by, evaluators=names)
        comparison = compare(frame, by, on, names)
        sentences = "".join(
            f"<li>{html.escape(s)}</li>" for s in describe_comparison(comparison).splitlines()
        )
        sections += [
            f"<h2>Summary by {html.escape(by)}</h2>",
            _html_table(summary_by),
            f"<h2>Comparison of {html.escape(by)}</h2>",
            f"<ul>{sentences}</ul>",
            _html_table(comparison),
        ]
    sections.append("<h2>Charts</h2>")
    try:
        from framekit.analysis import plot

        sections.append(_png_tag(plot.distributions(frame, names, by), "score distributions"))
        if summary_by is not None and by is not None:
            sections.append(_png_tag(plot.means_from_summary(summary_by, by), f"mean score by {by}"))
    except ModuleNotFoundError as exc:
        warnings.warn(f"HTML report written without charts: {exc}", stacklevel=2)
        sections.append(f"<p>{html.escape(str(exc))}</p>")
    errors = failures(frame, evaluators=names)
    if errors.height:
        sections += ["<h2>Failures</h2>", _html_table(errors)]
    document = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(sections)
        + "\n</body>\n</html>\n"
    )
    target = Path(path)
    target.write_text(document, encoding="utf-8")
    return target
