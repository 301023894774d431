"""``framekit report`` and ``framekit compare``: a scored file's summary, report and
comparisons, read through the result-column contract."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framekit._errors import InputError, did_you_mean
from framekit._paths import check_writable
from framekit.cli.options import command

if TYPE_CHECKING:
    import polars as pl


def add_parsers(sub: Any) -> None:
    """Add ``report`` and ``compare`` to the ``framekit`` subcommands."""
    rep = command(
        sub,
        "report",
        help="summarize a scored file",
        description="Per-evaluator summary of a scored Parquet file (mean with bootstrap "
        "interval, pass rate over all rows, errors, labels), optionally by group, as text, "
        "HTML or PNG.",
    )
    rep.add_argument(
        "scored",
        help="a Parquet file written by framekit evaluate (or by framekit pairwise: the "
        "ranking, and with --html the head-to-head page)",
    )
    rep.add_argument("--by", metavar="COL", help="also summarize per value of this column")
    rep.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    rep.add_argument(
        "--on", metavar="COL", help="key column pairing rows across the groups of --by"
    )
    rep.add_argument("--title", default="framekit report", help="title of the HTML report")
    rep.add_argument(
        "-e",
        "--evaluators",
        type=lambda text: [n.strip() for n in text.split(",") if n.strip()],
        metavar="NAMES",
        help="comma-separated evaluators to report on (default: all in the file)",
    )
    rep.add_argument(
        "--png",
        metavar="DIR",
        help="write score_distributions.png and scores_by_<by>.png (scores.png without --by)",
    )
    rep.set_defaults(handler=run_report)

    cmp = command(
        sub,
        "compare",
        help="compare groups (strategies, models) evaluator by evaluator",
        description="Differences between the groups of --by for each evaluator, with "
        "intervals and tests; --on pairs rows across groups (paired tests).",
    )
    cmp.add_argument("scored", help="a Parquet file written by framekit evaluate")
    cmp.add_argument("--by", required=True, metavar="COL", help="the group column")
    cmp.add_argument("--on", metavar="COL", help="key column pairing rows across groups")
    cmp.add_argument(
        "--test",
        choices=("bootstrap", "wilcoxon", "t"),
        default="bootstrap",
        help="bootstrap (default), wilcoxon (signed-rank paired, Mann-Whitney unpaired) or "
        "t (paired t, Welch unpaired)",
    )
    cmp.set_defaults(handler=run_compare)


def read_scored(
    path: str,
    extra: Sequence[str] = (),
    *,
    context: bool = False,
    evaluators: Sequence[str] | None = None,
) -> tuple[pl.DataFrame, dict[str, Any] | None, list[str]]:
    """The result columns of a scored file (plus ``extra``), its run record and the
    evaluators to read (``evaluators``, else all in the file).

    With ``context``, also explanations and the columns that identify and show a row
    (ids, trace and span ids, the mapped input and output), for the HTML report. Every
    result column read is checked against the contract's dtypes before any is read.
    """
    from framekit import _provenance, io
    from framekit import _result_columns as contract
    from framekit.analysis._inputs import READ_KINDS
    from framekit.analysis._report_rows import context_columns
    from framekit.io._sources import _schema_of, collect_text

    files = io.resolve_sources(path)
    schema = _schema_of(files)
    if not contract.evaluator_names(list(schema)):
        raise InputError(f"{path!r} has no framekit result columns (<name>_score, <name>_error)")
    names = contract.resolve_evaluators(list(schema), evaluators)
    missing = [c for c in extra if c not in schema]
    if missing:
        raise InputError(
            f"{path!r} has no column {missing[0]!r}.{did_you_mean(missing[0], schema)} "
            f"Columns: {', '.join(schema)}"
        )
    kinds = READ_KINDS if context else contract.SUMMARY_KINDS
    contract.check_dtypes(schema, names, kinds)
    record = _provenance.read(files[0])
    wanted = set(extra) | {contract.column(n, k) for n in names for k in kinds}
    if context:
        wanted |= set(context_columns(list(schema), record))
    columns = [c for c in schema if c in wanted]
    frame = collect_text(io.scan_sources(files).select(columns), files)
    return frame, record, names


def run_report(args: argparse.Namespace) -> int:
    """Handler of ``framekit report``; returns the exit code."""
    from framekit import _provenance, analysis

    if args.html:
        check_writable(args.html, "--html")  # before the summary, not after it
    if _is_pairs_file(args.scored):
        return run_pairs_report(args)
    extra = [c for c in (args.by, args.on) if c]
    frame, record, evaluators = read_scored(
        args.scored, extra, context=bool(args.html), evaluators=args.evaluators
    )
    n_ev = len(evaluators)
    print(f"{frame.height} rows x {n_ev} evaluator{'' if n_ev == 1 else 's'} in {args.scored}")
    if record is None:
        print("no run record in this file (written without framekit evaluate)")
    elif _provenance.is_offline(record):
        print(f"note: {_provenance.PROXY_NOTE}")
    cost = _provenance.cost_line(record)
    if cost is not None:
        print(cost)
    print()
    print(analysis.format_table(analysis.summarize(frame, evaluators=evaluators)))
    if args.by:
        print(f"\nby {args.by}:\n")
        print(analysis.format_table(analysis.summarize(frame, by=args.by, evaluators=evaluators)))
    if args.html:
        from framekit.analysis.report import MAX_GROUPS, too_few_groups

        groups = frame.get_column(args.by).n_unique() if args.by else 0
        single = too_few_groups(frame, args.by) if args.by else None
        if single is not None:
            print(f"\nnote: {single}", file=sys.stderr)
        elif groups > MAX_GROUPS:
            print(
                f"\nnote: {groups} groups in {args.by}; the HTML report shows the first "
                f"{MAX_GROUPS} and no pairwise comparison (group by a coarser column to compare)",
                file=sys.stderr,
            )
        path = analysis.write_html_report(
            frame,
            args.html,
            by=args.by,
            on=args.on,
            title=args.title,
            evaluators=evaluators,
            provenance=record,
        )
        print(f"\nwrote {path}")
    if args.png:
        from framekit.analysis import plot

        written = plot.save_charts(frame, args.png, by=args.by, evaluators=evaluators)
        print("\nwrote " + ", ".join(str(p) for p in written))
    return 0


def _is_pairs_file(path: str) -> bool:
    """Whether ``path`` holds a pairs frame (``framekit pairwise``) and no scored rows."""
    from framekit import _result_columns as contract
    from framekit import io
    from framekit.io._sources import _schema_of

    schema = list(_schema_of(io.resolve_sources(path)))
    return bool(contract.pair_evaluator_names(schema)) and not contract.evaluator_names(schema)


def run_pairs_report(args: argparse.Namespace) -> int:
    """``framekit report pairs.parquet``: the ranking and position bias per evaluator;
    ``--html``: the head-to-head page, with the answers the judge flipped on when the
    compared file named in the run record is still there."""
    import polars as pl

    from framekit import _provenance, analysis, io
    from framekit import _result_columns as contract
    from framekit.cli.pairwise import print_ranking

    files = io.resolve_sources(args.scored)
    pairs = pl.read_parquet([str(f) for f in files])
    record = _provenance.read(files[0])
    names = args.evaluators or contract.pair_evaluator_names(pairs.columns)
    for name in names:
        contract.resolve_pair_evaluator(pairs.columns, name)
    print(f"{pairs.height} pairs x {len(names)} evaluator{'' if len(names) == 1 else 's'} "
          f"in {args.scored}")  # fmt: skip
    if record is None:
        print("no run record in this file (written without framekit pairwise)")
    elif _provenance.is_offline(record):
        print(f"note: {_provenance.PROXY_NOTE}")
    print_ranking(pairs, record, names)
    if args.html:
        data = _compared_rows(record)
        if data is None:
            print(
                "\nnote: the compared file named in the run record is not there: the "
                "flipped pairs are shown without their answers",
                file=sys.stderr,
            )
        title = args.title if args.title != "framekit report" else "framekit head-to-head report"
        path = analysis.write_pairwise_report(
            pairs, args.html, by=args.by, data=data, title=title, evaluators=names,
            provenance=record,
        )  # fmt: skip
        print(f"\nwrote {path}")
    return 0


def _compared_rows(record: dict[str, Any] | None) -> pl.DataFrame | None:
    """The rows a pairwise run compared, from the files its run record names (``None``
    when any is gone)."""
    import polars as pl

    paths = ((record or {}).get("pairwise") or {}).get("data") or []
    if not paths or not all(Path(p).is_file() for p in paths):
        return None
    try:
        return pl.read_parquet(paths)
    except Exception:  # a file replaced by something unreadable: shown without answers
        return None


def run_compare(args: argparse.Namespace) -> int:
    """Handler of ``framekit compare``; returns the exit code."""
    from framekit import analysis
    from framekit.analysis._table import terminal_safe
    from framekit.analysis.summary import DECISION_COLUMNS

    extra = [args.by] + ([args.on] if args.on else [])
    frame, _, _ = read_scored(args.scored, extra)
    comparison = analysis.compare(frame, by=args.by, on=args.on, test=args.test)
    unpaired_key(comparison, args.on, args.by)
    # The full table is wide; the terminal gets the columns a decision needs.
    brief = DECISION_COLUMNS
    print(analysis.format_table(comparison.select([c for c in brief if c in comparison.columns])))
    print()
    print(terminal_safe(analysis.describe_comparison(comparison)))
    return 0


def unpaired_key(comparison: pl.DataFrame, on: str | None, by: str) -> None:
    """Raise when ``--on`` paired nothing: no key value appears in two groups.

    Without this, every comparison reads "not enough scored rows" and the command
    succeeds, though the real problem is the key (a different id per strategy).
    """
    if on is None or comparison.height == 0 or "n_pairs" not in comparison.columns:
        return
    pairs = comparison["n_pairs"].fill_null(0)
    dropped = (
        comparison["dropped_pairs"].fill_null(0)
        if "dropped_pairs" in comparison.columns
        else pairs * 0
    )
    if (pairs == 0).all() and (dropped == 0).all():
        raise InputError(
            f"--on {on}: no value of {on!r} appears in two groups of {by!r}, so no rows "
            f"can be paired; check that {on!r} identifies the same item in every group, "
            "or leave out --on for an unpaired comparison"
        )
