"""The ``framekit`` command: evaluate, report, compare, demo.

Exit codes: 0 done; 2 a usage or input error (the message names the problem, and no
destination is written); 1 the run finished with more failed rows than
``--max-failures``, or failed for another reason; 130 interrupted (run the same command
again to resume); 75 batches submitted with ``--batch --no-wait`` (run it again to
collect them).

The API key is never a flag (it would land in the shell history): the judge reads
``FRAMEKIT_API_KEY`` (or litellm's provider variables such as ``OPENAI_API_KEY``), or the
variable named by ``--api-key-env``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from framekit import _cli_traces
from framekit._cli_advice import advise
from framekit._cli_checks import unpaired_key
from framekit._errors import (
    BatchPending,
    FramekitError,
    InputError,
    JudgeAuthenticationError,
    MissingDependency,
    RunInterrupted,
    did_you_mean,
)
from framekit._paths import check_writable

if TYPE_CHECKING:
    import polars as pl

_ENV_HELP = """\
environment:
  FRAMEKIT_JUDGE      default judge model (else the offline local judge)
  FRAMEKIT_API_KEY    API key of the judge endpoint (never pass a key as a flag)
  FRAMEKIT_API_BASE   default --api-base
  FRAMEKIT_CACHE_DIR  default cache directory (else ~/.cache/framekit)
"""

_EVALUATE_EXAMPLES = """\
examples:
  framekit evaluate runs.parquet -o scored.parquet -e response_relevance,coherence \\
      --map input=question --map output=answer --judge openai/gpt-4o-mini --rpm 500
  framekit evaluate --sql "select * from 'runs/*.parquet' where strategy = 'dense'" \\
      -o dense.parquet -e retrieval_relevance --map input=question --map context=docs
  framekit evaluate runs.parquet -e coherence --map output=answer --dry-run
