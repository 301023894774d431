"""Span exports in the ``framekit`` command: ``evaluate --traces`` and ``export-annotations``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from framekit._errors import InputError
from framekit.cli.options import (
    STDOUT,
    cache_of,
    check_output,
    command,
    evaluators_of,
    judge_of,
    mapping_of,
    output_file,
)

_EXPORT_EXAMPLES = """\
examples:
  framekit export-annotations scored.parquet --phoenix http://127.0.0.1:6006
  framekit export-annotations scored.parquet --otlp events.jsonl
  framekit export-annotations scored.parquet --otlp http://127.0.0.1:4318 -e coherence
"""


def add_trace_arguments(evaluate: argparse.ArgumentParser) -> None:
    """``--traces`` and ``--level`` for ``framekit evaluate``."""
    evaluate.add_argument(
        "--traces",
        metavar="EXPORT",
        help="score a span export (Phoenix / OpenInference or OpenTelemetry GenAI: a file, "
        "glob or directory of .json, .jsonl or .parquet) instead of a Parquet table",
    )
    evaluate.add_argument(
        "--level",
        choices=("trace", "span"),
        default="trace",
        help="with --traces: one row per trace (default) or per retrieval step",
    )


def run_traces(args: argparse.Namespace) -> int:
    """``framekit evaluate --traces EXPORT -o OUT``: load, score, write Parquet atomically,
    reading the shared options as ``framekit evaluate`` does."""
    import framekit as fk

    if args.input or args.sql is not None:
        raise InputError("--traces replaces the input table: give either --traces or an input")
    if args.output is None:
        raise InputError("give the destination with -o OUT")
    if args.dry_run:
        raise InputError("--dry-run plans Parquet inputs; it does not take --traces yet")
    check_output(args.output, no_wait=args.no_wait)  # before any paid work
    evaluators = evaluators_of(args.evaluators or [])
    try:
        table = fk.traces.load(args.traces, level=args.level)
    except FileNotFoundError as exc:
        raise InputError(str(exc)) from None
    print(f"framekit: {table.height} {args.level}s from {args.traces}", file=sys.stderr)
    scored = fk.evaluate_dataframe(
        table,
        evaluators,
        mapping_of(args.map),
        judge=judge_of(args),
        cache=cache_of(args),
        progress=not args.quiet,
        details=args.details,
    )
    with output_file(args.output) as out:
        out.parent.mkdir(parents=True, exist_ok=True)
        partial = out.with_name(out.name + ".partial")
        scored.write_parquet(partial)
        os.replace(partial, out)  # never a half-written destination
    failed = sum(int(scored[f"{e.name}_error"].is_not_null().sum()) for e in evaluators)
    shown = "standard output" if args.output == STDOUT else args.output
    print(f"framekit: wrote {shown} ({scored.height} rows)", file=sys.stderr)
    if args.max_failures is not None and failed > args.max_failures:
        print(f"framekit: {failed} failed results, more than --max-failures", file=sys.stderr)
        return 1
    return 0


def add_parser(sub: Any) -> None:
    """The ``export-annotations`` subcommand."""
    ex = command(
        sub,
        "export-annotations",
        help="send scores of a scored trace table to Phoenix or OpenTelemetry",
        description="Send the scores of a Parquet file written by `framekit evaluate "
        "--traces` back where the traces live: as Phoenix span annotations (--phoenix URL; "
        "the key from $PHOENIX_API_KEY) or as gen_ai.evaluation.result events parented to "
        "each span (--otlp: an OTLP/HTTP URL, or a file written as OTLP/JSON). Failed rows "
        "are left out and counted.",
        epilog=_EXPORT_EXAMPLES,
    )
    ex.add_argument("scored", help="a Parquet file with span_id and <evaluator>_score columns")
    target = ex.add_mutually_exclusive_group(required=True)
    target.add_argument("--phoenix", metavar="URL", help="Phoenix base URL")
    target.add_argument("--otlp", metavar="URL|FILE", help="OTLP/HTTP endpoint or a file")
    ex.add_argument("--project", help="Phoenix project the spans belong to (checked)")
    ex.add_argument(
        "-e", "--evaluators", metavar="NAMES", help="comma-separated evaluators (default: all)"
    )
    ex.set_defaults(handler=run_export)


def run_export(args: argparse.Namespace) -> int:
    import framekit as fk

    if not Path(args.scored).is_file():
        raise InputError(f"{args.scored}: no such file")
    names = [n.strip() for n in (args.evaluators or "").split(",") if n.strip()] or None
    if args.phoenix:
        result = fk.traces.log_to_phoenix(
            args.scored, endpoint=args.phoenix, project=args.project, evaluators=names
        )
    else:
        result = fk.traces.to_otel_events(args.scored, args.otlp, evaluators=names)
    print(f"framekit: sent {result}")
    return 0
