"""``framekit gate``: a CI step that fails when a scored file misses its bars.

Exit codes: 0 every bar met; 1 a bar missed (the table of checks says which); 2 a usage or
input error (unknown evaluator, unreadable file, a bar that is not ``NAME=VALUE`` or is
given twice, a result column of the wrong dtype).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from framekit._errors import InputError
from framekit.cli.options import command

_EXAMPLES = """\
examples:
  framekit gate scored.parquet --min-pass-rate response_relevance=0.9
  framekit gate 'scored/*.parquet' --min-mean coherence=0.7 --max-failure-rate coherence=0.01
"""


def parse_bars(values: Sequence[str] | None, flag: str) -> list[tuple[str, float]]:
    """``["a=0.9", "b=0.5"]`` -> ``[("a", 0.9), ("b", 0.5)]``, in order, repeats kept
    (``fk.gate`` refuses a bar given twice).

    Examples
    --------
    >>> parse_bars(["response_relevance=0.9"], "--min-pass-rate")
    [('response_relevance', 0.9)]
    """
    bars: list[tuple[str, float]] = []
    for value in values or ():
        name, sep, number = value.partition("=")
        try:
            bars.append((name.strip(), float(number)))
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise InputError(f"{flag} expects EVALUATOR=VALUE (e.g. coherence=0.8), got {value!r}")
    return bars


def _read(path: str) -> Any:
    import polars as pl

    if not any(ch in path for ch in "*?[") and not Path(path).exists():
        raise InputError(f"{path!r} does not exist")
    try:
        return pl.scan_parquet(path).collect()
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise InputError(f"cannot read {path!r} as Parquet: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    """Handler of ``framekit gate``; returns the exit code."""
    from framekit.analysis import format_table
    from framekit.analysis.gate import gate

    bars = {
        "min_pass_rate": parse_bars(args.min_pass_rate, "--min-pass-rate"),
        "min_mean": parse_bars(args.min_mean, "--min-mean"),
        "max_failure_rate": parse_bars(args.max_failure_rate, "--max-failure-rate"),
    }
    try:
        result = gate(_read(args.scored), **bars, max_failures=args.max_failures)
    except InputError as exc:
        raise InputError(_in_flags(str(exc))) from None
    print(format_table(result.table))
    print()
    if bars["min_mean"]:
        print(f"errors allowed per mean bar: {args.max_failures} (--max-failures)")
    print(_in_flags(result.describe()))
    return 0 if result.passed else 1


def _in_flags(text: str) -> str:
    """The library's keyword names as this command's options."""
    for keyword in ("min_pass_rate", "min_mean", "max_failure_rate", "max_failures"):
        text = text.replace(keyword, "--" + keyword.replace("_", "-"))
    return text


def add_parser(sub: Any) -> None:
    """Register ``gate`` on the ``framekit`` subcommand parser."""
    gate = command(
        sub,
        "gate",
        help="exit 1 when a scored file misses its pass-rate or mean bars (for CI)",
        description="Check a scored Parquet file against bars per evaluator, over all rows: "
        "a row whose evaluation failed (an error) counts as not passed, and fails a mean bar "
        "beyond --max-failures. Exit 0 when every bar is met, 1 when one is missed "
        "(with a table of the checks), 2 on a usage or input error.",
        epilog=_EXAMPLES,
    )
    gate.add_argument("scored", help="a Parquet file (or glob) written by framekit evaluate")
    bar = {"action": "append", "metavar": "NAME=VALUE"}
    gate.add_argument("--min-pass-rate", help="lowest share of passed rows", **bar)
    gate.add_argument("--min-mean", help="lowest mean score", **bar)
    gate.add_argument("--max-failure-rate", help="highest share of failed rows", **bar)
    gate.add_argument(
        "--max-failures",
        type=int,
        default=0,
        metavar="N",
        help="rows with an error a --min-mean bar tolerates per evaluator (default 0); "
        "errors always count as not passed for --min-pass-rate",
    )
    gate.set_defaults(handler=run)
