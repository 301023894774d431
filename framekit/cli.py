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
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from framekit._errors import (
    BatchPending,
    FramekitError,
    InputError,
    JudgeAuthenticationError,
    RunInterrupted,
)

if TYPE_CHECKING:
    import polars as pl

    from framekit.evaluators.base import Evaluator

#: ``-e`` names of the built-in evaluators -> their class in ``framekit.evaluators``.
BUILTIN_EVALUATORS = {
    "response_relevance": "ResponseRelevance",
    "coherence": "Coherence",
    "answer_relevancy": "AnswerRelevancy",
    "context_relevance": "ContextRelevance",
    "retrieval_relevance": "RetrievalRelevance",
}

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


def evaluator_by_name(name: str) -> Evaluator:
    """A default-configured built-in evaluator from its ``-e`` name.

    Examples
    --------
    >>> evaluator_by_name("retrieval_relevance").name
    'retrieval_relevance'
    """
    import framekit.evaluators as evaluators

    key = name.strip().lower().replace("-", "_")
    if key not in BUILTIN_EVALUATORS:
        raise InputError(f"unknown evaluator {name!r}; choose from {', '.join(BUILTIN_EVALUATORS)}")
    cls = getattr(evaluators, BUILTIN_EVALUATORS[key], None)
    if cls is None:
        raise InputError(f"evaluator {name!r} is not available in this version of framekit")
    return cls()  # type: ignore[no-any-return]


def _evaluators(values: Sequence[str]) -> list[Evaluator]:
    names = [n for value in values for n in value.split(",") if n.strip()]
    if not names:
        raise InputError("no evaluator given; use -e, e.g. -e response_relevance,coherence")
    return [evaluator_by_name(n) for n in names]


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
    from framekit.judges.litellm_judge import Judge

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


# --------------------------------------------------------------------------- evaluate


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from framekit import io

    if not args.input and args.sql is None:
        raise InputError("give an input Parquet file (or glob), or --sql QUERY")
    if args.output is None and not args.dry_run:
        raise InputError("give the destination with -o OUT (or use --dry-run)")
    if args.max_failures is not None and args.max_failures < 0:
        raise InputError("--max-failures must be >= 0")
    evaluators = _evaluators(args.evaluators or [])
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
        from framekit.engine.dryrun import plan_parquet

        plan = plan_parquet(
            source, evaluators, mapping, judge=judge, cache=cache, slice_rows=args.slice_rows
        )
        print(plan.describe())
        return 0

    run = io.evaluate_parquet(
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
    )
    if args.quiet:
        print(run.summary(), file=sys.stderr)
    if args.max_failures is not None and run.failed_rows > args.max_failures:
        print(
            f"framekit: {run.failed_rows} rows failed, more than --max-failures "
            f"{args.max_failures}; see the *_error columns of {run.destination}",
            file=sys.stderr,
        )
        return 1
    return 0


# --------------------------------------------------------------------------- report


def _read_scored(path: str, extra: Sequence[str] = ()) -> pl.DataFrame:
    """The result columns of a scored file (plus ``extra``), not its input columns."""
    from framekit import io
    from framekit.io._sources import _schema_of

    files = io.resolve_sources(path)
    schema = _schema_of(files)
    names = [c[: -len("_score")] for c in schema if c.endswith("_score")]
    names = [n for n in names if f"{n}_error" in schema]
    if not names:
        raise InputError(f"{path!r} has no framekit result columns (<name>_score, <name>_error)")
    missing = [c for c in extra if c not in schema]
    if missing:
        raise InputError(f"{path!r} has no column {missing[0]!r}; columns: {', '.join(schema)}")
    kinds = ("_score", "_label", "_passed", "_error", "_tokens", "_cost_usd")
    wanted = set(extra) | {n + k for n in names for k in kinds}
    return io.scan_sources(files).select([c for c in schema if c in wanted]).collect()


def format_table(frame: pl.DataFrame) -> str:
    """A compact text table for a terminal (floats to 3 decimals, label counts inline)."""
    import polars as pl

    shown = frame
    if "label_counts" in frame.columns:
        text = frame["label_counts"].map_elements(
            lambda counts: ", ".join(f"{c['label']}: {c['count']}" for c in counts),
            return_dtype=pl.String,
            skip_nulls=True,
        )
        shown = frame.with_columns(text.alias("labels"))
        shown = shown.drop("label_counts")
    with pl.Config(
        tbl_rows=-1,
        tbl_cols=-1,
        float_precision=3,
        tbl_hide_dataframe_shape=True,
        tbl_hide_column_data_types=True,
        tbl_formatting="ASCII_MARKDOWN",
        fmt_str_lengths=60,
        tbl_width_chars=200,
    ):
        return str(shown)


def _cmd_report(args: argparse.Namespace) -> int:
    from framekit import report

    extra = [args.by] if args.by else []
    frame = _read_scored(args.scored, extra)
    print(f"{frame.height} rows in {args.scored}\n")
    print(format_table(report.summarize(frame)))
    if args.by:
        print(f"\nby {args.by}:\n")
        print(format_table(report.summarize(frame, by=args.by)))
    if args.html:
        path = report.write_html_report(frame, args.html, by=args.by)
        print(f"\nwrote {path}")
    if args.png:
        from framekit import plot

        out = Path(args.png)
        out.mkdir(parents=True, exist_ok=True)
        written = [plot.save(plot.distributions(frame, by=args.by), out / "distributions.png")]
        written.append(plot.save(plot.means(frame, by=args.by), out / "means.png"))
        print("\nwrote " + ", ".join(str(p) for p in written))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from framekit import report

    extra = [args.by] + ([args.on] if args.on else [])
    frame = _read_scored(args.scored, extra)
    comparison = report.compare(frame, by=args.by, on=args.on, test=args.test)
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
    print(format_table(comparison.select([c for c in brief if c in comparison.columns])))
    print()
    print(report.describe_comparison(comparison))
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
        help=f"comma-separated evaluators: {', '.join(BUILTIN_EVALUATORS)}",
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
    ev.set_defaults(handler=_cmd_evaluate)

    rep = sub.add_parser(
        "report",
        help="summarize a scored file",
        description="Per-evaluator summary of a scored Parquet file (mean with bootstrap "
        "interval, pass rate, failures, labels), optionally by group, as text, HTML or PNG.",
    )
    rep.add_argument("scored", help="a Parquet file written by framekit evaluate")
    rep.add_argument("--by", metavar="COL", help="also summarize per value of this column")
    rep.add_argument("--html", metavar="FILE", help="write a self-contained HTML report")
    rep.add_argument("--png", metavar="DIR", help="write distributions.png and means.png")
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
    cmp.add_argument("--test", choices=("bootstrap", "wilcoxon", "t"), default="bootstrap")
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
    except InputError as exc:
        print(f"framekit: error: {exc}", file=sys.stderr)
        return 2
    except FramekitError as exc:
        print(f"framekit: error: {exc}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:  # an optional extra (matplotlib, the local model)
        print(f"framekit: error: {exc}", file=sys.stderr)
        return 2
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
