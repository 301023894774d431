"""The ``framekit`` command: its parser, and what each way of failing exits with.

Exit codes: 0 done; 2 a usage or input error (the message names the problem, and no
destination is written); 1 the run finished with more failed rows than
``--max-failures``, or failed for another reason; 130 interrupted (run the same command
again to resume); 75 batches submitted with ``--batch --no-wait`` (run it again to
collect them). The library's messages are said here in the command line's words
(:func:`advise`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from framekit._errors import (
    BatchPending,
    FramekitError,
    InputError,
    JudgeAuthenticationError,
    MissingDependency,
    RunInterrupted,
)
from framekit._version import __version__
from framekit.cli import batches, evaluate, gate, pairwise, report, traces
from framekit.cli.options import ENV_HELP, command


def build_parser() -> argparse.ArgumentParser:
    """The ``framekit`` argument parser (every subcommand has ``--help``)."""
    parser = argparse.ArgumentParser(
        prog="framekit",
        description="Score tables of LLM traces with LLM-as-judge evaluators.",
        epilog=ENV_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"framekit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    evaluate.add_parser(sub)
    pairwise.add_parser(sub)
    report.add_parsers(sub)
    demo = command(
        sub,
        "demo",
        help="score the bundled sample offline and write a report",
        description="Score framekit's bundled sample (200 RAG answers, two retrieval "
        "strategies) with every built-in evaluator on the offline local judge (or "
        "$FRAMEKIT_JUDGE), print summaries, and write scored.parquet and PNG charts.",
    )
    # -o as in `framekit evaluate -o`; --out as before.
    demo.add_argument(
        "-o", "--out", "--output", default="demo-out", metavar="DIR", help="output directory"
    )
    demo.add_argument(
        "--lm",
        action="store_true",
        help="offline: read groundedness, context recall and coherence with the lm extra's "
        "likelihood scorer (slower: about 1 text/s)",
    )
    demo.set_defaults(handler=_run_demo)
    traces.add_parser(sub)
    gate.add_parser(sub)
    batches.add_parser(sub)
    return parser


def _run_demo(args: argparse.Namespace) -> int:
    from framekit.demo import run_demo

    run_demo(args.out, likelihood=args.lm)
    return 0


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


_MAPPING = re.compile(r"mapping=\{'(\w+)': <column>\}")
_NOT_PARQUET = re.compile(r"'([^']+)' is not a Parquet file")


def advise(message: str) -> str:
    """``message`` with Python-syntax advice replaced by the equivalent options.

    Examples
    --------
    >>> advise("map it with mapping={'input': <column>}. Available columns: 'q'")
    "map it with --map input=<column>. Available columns: 'q'"
    """
    message = _MAPPING.sub(lambda m: f"--map {m.group(1)}=<column>", message)
    found = _NOT_PARQUET.search(message)
    if found:
        path = found.group(1)
        if os.path.isabs(path) and Path(path).is_relative_to(Path.cwd()):
            path = os.path.relpath(path)  # as the user typed it, most likely
        reader = "read_json_auto" if path.endswith((".json", ".jsonl", ".ndjson")) else None
        query = f"select * from {reader}('{path}')" if reader else f"select * from '{path}'"
        message = re.sub(r"convert it first, e\.g\. .*$", "", message).rstrip("; ")
        message += f'; score it through DuckDB instead: framekit evaluate --sql "{query}" ...'
    return message
