"""The report's side-by-side view: per key, one column per group, largest score gaps first.

The HTML face of :func:`framekit.analysis.side_by_side.side_by_side`: each row is one key
(``question_id``), each group's cell holds its scores and labels, its error, its answer,
its documents and the explanations, collapsed to their first lines. Under 600 px each
key is a card, its groups one under the other.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from framekit import _result_columns as contract
from framekit.analysis._report_rows import collapsible, text_columns
from framekit.analysis.side_by_side import side_by_side

MAX_KEYS = 30  # keys shown, largest gaps first


def _score_line(name: str, row: Mapping[str, Any], prefix: str) -> str:
    score = row.get(prefix + contract.column(name, "score"))
    label = row.get(prefix + contract.column(name, "label"))
    error = row.get(prefix + contract.column(name, "error"))
    if error is not None:
        value = f'<span class="err">error: {html.escape(str(error))}</span>'
    elif score is None:
        value = '<span class="meta">not scored</span>'
    else:
        value = f"{score:.3f}" + (f" ({html.escape(str(label))})" if label is not None else "")
    return f'<div class="score"><b>{html.escape(name)}</b> {value}</div>'


def _group_cell(
    group: str, row: Mapping[str, Any], names: Sequence[str], data: Sequence[str]
) -> str:
    prefix = f"{group}/"
    if all(row.get(prefix + contract.column(n, "score")) is None for n in names) and all(
        row.get(prefix + contract.column(n, "error")) is None for n in names
    ):
        return f'<td data-col="{html.escape(group)}"><span class="meta">no row</span></td>'
    parts = [_score_line(n, row, prefix) for n in names]
    parts += [
        f'<div class="field"><span class="meta">{html.escape(c)}</span> '
        f"{collapsible(row.get(prefix + c))}</div>"
        for c in data
        if prefix + c in row
    ]
    for n in names:
        why = row.get(prefix + contract.column(n, "explanation"))
        if why is not None:
            label = f"why ({n})" if len(names) > 1 else "why"
            parts.append(
                f'<div class="field"><span class="meta">{html.escape(label)}</span> '
                f"{collapsible(why)}</div>"
            )
    return f'<td class="text" data-col="{html.escape(group)}">{"".join(parts)}</td>'


def side_by_side_section(
    frame: pl.DataFrame,
    names: Sequence[str],
    provenance: Mapping[str, Any] | None,
    by: str,
    on: str | Sequence[str],
) -> str:
    """The HTML of the side-by-side view (a table with id ``pairs``)."""
    keys = [on] if isinstance(on, str) else list(on)
    table = side_by_side(frame, by, keys, evaluators=names, provenance=provenance)
    groups = [str(g) for g in frame.get_column(by).drop_nulls().unique().sort().to_list()]
    texts = text_columns(frame.columns, provenance)
    shared = [c for c in table.columns if c == texts.get("input")]
    data = [
        texts[f]
        for f in ("output", "context")
        if f in texts and any(f"{g}/{texts[f]}" in table.columns for g in groups)
    ]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in (*keys, "gap", *shared, *groups))
    body = []
    for row in table.head(MAX_KEYS).iter_rows(named=True):
        key = " / ".join(str(row[k]) for k in keys)
        gap = row["gap"]
        cells = [f'<td data-col="{html.escape(k)}">{html.escape(str(row[k]))}</td>' for k in keys]
        cells.append(f'<td class="num" data-col="gap">{"" if gap is None else f"{gap:.3f}"}</td>')
        cells += [
            f'<td class="text" data-col="{html.escape(c)}">{collapsible(row[c])}</td>'
            for c in shared
        ]
        cells += [_group_cell(g, row, names, data) for g in groups]
        body.append(f'<tr data-key="{html.escape(key)}">{"".join(cells)}</tr>')
    cut = (
        f" The {MAX_KEYS} with the largest gaps of {table.height} are shown;"
        " <code>fk.side_by_side</code> returns them all."
        if table.height > MAX_KEYS
        else ""
    )
    return (
        f'<p class="meta">Each {html.escape(", ".join(keys))} under every '
        f"{html.escape(by)}, the largest score gap (highest minus lowest score among the "
        f"groups) first.{cut}</p>"
        f'<div class="scroll"><table id="pairs" class="cards"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )
