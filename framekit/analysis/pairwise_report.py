"""The head-to-head report of a pairs frame: who beat whom, how strong, how biased the
judge was, and the pairs it flipped on, both answers side by side.

A pairs frame (``fk.evaluate_pairwise``) holds verdicts, not answers: the answers shown
for the flipped pairs come from the frame that was compared (``data=``; ``framekit
report`` reads it from the file the run record names), joined on the key and the group.
Every string from the data is HTML-escaped; nothing is loaded from the network.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from framekit import _result_columns as contract
from framekit._errors import InputError
from framekit._paths import check_regular_or_new
from framekit.analysis._inputs import FrameLike, to_polars
from framekit.analysis._pairs import key_columns, position_bias
from framekit.analysis._report_rows import collapsible
from framekit.analysis.rank import rank
from framekit.analysis.report import report_page, scrolled_table

#: Flipped pairs shown per evaluator (the pairs frame has them all).
MAX_FLIPPED = 30


def win_matrix(pairs: pl.DataFrame, evaluator: str, by: str = "group") -> pl.DataFrame:
    """Wins, ties and losses of each group (row) against each other (column), as
    ``"W-T-L"``; errors left out.

    Examples
    --------
    >>> pairs = pl.DataFrame({"q": [1, 2, 3], "a": ["x"] * 3, "b": ["y"] * 3,
    ...                       "p_winner": ["x", "tie", "y"], "p_error": [None] * 3})
    >>> win_matrix(pairs, "p", by="s").rows()
    [('x', None, '1-1-1'), ('y', '1-1-1', None)]
    """
    winner = contract.column(evaluator, "winner")
    error = contract.column(evaluator, "error")
    a, b = contract.PAIR_A, contract.PAIR_B
    rows = pairs.select(pl.col(a).cast(pl.String), pl.col(b).cast(pl.String), winner, error).rows()
    groups = sorted({g for row in rows for g in row[:2] if g is not None})
    counts: dict[tuple[str, str], list[int]] = {}
    for first, second, won, failed in rows:
        if won is None or failed is not None:
            continue
        for me, other in ((first, second), (second, first)):
            tally = counts.setdefault((me, other), [0, 0, 0])
            tally[0 if won == me else 1 if won == contract.TIE else 2] += 1
    columns: dict[str, list[Any]] = {by: groups}
    for other in groups:
        columns[other] = [
            "-".join(map(str, counts[(me, other)])) if (me, other) in counts else None
            for me in groups
        ]
    return pl.DataFrame(columns, schema={c: pl.String for c in columns})


def _answers(
    data: pl.DataFrame | None, keys: list[str], by: str, mapping: Mapping[str, Any]
) -> dict[tuple[Any, ...], dict[str, str]] | None:
    """(key..., group) -> what each group answered (output and documents), from ``data``."""
    shown = [c for c in (mapping.get("output"), mapping.get("context")) if isinstance(c, str)]
    if data is None or not shown or not set([*keys, by, *shown]) <= set(data.columns):
        return None
    out: dict[tuple[Any, ...], dict[str, str]] = {}
    for row in data.select(*keys, pl.col(by).cast(pl.String), *shown).iter_rows(named=True):
        out[(*[row[k] for k in keys], row[by])] = {c: row[c] for c in shown}
    return out


def _flipped_html(
    pairs: pl.DataFrame,
    evaluator: str,
    keys: list[str],
    answers: dict[tuple[Any, ...], dict[str, Any]] | None,
    input_column: str | None,
) -> str:
    consistent = contract.column(evaluator, "consistent")
    flipped = pairs.filter(pl.col(consistent).not_().fill_null(False))
    if flipped.height == 0:
        return '<p class="meta">The judge gave the same verdict in both orders on every pair.</p>'
    head = [*keys, "a", "b", "a first", "b first"]
    if input_column:
        head.append(input_column)
    head += ["answer of a", "answer of b", "why"]
    body = []
    for row in flipped.head(MAX_FLIPPED).iter_rows(named=True):
        a, b = str(row[contract.PAIR_A]), str(row[contract.PAIR_B])
        key = tuple(row[k] for k in keys)
        cells = [html.escape(str(row[k])) for k in keys]
        cells += [html.escape(a), html.escape(b)]
        cells += [html.escape(str(row[contract.column(evaluator, kind)])) for kind in ("ab", "ba")]
        if input_column:
            cells.append(collapsible(row.get(input_column)))
        for group in (a, b):
            found = None if answers is None else answers.get((*key, group))
            if found is None:
                cells.append('<span class="meta">not available</span>')
            else:
                cells.append("".join(
                    f'<div class="field"><span class="meta">{html.escape(c)}</span> '
                    f"{collapsible(v)}</div>"
                    for c, v in found.items()
                ))  # fmt: skip
        cells.append(collapsible(row.get(contract.column(evaluator, "explanation"))))
        body.append(
            "<tr>"
            + "".join(f'<td data-col="{html.escape(h)}">{c}</td>' for h, c in zip(head, cells))
            + "</tr>"
        )
    cut = (
        f" The first {MAX_FLIPPED} of {flipped.height} are shown."
        if flipped.height > MAX_FLIPPED
        else ""
    )
    missing = (
        " The answers are not shown: the compared data was not available (pass data=, or "
        "keep the input file where the run record says it is)."
        if answers is None
        else ""
    )
    header = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return (
        f'<p class="meta">{flipped.height} pair(s) on which the two orders named different '
        f"winners (counted as ties).{cut}{missing}</p>"
        f'<div class="scroll"><table class="cards"><thead><tr>{header}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def head_to_head_html(
    pairs: pl.DataFrame,
    evaluator: str,
    *,
    by: str = "group",
    on: Sequence[str] | None = None,
    data: pl.DataFrame | None = None,
    mapping: Mapping[str, Any] | None = None,
    n_boot: int = 2000,
) -> str:
    """One evaluator's head-to-head section: strengths with intervals, the win matrix,
    the position bias and the flipped pairs."""
    keys = key_columns(pairs, list(on) if on is not None else None)
    ranked = rank(pairs, evaluator=evaluator, by=by, on=keys, n_boot=n_boot)
    share, same, judged = position_bias(pairs, evaluator)
    bias = (
        "unknown (no pair has a verdict in both orders)"
        if share is None
        else f"{share:.3f}: the judge chose the same position in both orders in {same} of "
        f"{judged} pairs"
    )
    mapping = mapping or {}
    input_column = mapping.get("input") if isinstance(mapping.get("input"), str) else None
    if input_column not in pairs.columns:
        input_column = None
    answers = _answers(data, keys, by, mapping)
    name = html.escape(evaluator)
    return (
        f"<h3>{name}: strengths</h3>"
        '<p class="meta">Bradley-Terry strengths (log scale, mean 0) with 95 % bootstrap '
        "intervals over keys; a tie counts half a win to each side; equal ranks: not told "
        "apart.</p>" + scrolled_table(ranked) + f"<h3>{name}: win matrix</h3>"
        '<p class="meta">Wins-ties-losses of the row group against the column group.</p>'
        + scrolled_table(win_matrix(pairs, evaluator, by).fill_null(""))
        + f"<h3>{name}: position bias</h3>"
        f"<p>Position bias {html.escape(bias)}. A judge that reads only the content "
        "never does when it sees a difference; one that reads only the position always "
        "does.</p>"
        + f"<h3>{name}: pairs the judge flipped on</h3>"
        + _flipped_html(pairs, evaluator, keys, answers, input_column)
    )


def write_pairwise_report(
    pairs: FrameLike,
    path: str | Path,
    *,
    by: str | None = None,
    data: FrameLike | None = None,
    title: str = "framekit head-to-head report",
    evaluators: str | Sequence[str] | None = None,
    provenance: Mapping[str, Any] | None = None,
    n_boot: int = 2000,
) -> Path:
    """Write one self-contained HTML page about a pairs frame: what made it (the run
    record), then per evaluator the strengths with intervals (``fk.rank``), the win
    matrix, the position bias and the pairs the judge flipped on, with both answers side
    by side.

    Parameters
    ----------
    pairs
        A pairs frame from ``fk.evaluate_pairwise``.
    path
        Where to write the file.
    by
        The group column's name in the tables; default the run record's, else ``group``.
    data
        The frame that was compared, to show the answers of the flipped pairs (the run
        record's mapping names its output and context columns).
    title, evaluators, provenance, n_boot
        Page title; evaluators to show (default all); the run record
        (``fk.last_run().provenance``, or read from the pairs file); bootstrap resamples.

    Returns
    -------
    pathlib.Path
        The path written.

    Examples
    --------
    >>> import tempfile
    >>> pairs = pl.DataFrame({"q": [1, 2, 3, 4], "a": ["x"] * 4, "b": ["y"] * 4,
    ...                       "p_winner": ["x", "x", "tie", "y"], "p_ab": ["A", "A", "A", "B"],
    ...                       "p_ba": ["B", "B", "A", "A"],
    ...                       "p_consistent": [True, True, False, True],
    ...                       "p_error": [None] * 4})
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     out = write_pairwise_report(pairs, Path(tmp) / "pairs.html", n_boot=100)
    ...     "win matrix" in out.read_text()
    True
    """
    check_regular_or_new(path, "path")
    frame = to_polars(pairs)
    found = contract.pair_evaluator_names(frame.columns)
    if not found:
        contract.resolve_pair_evaluator(frame.columns, None)  # raises: not a pairs frame
    names = (
        found
        if evaluators is None
        else [evaluators]
        if isinstance(evaluators, str)
        else list(evaluators)
    )
    for name in names:
        contract.resolve_pair_evaluator(frame.columns, name)
    run = (provenance or {}).get("pairwise") or {}
    group = by or run.get("by") or "group"
    on = run.get("on") if isinstance(run.get("on"), list) else None
    if on is not None and not set(on) <= set(frame.columns):
        raise InputError(f"the run record's key columns {on} are not all in the pairs frame")
    compared = None if data is None else to_polars(data)
    sections = [
        f'<p class="meta">{frame.height} pairs x {len(names)} evaluator'
        f"{'' if len(names) == 1 else 's'}: {html.escape(', '.join(names))}</p>"
    ]
    for name in names:
        sections.append(
            head_to_head_html(
                frame,
                name,
                by=group,
                on=on,
                data=compared,
                mapping=(provenance or {}).get("mapping"),
                n_boot=n_boot,
            )
        )
    return report_page(
        path, title, provenance, [("head-to-head", "Head to head", "\n".join(sections))]
    )


__all__ = ["head_to_head_html", "win_matrix", "write_pairwise_report"]
