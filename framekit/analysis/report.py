"""``write_html_report``: one self-contained HTML file of summaries, comparisons and charts."""

from __future__ import annotations

import base64
import html
import io
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from framekit import _provenance
from framekit._paths import check_regular_or_new
from framekit.analysis._inputs import FrameLike, resolve_evaluators, to_polars
from framekit.analysis._report_rows import rows_section
from framekit.analysis._report_side_by_side import side_by_side_section
from framekit.analysis.summary import (
    DECISION_COLUMNS,
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


def _text_cell(text: str) -> str:
    # Long text keeps a readable width; on a phone the table scrolls instead of wrapping
    # every word onto its own line.
    css = ' class="text"' if len(text) > 30 else ""
    return f"<td{css}>{html.escape(text)}</td>"


def _html_table(frame: pl.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in frame.columns)
    numeric = [dtype.is_numeric() for dtype in frame.dtypes]
    body = "\n".join(
        "<tr>"
        + "".join(
            f'<td class="num">{html.escape(_cell(v))}</td>' if num else _text_cell(_cell(v))
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
body { font-family: system-ui, sans-serif; margin: 1.5rem auto; max-width: 96rem; color: #222;
       padding: 0 1rem; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
#rows th { cursor: pointer; } th { white-space: nowrap; }
td.text { min-width: 12rem; } table.cards td.text { min-width: 9rem; max-width: 22rem; }
table.cards td.text { overflow-wrap: break-word; }
details summary { cursor: pointer; } details ol { margin: 0.2rem 0; padding-left: 1.2rem; }
details .full { white-space: pre-wrap; } .err { color: #a00; }
#pairs td .score { white-space: nowrap; } #pairs td .field { margin-top: 0.2rem; }
.scroll { overflow-x: auto; max-width: 100%; }
.meta { color: #666; } figure { margin: 1rem 0; } img { max-width: 100%; height: auto; }
.note { background: #fff6d6; border-left: 4px solid #e0b400; padding: 0.4rem 0.7rem; }
dl.prov { display: grid; grid-template-columns: max-content 1fr; gap: 0.15rem 1rem;
          font-size: 0.85rem; } dl.prov dt { color: #666; } dl.prov dd { margin: 0; }
.filters label { margin-right: 0.8rem; white-space: nowrap; } .filters { margin: 0.5rem 0; }
nav ul { padding-left: 1.2rem; }
@media (max-width: 600px) { body { margin: 0.5rem auto; } table { font-size: 0.75rem; }
  /* One card per row: every cell on a line of its own, named by its column. */
  table.cards, table.cards tbody, table.cards tr, table.cards td { display: block; }
  table.cards thead { display: none; } table.cards tr[hidden] { display: none; }
  table.cards tr { border: 1px solid #ccc; margin: 0 0 0.6rem; padding: 0.3rem 0.5rem; }
  table.cards td { border: none; padding: 0.1rem 0; max-width: none; min-width: 0;
                   text-align: left; }
  table.cards td:empty { display: none; }
  table.cards td::before { content: attr(data-col) ": "; color: #666; font-weight: 600; }
  /* A score line wraps inside its card; a wide table scrolls inside its own box: either
     sticking out would make the whole page wider than the phone (and scroll sideways). */
  #pairs td .score { white-space: normal; overflow-wrap: anywhere; } }
"""

MAX_GROUPS = 30  # groups beyond this: no pairwise comparison, summary rows capped


def too_few_groups(frame: pl.DataFrame, by: str) -> str | None:
    """Why ``by`` cannot be compared (fewer than two groups besides nulls), or None.

    The report is written without the comparison and says so, instead of refusing it.

    Examples
    --------
    >>> too_few_groups(pl.DataFrame({"g": ["a", "a", None]}), "g")
    "a comparison needs two groups; 'g' has one ('a') and nulls, so the report has none"
    """
    column = frame.get_column(by)
    named = column.drop_nulls().unique().sort().to_list()
    if len(named) >= 2:
        return None
    has = f"one ({named[0]!r})" if named else "none"
    nulls = " and nulls" if column.null_count() else ""
    return f"a comparison needs two groups; {by!r} has {has}{nulls}, so the report has none"


def _scroll(table: str) -> str:
    return f'<div class="scroll">{table}</div>'


def _without_null_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """Drop columns that are null in every row (e.g. pairing counts of unpaired data)."""
    if frame.height == 0:
        return frame
    return frame.select(
        [c for c in frame.columns if frame.get_column(c).null_count() < frame.height]
    )


def scrolled_table(frame: pl.DataFrame) -> str:
    """A frame as an HTML table (every value escaped) in a box that scrolls sideways."""
    return _scroll(_html_table(frame))


def report_page(
    path: str | Path,
    title: str,
    provenance: Mapping[str, Any] | None,
    sections: Sequence[tuple[str, str, str]],
) -> Path:
    """Write a report page of this module's look: the title, the run record, a table of
    contents and ``sections`` (anchor, heading, HTML), self-contained."""
    check_regular_or_new(path, "path")
    toc = [("provenance", "What made these results")] + [(a, h) for a, h, _ in sections]
    nav = "".join(f'<li><a href="#{a}">{html.escape(h)}</a></li>' for a, h in toc)
    body = [
        f"<h1>{html.escape(title)}</h1>",
        f"<nav><ul>{nav}</ul></nav>",
        '<h2 id="provenance">What made these results</h2>',
        _provenance_html(provenance),
        *(f'<h2 id="{a}">{html.escape(h)}</h2>\n{content}' for a, h, content in sections),
    ]
    document = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
    target = Path(path)
    target.write_text(document, encoding="utf-8")
    return target


def _names(on: str | Sequence[str]) -> str:
    return on if isinstance(on, str) else ", ".join(on)


def _comparison_html(comparison: pl.DataFrame) -> str:
    """The comparison as a short table, its sentences and every column one click away."""
    full = _without_null_columns(comparison)
    brief = full.select([c for c in DECISION_COLUMNS if c in full.columns])
    sentences = describe_comparison(comparison).splitlines()
    items = "".join(f"<li>{html.escape(s)}</li>" for s in sentences)
    return (
        _scroll(_html_table(brief)) + f"<details><summary>In words ({len(sentences)} sentence"
        f"{'' if len(sentences) == 1 else 's'})</summary><ul>{items}</ul></details>"
        + f"<details><summary>Every column ({len(full.columns)})</summary>"
        + _scroll(_html_table(full))
        + "</details>"
    )


def _provenance_html(provenance: Mapping[str, Any] | None) -> str:
    if not provenance:
        return (
            '<p class="meta">No run record: this table was not written by framekit '
            "evaluate / evaluate_parquet / fk.io.write_parquet.</p>"
        )
    items = "".join(
        f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>"
        for k, v in _provenance.describe(provenance)
    )
    proxy = _provenance.PROXY_NOTE  # "scored by the offline local judge: ..."
    note = (
        f'<p class="note">{html.escape(proxy[:1].upper() + proxy[1:])}.</p>'
        if _provenance.is_offline(provenance)
        else ""
    )
    return f'{note}<dl class="prov">{items}</dl>'


def write_html_report(
    scored: FrameLike,
    path: str | Path,
    *,
    by: str | None = None,
    on: str | Sequence[str] | None = None,
    title: str = "framekit report",
    evaluators: str | Sequence[str] | None = None,
    provenance: Mapping[str, Any] | None = None,
    max_groups: int = MAX_GROUPS,
) -> Path:
    """Write one self-contained HTML file: what made the scores, summaries, the rows to act
    on, comparison, charts.

    The page starts with the run record (``provenance``: framekit version, input, judge,
    evaluators with template versions and thresholds, mapping, counts, cost), then a table
    of contents. "Rows to look at" lists per evaluator the rows with an error (the message)
    and the lowest-scored rows (ties in a stable order: key, group, ids, position) with
    status, score, label and error first, the ``by`` group and ``on`` key, id columns
    (``trace_id``/``span_id`` included), then input, output, the retrieved documents and
    the explanation, each collapsed to its first lines (a click opens it; under 600 px
    each row is a card); it sorts by a click on a header and filters by evaluator, label, status (error, below threshold, passed) and
    text (plain JavaScript; the page address can preset the filter, e.g.
    ``report.html#status=error``, and a value there that no option has is named in a
    note while the filter shows everything). Charts are
    embedded as base64 PNG (they need matplotlib: ``pip install 'framekit[plot]'``;
    without it the report has tables only). Nothing is loaded from the network, and every
    string taken from the data is HTML-escaped.

    Parameters
    ----------
    scored
        A frame returned by ``evaluate_dataframe``.
    path
        Where to write the file.
    by
        Group column: adds per-group summaries, a ``compare`` table and a means chart
        (with fewer than two groups besides nulls, a note instead of the comparison).
    on
        Pairing key for the comparison (see ``compare``); with ``by``, also adds the
        side-by-side view: per key, each group's answer, documents, scores and
        explanations, largest score gaps first (see ``fk.side_by_side``). The rows table
        shows ``by`` and ``on`` next to each row.
    title
        Page title and heading.
    evaluators
        Evaluators to report on; default all.
    provenance
        The run record (``fk.last_run().provenance``, or ``fk.io.read_provenance(path)``
        of a scored Parquet file); without it the header says there is none.
    max_groups
        With more groups than this in ``by``, the pairwise comparison and the means chart
        are left out and the per-group summary is cut, with a note saying so.

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
    check_regular_or_new(path, "path")  # before the work, and a FIFO would block the write
    frame = to_polars(scored)
    names = resolve_evaluators(frame, evaluators)
    toc = [("provenance", "What made these scores"), ("summary", "Summary")]
    sections = [
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="meta">{frame.height} rows x {len(names)} evaluator'
        f"{'' if len(names) == 1 else 's'}: {html.escape(', '.join(names))}</p>",
        "@@TOC@@",
        '<h2 id="provenance">What made these scores</h2>',
        _provenance_html(provenance),
        '<h2 id="summary">Summary</h2>',
        _scroll(_html_table(_without_null_columns(summarize(frame, evaluators=names)))),
    ]
    toc.append(("rows-to-look-at", "Rows to look at"))
    sections += [
        '<h2 id="rows-to-look-at">Rows to look at</h2>',
        rows_section(frame, names, provenance, by=by, on=on),
    ]
    summary_by = None
    if by is not None:
        groups = frame.get_column(by).n_unique()
        note, grouped = "", frame
        if groups > max_groups:
            note = (
                f'<p class="note">{groups} groups in {html.escape(by)}: the first {max_groups} '
                "are shown, and the pairwise comparison and the means chart are left out "
                "(pass fewer groups, e.g. a coarser column, or raise max_groups).</p>"
            )
            # Cut before summarizing: every group costs its own bootstrap.
            shown = frame.get_column(by).unique().sort(nulls_last=True).head(max_groups)
            grouped = frame.filter(pl.col(by).is_in(shown.implode()))
        summary_by = summarize(grouped, by, evaluators=names)
        toc.append(("by", f"Summary by {by}"))
        sections += [
            f'<h2 id="by">Summary by {html.escape(by)}</h2>',
            note,
            _scroll(_html_table(_without_null_columns(summary_by))),
        ]
        single = too_few_groups(frame, by)
        if single is not None:
            sections.append(f'<p class="note">{html.escape(single)}.</p>')
        elif groups <= max_groups:
            comparison = compare(frame, by, on, names)
            toc.append(("comparison", f"Comparison of {by}"))
            sections += [
                f'<h2 id="comparison">Comparison of {html.escape(by)}</h2>',
                _comparison_html(comparison),
            ]
            if on is not None:
                toc.append(("side-by-side", f"Side by side: {by} per {_names(on)}"))
                sections += [
                    f'<h2 id="side-by-side">Side by side: {html.escape(by)} per '
                    f"{html.escape(_names(on))}</h2>",
                    side_by_side_section(frame, names, provenance, by, on),
                ]
        if groups > max_groups:
            summary_by = None
    toc.append(("charts", "Charts"))
    sections.append('<h2 id="charts">Charts</h2>')
    try:
        from framekit.analysis import plot

        sections.append(
            _png_tag(
                plot.distributions(frame, names, by if summary_by is not None else None),
                "score distributions",
            )
        )
        if summary_by is not None and by is not None:
            sections.append(
                _png_tag(plot.means_from_summary(summary_by, by), f"mean score by {by}")
            )
    except ModuleNotFoundError as exc:
        warnings.warn(f"HTML report written without charts: {exc}", stacklevel=2)
        sections.append(f"<p>{html.escape(str(exc))}</p>")
    errors = failures(frame, evaluators=names)
    if errors.height:
        toc.append(("errors", "Errors by message"))
        sections += ['<h2 id="errors">Errors by message</h2>', _scroll(_html_table(errors))]
    nav = (
        "<nav><ul>"
        + "".join(f'<li><a href="#{anchor}">{html.escape(text)}</a></li>' for anchor, text in toc)
        + "</ul></nav>"
    )
    sections[sections.index("@@TOC@@")] = nav
    document = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(s for s in sections if s)
        + "\n</body>\n</html>\n"
    )
    target = Path(path)
    target.write_text(document, encoding="utf-8")
    return target
