"""The rows a reader acts on: failed and lowest-scored rows, sortable and filterable.

One table per report, one row per (evaluator, row of the data): status, score, label and
error first (on screen at desktop width), the group and key of a comparison (``by``,
``on``), the id columns (and ``trace_id``/``span_id`` when present, to find the row in a
tracing tool), then input, output, the retrieved documents and the explanation, each
collapsed to its first lines and opened by a click. Under 600 px each row is a card. A few lines of plain
JavaScript sort it (click a header) and filter it (evaluator, label, status, text). The
status is the row's outcome in the words of ``_outcome``: ``error`` (the evaluation
failed), ``below threshold`` (it scored and did not pass) or ``passed``. The filter also
reads the page address, e.g. ``report.html#status=error&q=sydney``, so a link (or a test)
can open the report already filtered; a value there that no option has is shown as such,
never silently dropped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from framekit import _result_columns as contract
from framekit.analysis import _outcome as outcome

FAILED_ROWS = 50  # failed rows shown per evaluator
LOWEST_ROWS = 20  # lowest-scored rows shown per evaluator
EXCERPT_CHARS = 160
SUMMARY_CHARS = 120  # what a collapsed text or document shows: about two lines

_ID_NAMES = ("id", "trace_id", "span_id", "row_id", "example_id")
_TEXT_GUESSES = {
    "input": ("input", "question", "query", "prompt"),
    "output": ("output", "answer", "response", "completion"),
    "context": ("context", "contexts", "documents", "docs", "retrieved", "passages"),
}


def id_columns(columns: Sequence[str]) -> list[str]:
    """Columns that identify a row: ``id``, ``*_id`` (trace and span ids included)."""
    result_cols = set()
    for name in contract.evaluator_names(columns):
        result_cols |= {c for c in columns if c.startswith(name + "_")}
    return [
        c
        for c in columns
        if c not in result_cols and (c.lower() in _ID_NAMES or c.lower().endswith("_id"))
    ][:4]


def text_columns(columns: Sequence[str], provenance: Mapping[str, Any] | None) -> dict[str, str]:
    """Field (input, output, context) -> column holding it: from the run record's mapping,
    else by name (``question``, ``answer``, ``documents``...)."""
    mapping = (provenance or {}).get("mapping") or {}
    out: dict[str, str] = {}
    for field, guesses in _TEXT_GUESSES.items():
        mapped = mapping.get(field) if isinstance(mapping, dict) else None
        if isinstance(mapped, str) and mapped in columns:
            out[field] = mapped
            continue
        found = next((c for c in columns if c.lower() in guesses), None)
        if found is not None:
            out[field] = found
    return out


def context_columns(columns: Sequence[str], provenance: Mapping[str, Any] | None) -> list[str]:
    """The non-result columns the drill-down shows (ids, input, output, context)."""
    wanted = id_columns(columns) + list(text_columns(columns, provenance).values())
    return list(dict.fromkeys(wanted))


def _excerpt(value: Any, chars: int = EXCERPT_CHARS) -> str:
    text = "" if value is None else " ".join(str(value).split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


def collapsible(value: Any) -> str:
    """The HTML of a long text or a list of documents: its first lines, the rest behind
    a ``<details>`` (a click opens it; the text filter searches all of it).

    Examples
    --------
    >>> collapsible("short")
    'short'
    >>> collapsible(["doc one", "doc two"])
    '<details><summary>2 documents: doc one</summary><ol><li>doc one</li><li>doc two</li></ol></details>'
    """
    if value is None:
        return ""
    if isinstance(value, (list, tuple)):
        docs = ["" if d is None else str(d) for d in value]
        if not docs:
            return '<span class="meta">no documents</span>'
        items = "".join(f"<li>{html.escape(d)}</li>" for d in docs)
        count = "1 document" if len(docs) == 1 else f"{len(docs)} documents"
        first = html.escape(_excerpt(docs[0], SUMMARY_CHARS))
        return f"<details><summary>{count}: {first}</summary><ol>{items}</ol></details>"
    text = str(value)
    flat = " ".join(text.split())
    if len(flat) <= SUMMARY_CHARS:
        return html.escape(flat)
    first = html.escape(_excerpt(flat, SUMMARY_CHARS))
    return (
        f'<details><summary>{first}</summary><div class="full">{html.escape(text)}</div></details>'
    )


def _direction(provenance: Mapping[str, Any] | None, name: str) -> str:
    for ev in (provenance or {}).get("evaluators") or []:
        if ev.get("name") == name:
            return str(ev.get("direction") or "maximize")
    return "maximize"


def _keys(on: str | Sequence[str] | None) -> list[str]:
    return [] if on is None else [on] if isinstance(on, str) else list(on)


def drill_rows(
    frame: pl.DataFrame,
    names: Sequence[str],
    provenance: Mapping[str, Any] | None,
    *,
    by: str | None = None,
    on: str | Sequence[str] | None = None,
) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """(columns, rows, notes): per evaluator its rows with an error, then its lowest-scored
    rows; ``status`` is the row's outcome (error, below threshold, passed).

    The outcome columns come first (so they stay on screen at desktop width), then the
    group (``by``) and key (``on``), the ids, and the texts: input, output, the context
    (``documents``) and the explanation, kept whole (the page collapses them). Rows tied
    on the score are ordered by key, group, ids, then position in the frame, so the cut
    at ``LOWEST_ROWS`` is the same on every run and puts a key's groups together.
    """
    group = [c for c in (by, *_keys(on)) if c is not None and c in frame.columns]
    ids = [c for c in id_columns(frame.columns) if c not in group]
    texts = text_columns(frame.columns, provenance)
    headers = {"input": "input", "output": "output", "context": "documents"}
    columns = [
        "evaluator",
        "status",
        "score",
        "label",
        "error",
        *group,
        *ids,
        *(headers[f] for f in texts),
        "explanation",
    ]
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    indexed = frame.with_row_index("_row")
    ties = [*_keys(on), *([by] if by else []), *ids, "_row"]
    ties = list(dict.fromkeys(c for c in ties if c in indexed.columns))
    for name in names:
        have = set(frame.columns)
        score, error = contract.column(name, "score"), contract.column(name, "error")
        label = contract.column(name, "label")
        explanation = contract.column(name, "explanation")
        judged = indexed.with_columns(outcome.status(name, have).alias("__status"))
        failed = judged.filter(pl.col("__status") == outcome.ERROR)
        scored = judged.filter(pl.col("__status") != outcome.ERROR)
        worst_first = _direction(provenance, name) == "minimize"
        lowest = scored.sort(
            [score, *ties], descending=[worst_first] + [False] * len(ties), nulls_last=True
        ).head(LOWEST_ROWS)
        if failed.height > FAILED_ROWS:
            notes.append(f"{name}: {FAILED_ROWS} of {failed.height} rows with an error shown")
        if scored.height > LOWEST_ROWS:
            cut = lowest.get_column(score)[-1]
            tied = scored.filter(pl.col(score) == cut).height
            shown = lowest.filter(pl.col(score) == cut).height
            if tied > shown:
                order = ", ".join(c for c in ties if c != "_row") or "position"
                notes.append(
                    f"{name}: {tied} rows score {cut:.3f}; the {shown} shown are the first "
                    f"by {order}"
                )
        for part in (failed.head(FAILED_ROWS), lowest):
            for r in part.iter_rows(named=True):
                row: dict[str, Any] = {"evaluator": name}
                row.update({c: r[c] for c in (*group, *ids)})
                row.update({headers[field]: r[c] for field, c in texts.items()})
                row.update(
                    label=r.get(label) if label in have else None,
                    score=None if r["__status"] == outcome.ERROR else r[score],
                    status=r["__status"],
                    explanation=r.get(explanation),
                    error=r[error],
                )
                rows.append(row)
    return columns, rows, notes


#: Columns whose cells collapse to their first lines.
_LONG = {"input", "output", "documents", "explanation"}


_JS = """
(function () {
  var table = document.getElementById('rows'); if (!table) return;
  var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
  var f = {evaluator: document.getElementById('f-evaluator'), label: document.getElementById('f-label'),
           status: document.getElementById('f-status'), q: document.getElementById('f-q')};
  var count = document.getElementById('f-count'), note = document.getElementById('f-note');
  function apply() {
    var q = f.q.value.toLowerCase(), shown = 0;
    rows.forEach(function (tr) {
      var ok = (!f.evaluator.value || tr.dataset.evaluator === f.evaluator.value) &&
        (!f.label.value || tr.dataset.label === f.label.value) &&
        (!f.status.value || tr.dataset.status === f.status.value ||
         (f.status.value === 'not-passed' && tr.dataset.status !== 'passed')) &&
        (!q || tr.textContent.toLowerCase().indexOf(q) >= 0);
      tr.hidden = !ok; if (ok) shown++;
    });
    count.textContent = shown + ' of ' + rows.length + ' rows shown';
  }
  var params = new URLSearchParams(location.hash.slice(1) || location.search.slice(1));
  var unknown = [];
  Object.keys(f).forEach(function (k) {
    if (params.has(k)) {
      f[k].value = params.get(k);
      // A select given a value none of its options has falls back to "all": say so.
      if (f[k].value !== params.get(k)) {
        f[k].value = ''; unknown.push(k + ' "' + params.get(k) + '"');
      }
    }
    f[k].addEventListener('input', apply);
  });
  if (unknown.length) {
    note.textContent = 'The address asks for ' + unknown.join(' and ') +
      ', which matches no option: showing all instead.';
    note.hidden = false;
  }
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
    th.addEventListener('click', function () {
      var dir = th.dataset.dir === 'asc' ? -1 : 1; th.dataset.dir = dir > 0 ? 'asc' : 'desc';
      rows.sort(function (a, b) {
        var x = a.cells[i].dataset.v || a.cells[i].textContent, y = b.cells[i].dataset.v || b.cells[i].textContent;
        var nx = parseFloat(x), ny = parseFloat(y);
        return dir * (isNaN(nx) || isNaN(ny) ? x.localeCompare(y) : nx - ny);
      });
      rows.forEach(function (tr) { body.appendChild(tr); });
    });
  });
  apply();
})();
"""


def _options(element: str, label: str, values: Sequence[str]) -> str:
    opts = "".join(f'<option value="{html.escape(v)}">{html.escape(v)}</option>' for v in values)
    return f'<label>{label} <select id="{element}"><option value="">all</option>{opts}</select></label>'


def cell(column: str, value: Any, *, long: bool = False) -> str:
    """One ``<td>``: ``data-col`` names its column (the header of a card on a phone)."""
    col = f' data-col="{html.escape(column)}"'
    if column == "score" and isinstance(value, float):
        return f'<td class="num"{col} data-v="{value!r}">{value:.3f}</td>'
    if long:
        return f'<td class="text"{col}>{collapsible(value)}</td>'
    text = "" if value is None else str(value)
    css = ' class="text"' if len(text) > 30 else ""
    return f"<td{css}{col}>{html.escape(text)}</td>"


def rows_section(
    frame: pl.DataFrame,
    names: Sequence[str],
    provenance: Mapping[str, Any] | None,
    *,
    by: str | None = None,
    on: str | Sequence[str] | None = None,
) -> str:
    """The HTML of the drill-down: filter controls, the table, and its script."""
    columns, rows, notes = drill_rows(frame, names, provenance, by=by, on=on)
    if not rows:
        return "<p>No rows to show.</p>"
    labels = sorted({str(r["label"]) for r in rows if r["label"] is not None})
    unsplit = [outcome.SCORED] if any(r["status"] == outcome.SCORED for r in rows) else []
    statuses = "".join(
        f'<option value="{v}">{v}</option>'
        for v in (outcome.ERROR, outcome.BELOW, outcome.PASSED, *unsplit)
    )
    controls = (
        '<div class="filters">'
        + _options("f-evaluator", "evaluator", list(names))
        + _options("f-label", "label", labels)
        + f'<label>status <select id="f-status"><option value="">all</option>{statuses}'
        f'<option value="not-passed">{outcome.ERROR} or {outcome.BELOW}</option></select></label>'
        ' <label>search <input id="f-q" type="search" placeholder="text in any column"></label>'
        ' <span id="f-count" class="meta"></span></div>'
        '<p id="f-note" class="note" hidden></p>'
    )
    head = "".join(f'<th title="click to sort">{html.escape(c)}</th>' for c in columns)
    body = [
        f'<tr data-evaluator="{html.escape(r["evaluator"])}" '
        f'data-label="{html.escape(str(r["label"]) if r["label"] is not None else "")}" '
        f'data-status="{html.escape(r["status"])}">'
        + "".join(cell(c, r.get(c), long=c in _LONG) for c in columns)
        + "</tr>"
        for r in rows
    ]
    note = "".join(f'<p class="meta">{html.escape(n)}</p>' for n in notes)
    return (
        f'<p class="meta">Per evaluator: the rows whose evaluation failed (status '
        f"{outcome.ERROR}, with the error), then the {LOWEST_ROWS} lowest-scored rows (status "
        f"{outcome.BELOW} or {outcome.PASSED}). Click a header to sort; click a text to "
        f"read all of it.</p>{note}{controls}"
        f'<div class="scroll"><table id="rows" class="cards"><thead><tr>{head}</tr></thead><tbody>'
        + "\n".join(body)
        + f"</tbody></table></div><script>{_JS}</script>"
    )