"""


def _mapping(values: Sequence[str] | None) -> dict[str, str] | None:
    if not values:
        return None
    mapping: dict[str, str] = {}
    for item in values:
        field, sep, column = item.partition("=")
        if not sep or not field.strip() or not column.strip():
            raise InputError(f"--map {item!r}: expected FIELD=COLUMN, e.g. --map input=question")
        mapping[field.strip()] = column.strip()
    return mapping


def _judge(args: argparse.Namespace) -> Any:
    """The judge the flags describe: a model string becomes a ``fk.Judge`` with limits."""
    model = args.judge or os.environ.get("FRAMEKIT_JUDGE", "").strip() or None
    limits = {
        "rpm": args.rpm,
        "tpm": args.tpm,
        "concurrency": args.concurrency,
        "processes": args.processes,
        "batch": args.batch or None,
    }
    if model is None or model.lower() == "local":
        given = [f"--{k}" for k, v in limits.items() if v is not None]
        if given:
            print(f"framekit: {', '.join(given)} ignored by the local judge", file=sys.stderr)
        return "local" if model else None
    from framekit.judges.judge import Judge

    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise InputError(f"--api-key-env: environment variable {args.api_key_env} is not set")
    kwargs = {k: v for k, v in limits.items() if v is not None}
    if args.batch and args.no_wait:
        kwargs["wait"] = False
    return Judge(model, api_base=args.api_base, api_key=api_key, **kwargs)


def _cache(args: argparse.Namespace) -> Any:
    return False if args.no_cache else args.cache


def _evaluators(names: Sequence[str]) -> list[Any]:
    from framekit.evaluators.registry import evaluators_by_names

    return evaluators_by_names(names)


class _SharedOptions:
    """How every scoring command reads the options they share (handed to sub-modules,
    which never import this module back)."""

    evaluators = staticmethod(_evaluators)
    mapping = staticmethod(_mapping)
    judge = staticmethod(_judge)
    cache = staticmethod(_cache)


# --------------------------------------------------------------------------- evaluate


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from framekit import io
    from framekit.evaluate import ALL_FAILED
    from framekit.evaluators.registry import evaluators_by_names
    from framekit.parquet import evaluate_parquet

    if args.traces is not None:
        return _cli_traces.run_traces(args, _SharedOptions)

    if not args.input and args.sql is None:
        raise InputError("give an input Parquet file (or glob), or --sql QUERY")
    if args.output is None and not args.dry_run:
        raise InputError("give the destination with -o OUT (or use --dry-run)")
    if args.max_failures is not None and args.max_failures < 0:
        raise InputError("--max-failures must be >= 0")
    if args.output is not None and not args.dry_run:
        check_writable(args.output, "-o", missing_dirs=True)  # before any paid work
    evaluators = evaluators_by_names(args.evaluators or [])
    mapping = _mapping(args.map)
    judge = _judge(args)
    cache = _cache(args)

    source: Any
    if args.sql is not None:
        import duckdb

        con = duckdb.connect()
        if args.input:
            # The input file(s) are the view "input" inside the query.
            io.register(con, "input", [str(p) for p in io.resolve_sources(args.input)])
        source = io.run_sql(args.sql, con)
    else:
        source = io.resolve_sources(args.input)

    if args.dry_run:
        plan = io.plan_parquet(
            source,
            evaluators,
            mapping,
            judge=judge,
            cache=cache,
            slice_rows=args.slice_rows,
            overwrite=args.overwrite,
            details=args.details,
        )
        print(plan.describe())
        return 0

    # Ray's settings go only where asked for (framekit.ray.evaluate_parquet takes them).
    on_ray = {"engine": "ray", "address": args.address, "workers": args.workers}
    with warnings.catch_warnings():
        # The library warns when every evaluation failed; here the exit code says it.
        warnings.filterwarnings("ignore", message=re.escape(ALL_FAILED), category=RuntimeWarning)
        run = evaluate_parquet(
            source,
            args.output,
            evaluators,
            mapping,
            judge=judge,
            cache=cache,
            progress=not args.quiet,
            details=args.details,
            overwrite=args.overwrite,
            slice_rows=args.slice_rows,
            **(on_ray if args.engine == "ray" else {}),
        )
    if args.quiet:
        print(run.summary(), file=sys.stderr)
    if run.rows and run.failed_rows == run.rows and args.max_failures is None:
        # Nothing usable came out: CI must not read this run as a success.
        print(
            f"framekit: every row failed; first error: {run.stats.first_error}; "
            f"see the *_error columns of {run.destination}",
            file=sys.stderr,
        )
        return 1
    if args.max_failures is not None and run.failed_rows > args.max_failures:
        print(
            f"framekit: {run.failed_rows} rows failed, more than --max-failures "
            f"{args.max_failures}; see the *_error columns of {run.destination}",
            file=sys.stderr,
        )
        return 1
    return 0


# --------------------------------------------------------------------------- report


def _read_scored(
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
    from framekit.analysis._html_rows import context_columns
    from framekit.analysis._inputs import READ_KINDS
    from framekit.io._sources import _schema_of

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
    frame = io.scan_sources(files).select([c for c in schema if c in wanted]).collect()
    return frame, record, names


def _cmd_report(args: argparse.Namespace) -> int:
    from framekit import _provenance, analysis

    if args.html:
        check_writable(args.html, "--html")  # before the summary, not after it
    extra = [c for c in (args.by, args.on) if c]
    frame, record, evaluators = _read_scored(
        args.scored, extra, context=bool(args.html), evaluators=args.evaluators
    )
    n_ev = len(evaluators)
    print(f"{frame.height} rows x {n_ev} evaluator{'' if n_ev == 1 else 's'} in {args.scored}")
    if record is None:
        print("no run record in this file (written without framekit evaluate)")
    elif _provenance.is_offline(record):
        print(f"note: {_provenance.PROXY_NOTE}")
    print()
    print(analysis.format_table(analysis.summarize(frame, evaluators=evaluators)))
    if args.by:
        print(f"\nby {args.by}:\n")
        print(analysis.format_table(analysis.summarize(frame, by=args.by, evaluators=evaluators)))
    if args.html:
        from framekit.analysis._html import MAX_GROUPS, too_few_groups

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


def _cmd_compare(args: argparse.Namespace) -> int:
    from framekit import analysis
    from framekit.analysis._table import terminal_safe

    extra = [args.by] + ([args.on] if args.on else [])
    frame, _, _ = _read_scored(args.scored, extra)
    comparison = analysis.compare(frame, by=args.by, on=args.on, test=args.test)
    unpaired_key(comparison, args.on, args.by)
    # The full table is wide; the terminal gets the columns a decision needs.
    brief = [
        "evaluator",
        "group_a",
        "group_b",
        "mean_a",
        "mean_b",
        "diff",
        "diff_ci_low",
        "diff_ci_high",
        "n_pairs",
        "p_value",
        "p_adjusted",
        "winner",
    ]
    print(analysis.format_table(comparison.select([c for c in brief if c in comparison.columns])))
    print()
    print(terminal_safe(analysis.describe_comparison(comparison)))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from framekit.demo import run_demo

    run_demo(args.out)
    return 0


# --------------------------------------------------------------------------- parser


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def _builtin_names() -> list[str]:
    from framekit.evaluators.registry import BUILTIN_EVALUATORS

    return list(BUILTIN_EVALUATORS)


def build_parser() -> argparse.ArgumentParser:
    """The ``framekit`` argument parser (every subcommand has ``--help``)."""
    parser = argparse.ArgumentParser(
        prog="framekit",
        description="Score tables of LLM traces with LLM-as-judge evaluators.",
        epilog=_ENV_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    ev = sub.add_parser(
        "evaluate",
        help="score a Parquet file (or a DuckDB query) into a new Parquet file",
        description="Score every row of a Parquet file, glob or DuckDB query, streamed in "
        "slices; the destination gets every input column plus <evaluator>_score, _label, "
        "_explanation, _passed and _error. An interrupted run resumes where it stopped.",
        epilog=_EVALUATE_EXAMPLES + "\n" + _ENV_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ev.add_argument(
        "input",
        nargs="*",
        help="Parquet files, globs or directories (same columns); the view 'input' in --sql",
    )
    ev.add_argument("-o", "--output", help="destination Parquet file (replaced if it exists)")
    ev.add_argument(
        "-e",
        "--evaluators",
        action="append",
        metavar="NAMES",
        help=f"comma-separated evaluators: {', '.join(_builtin_names())}",
    )
    ev.add_argument(
        "--map",
        action="append",
        metavar="FIELD=COLUMN",
        help="map a field (input, output, context, history) to a column; repeatable",
    )
    ev.add_argument(
        "--judge",
        metavar="MODEL",
        help="litellm model string, or 'local' (default: $FRAMEKIT_JUDGE, else local)",
    )
    ev.add_argument("--api-base", metavar="URL", help="endpoint of the judge")
    ev.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="environment variable holding the API key (default FRAMEKIT_API_KEY)",
    )
    ev.add_argument("--rpm", type=_positive_float, help="requests per minute to stay under")
    ev.add_argument("--tpm", type=_positive_float, help="tokens per minute to stay under")
    ev.add_argument("--concurrency", type=_positive_int, help="requests in flight (default 16)")
    ev.add_argument(
        "--processes",
        type=_positive_int,
        help="worker processes making the litellm calls (default 1: this one); "
        "2 helps when the endpoint answers faster than one process can send",
    )
    ev.add_argument(
        "--batch",
        action="store_true",
        help="send through the provider's batch API: 50 %% price, answers within 24 h; "
        "Ctrl-C detaches and the same command resumes (see `framekit batches`)",
    )
    ev.add_argument(
        "--no-wait",
        action="store_true",
        help="with --batch: submit and exit at once (code 75) naming the batch ids; "
        "the same command collects the answers later",
    )
    group = ev.add_mutually_exclusive_group()
    group.add_argument("--cache", metavar="DIR", help="response cache directory")
    group.add_argument("--no-cache", action="store_true", help="neither read nor write a cache")
    ev.add_argument("--sql", metavar="QUERY", help="a DuckDB query whose result is scored")
    ev.add_argument(
        "--dry-run",
        action="store_true",
        help="print the requests a run would send (after dedup and cache), estimated "
        "tokens and cost; send nothing, write nothing",
    )
    ev.add_argument(
        "--max-failures",
        type=int,
        metavar="N",
        help="exit 1 when more than N rows have an error (default: no limit)",
    )
    ev.add_argument(
        "--slice-rows",
        type=_positive_int,
        metavar="N",
        help="rows per slice (default: the row groups)",
    )
    ev.add_argument(
        "--details",
        action="store_true",
        help="also write _tokens, _cost_usd, _cached and _latency_s columns",
    )
    ev.add_argument(
        "--overwrite",
        action="store_true",
        help="replace result columns that already exist in the input",
    )
    ev.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    _cli_traces.add_trace_arguments(ev)
    ev.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="score in this process, or on Ray workers under one shared rate limit "
        "(needs framekit[ray])",
    )
    ev.add_argument("--address", metavar="ADDR", help="Ray cluster to use with --engine ray")
    ev.add_argument("--workers", type=_positive_int, help="Ray workers with --engine ray")
    ev.set_defaults(handler=_cmd_evaluate)

    rep = sub.add_parser(
        "report",
        help="summarize a scored file",
        description="Per-evaluator summary of a scored Parquet file (mean with bootstrap "
        "interval, pass rate over all rows, errors, labels), optionally by group, as text, "
        "HTML or PNG.",
    )
    rep.add_argument("scored", help="a Parquet file written by framekit evaluate")
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
    rep.set_defaults(handler=_cmd_report)

    cmp = sub.add_parser(
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
    cmp.set_defaults(handler=_cmd_compare)

    demo = sub.add_parser(
        "demo",
        help="score the bundled sample offline and write a report",
        description="Score framekit's bundled sample (200 RAG answers, two retrieval "
        "strategies) with every built-in evaluator on the offline local judge (or "
        "$FRAMEKIT_JUDGE), print summaries, and write scored.parquet and PNG charts.",
    )
    demo.add_argument("--out", default="demo-out", metavar="DIR", help="output directory")
    demo.set_defaults(handler=_cmd_demo)
    _cli_traces.add_export_command(sub)

    from framekit import cli_gate

    cli_gate.add_parser(sub)

    from framekit.cli_batches import add_parser as add_batches_parser

    add_batches_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``framekit`` console script; returns the exit code."""
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except RunInterrupted as exc:
        # Before FramekitError: an interrupted run is a Ctrl-C (exit 130), not a failure,
        # and its message says how many answers were saved.
        print(str(exc), file=sys.stderr)
        return 130
    except BatchPending as exc:  # submitted, not failed: "try again later" (EX_TEMPFAIL)
        print(f"framekit: {exc}", file=sys.stderr)
        return 75
    except JudgeAuthenticationError as exc:
        print(
            f"framekit: error: the judge rejected the credentials: {exc} "
            "(set FRAMEKIT_API_KEY or --api-key-env)",
            file=sys.stderr,
        )
        return 2
    except (InputError, MissingDependency) as exc:  # the user's to fix: exit 2
        print(f"framekit: error: {advise(str(exc))}", file=sys.stderr)
        return 2
    except FramekitError as exc:
        print(f"framekit: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `framekit report ... | head`: the reader left, not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(
            "framekit: interrupted; finished slices and cached answers are kept, run the "
            "same command again to resume",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
