"""``framekit evaluate``: score a Parquet file, glob or DuckDB query into a new Parquet file.

Also its dry run (``--dry-run``: what a run would send and cost, sending nothing), and,
with ``--traces``, a span export (:mod:`framekit.cli.traces`).
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from typing import Any

from framekit._errors import InputError
from framekit.cli.options import (
    ENV_HELP,
    STDOUT,
    add_judge_arguments,
    builtin_names,
    cache_of,
    check_output,
    command,
    evaluators_of,
    judge_of,
    mapping_of,
    output_file,
    positive_int,
)
from framekit.cli.traces import add_trace_arguments, run_traces
from framekit.engine.budget import budget_reached, estimate_fits

EXAMPLES = """\
examples:
  framekit evaluate runs.parquet -o scored.parquet -e response_relevance,coherence \\
      --map input=question --map output=answer --judge openai/gpt-4o-mini --rpm 500
  framekit evaluate --sql "select * from 'runs/*.parquet' where strategy = 'dense'" \\
      -o dense.parquet -e retrieval_relevance --map input=question --map context=docs
  framekit evaluate runs.parquet -e coherence --map output=answer --dry-run
"""


def add_parser(sub: Any) -> None:
    """Add ``evaluate`` to the ``framekit`` subcommands."""
    ev = command(
        sub,
        "evaluate",
        help="score a Parquet file (or a DuckDB query) into a new Parquet file",
        description="Score every row of a Parquet file, glob or DuckDB query, streamed in "
        "slices; the destination gets every input column plus <evaluator>_score, _label, "
        "_explanation, _passed, _confidence and _error. An interrupted run resumes where it "
        "stopped.",
        epilog=EXAMPLES + "\n" + ENV_HELP,
    )
    ev.add_argument(
        "input",
        nargs="*",
        help="Parquet files, globs or directories (same columns); the view 'input' in --sql",
    )
    ev.add_argument(
        "-o",
        "--output",
        help="destination Parquet file (replaced if it exists; a FIFO or device is "
        "refused); '-' writes it to standard output (not resumable)",
    )
    ev.add_argument(
        "-e",
        "--evaluators",
        action="append",
        metavar="NAMES",
        help=f"comma-separated evaluators: {', '.join(builtin_names())}",
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
    ev.add_argument(
        "--likelihood",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="offline judge: read groundedness, context recall and coherence with the lm "
        "extra's likelihood scorer (--likelihood: require it) or their embedding proxies "
        "(--no-likelihood: about 20x faster); default: the scorer when it is installed",
    )
    ev.add_argument(
        "--relevant-share",
        type=float,
        metavar="SHARE",
        help="offline judge: the share of relevant pairs you expect (default WikiQA's, about "
        "0.05); its relevance confidences, which --cascade escalates by, are moved to it",
    )
    add_judge_arguments(ev)
    ev.add_argument(
        "--processes",
        type=positive_int,
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
        type=positive_int,
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
    add_trace_arguments(ev)
    ev.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="score in this process, or on Ray workers under one shared rate limit "
        "(needs framekit[ray])",
    )
    ev.add_argument("--address", metavar="ADDR", help="Ray cluster to use with --engine ray")
    ev.add_argument("--workers", type=positive_int, help="Ray workers with --engine ray")
    ev.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Handler of ``framekit evaluate``; returns the exit code."""
    from framekit import io
    from framekit.evaluate import ALL_FAILED
    from framekit.parquet import evaluate_parquet

    if args.traces is not None:
        return run_traces(args)

    if not args.input and args.sql is None:
        raise InputError("give an input Parquet file (or glob), or --sql QUERY")
    if args.output is None and not args.dry_run:
        raise InputError("give the destination with -o OUT (or use --dry-run)")
    if args.max_failures is not None and args.max_failures < 0:
        raise InputError("--max-failures must be >= 0")
    if args.output is not None and not args.dry_run:
        check_output(args.output, no_wait=args.no_wait)  # before any paid work
    evaluators = evaluators_of(args.evaluators or [])
    mapping = mapping_of(args.map)
    judge = judge_of(args)
    cache = cache_of(args)

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
        if args.max_cost is not None:
            fits, said = estimate_fits(plan, args.max_cost)
            print(said)
            return 0 if fits else 1
        return 0

    # Ray's settings go only where asked for (framekit.ray.evaluate_parquet takes them).
    on_ray = {"engine": "ray", "address": args.address, "workers": args.workers}
    with warnings.catch_warnings(), output_file(args.output) as destination:
        # The library warns when every evaluation failed; here the exit code says it.
        warnings.filterwarnings("ignore", message=re.escape(ALL_FAILED), category=RuntimeWarning)
        run = evaluate_parquet(
            source,
            destination,
            evaluators,
            mapping,
            judge=judge,
            cache=cache,
            progress=not args.quiet,
            details=args.details,
            overwrite=args.overwrite,
            slice_rows=args.slice_rows,
            max_cost_usd=args.max_cost,
            **(on_ray if args.engine == "ray" else {}),
        )
    if args.quiet:
        print(run.summary(), file=sys.stderr)
    shown = "the output on standard output" if args.output == STDOUT else run.destination
    if run.stats.rows_left:
        # Before the other exits: these rows did not fail, they wait for more budget.
        print(budget_reached(run.stats, shown), file=sys.stderr)
        return 1
    if run.rows and run.failed_rows == run.rows and args.max_failures is None:
        # Nothing usable came out: CI must not read this run as a success.
        print(
            f"framekit: every row failed; first error: {run.stats.first_error}; "
            f"see the *_error columns of {shown}",
            file=sys.stderr,
        )
        return 1
    if args.max_failures is not None and run.failed_rows > args.max_failures:
        print(
            f"framekit: {run.failed_rows} rows failed, more than --max-failures "
            f"{args.max_failures}; see the *_error columns of {shown}",
            file=sys.stderr,
        )
        return 1
    return 0
