"""``framekit pairwise``: compare the groups of a Parquet file head to head, every pair
asked in both orders; write the pairs Parquet (run record in its footer) and print the
ranking. ``framekit report`` on that file prints it again (``--html``: the head-to-head
page)."""

from __future__ import annotations

import argparse
import re
import sys
import warnings
from pathlib import Path
from typing import Any

from framekit._errors import InputError
from framekit.cli.options import (
    ENV_HELP,
    add_judge_arguments,
    cache_of,
    check_output,
    command,
    judge_of,
    mapping_of,
)

EXAMPLES = """\
examples:
  framekit pairwise runs.parquet -o pairs.parquet --by strategy --on question_id \\
      --map input=question --map output=answer --map context=documents \\
      --judge openai/gpt-4o-mini
  framekit pairwise runs.parquet -o pairs.parquet --by strategy --on question_id \\
      --against bm25 --map input=question --map output=answer
  framekit report pairs.parquet --html pairs.html
"""


def add_parser(sub: Any) -> None:
    """Add ``pairwise`` to the ``framekit`` subcommands."""
    from framekit.evaluators.registry import PAIRWISE_EVALUATORS

    cmd = command(
        sub,
        "pairwise",
        help="compare groups (strategies) head to head: which answer is better, in both orders",
        description="Rows with the same --on key face each other, two groups of --by at a "
        "time; the judge is asked about every pair twice, each answer shown first once, and "
        "a pair whose two verdicts disagree is a tie. Writes one row per (key, a, b) with "
        "<evaluator>_winner, _ab, _ba, _consistent, _confidence, _explanation and _error, "
        "the run record in the file's footer, and prints the ranking (Bradley-Terry "
        "strengths with 95 %% intervals) and the judge's position bias.",
        epilog=EXAMPLES + "\n" + ENV_HELP,
    )
    cmd.add_argument("input", nargs="+", help="Parquet files, globs or directories")
    cmd.add_argument("-o", "--output", required=True, help="the pairs Parquet file to write")
    cmd.add_argument("--by", required=True, metavar="COL", help="the group column (strategy)")
    cmd.add_argument(
        "--on",
        required=True,
        metavar="COL[,COL]",
        help="the key column(s): rows with the same key face each other",
    )
    cmd.add_argument(
        "--against", metavar="GROUP", help="compare every other group with this one only"
    )
    cmd.add_argument(
        "-e",
        "--evaluators",
        action="append",
        metavar="NAMES",
        help=f"comma-separated pairwise evaluators: {', '.join(PAIRWISE_EVALUATORS)} "
        "(default preference)",
    )
    cmd.add_argument(
        "--map",
        action="append",
        metavar="FIELD=COLUMN",
        help="map input, output or context to a column; repeatable (only context: the "
        "retrievals are compared)",
    )
    cmd.add_argument(
        "--judge",
        metavar="MODEL",
        help="litellm model string, or 'local' (default: $FRAMEKIT_JUDGE, else local)",
    )
    add_judge_arguments(cmd)
    cmd.add_argument("--batch", action="store_true", help="send through the provider's batch API")
    group = cmd.add_mutually_exclusive_group()
    group.add_argument("--cache", metavar="DIR", help="response cache directory")
    group.add_argument("--no-cache", action="store_true", help="neither read nor write a cache")
    cmd.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    cmd.set_defaults(handler=run, processes=None, no_wait=False)


def run(args: argparse.Namespace) -> int:
    """Handler of ``framekit pairwise``; returns the exit code."""
    import polars as pl

    from framekit import _provenance, io
    from framekit.evaluate import ALL_FAILED
    from framekit.evaluators.registry import pairwise_evaluators_by_names
    from framekit.pairwise import evaluate_pairwise

    check_output(args.output)
    if args.output == "-":
        raise InputError("-o -: give a file; the pairs file is read again by framekit report")
    evaluators = pairwise_evaluators_by_names(args.evaluators or [])
    mapping = mapping_of(args.map)
    judge = judge_of(args)
    files = io.resolve_sources(args.input)
    frame = pl.read_parquet([str(f) for f in files])
    on = [k.strip() for k in args.on.split(",") if k.strip()]
    with warnings.catch_warnings():
        # The library warns when every evaluation failed; here the exit code says it.
        warnings.filterwarnings("ignore", message=re.escape(ALL_FAILED), category=RuntimeWarning)
        pairs = evaluate_pairwise(
            frame,
            evaluators,
            mapping,
            by=args.by,
            on=on,
            judge=judge,
            against=args.against,
            cache=cache_of(args),
            progress=not args.quiet,
            max_cost_usd=args.max_cost,
        )
    from framekit.engine.stats import last_run

    stats = last_run()
    assert stats is not None and stats.provenance is not None
    record = dict(stats.provenance)
    record["source"] = _provenance.source_label(files)
    # Where the compared rows are, so that the report can show the answers it flipped on.
    record["pairwise"] = {**record["pairwise"], "data": [str(Path(f).resolve()) for f in files]}
    written = io.write_parquet(pairs, args.output, record)
    if args.quiet:
        print(stats.summary(), file=sys.stderr)
    print_ranking(pairs, record, [ev.name for ev in evaluators])
    print(f"\nwrote {written}")
    if stats.rows_left:
        from framekit.engine.budget import budget_reached

        print(budget_reached(stats, written), file=sys.stderr)
        return 1
    errors = [pairs[f"{ev.name}_error"].null_count() == 0 for ev in evaluators]
    if pairs.height and all(errors):
        print(
            "framekit: every pair failed; see the *_error columns of " + str(written),
            file=sys.stderr,
        )
        return 1
    return 0


def print_ranking(pairs: Any, record: dict[str, Any] | None, names: list[str]) -> None:
    """Per evaluator: its ranking (``fk.rank``) and the judge's position bias."""
    from framekit.analysis import format_table
    from framekit.analysis._pairs import position_bias
    from framekit.analysis.rank import rank

    run = (record or {}).get("pairwise") or {}
    by = run.get("by") or "group"
    on = run.get("on") if isinstance(run.get("on"), list) else None
    columns = ["wins", "ties", "losses", "errors", "win_rate", "strength",
               "strength_ci_low", "strength_ci_high", "rank"]  # fmt: skip
    for name in names:
        share, same, judged = position_bias(pairs, name)
        if pairs[f"{name}_winner"].null_count() == pairs.height:
            print(f"\n{name}: no pair has a verdict")
            continue
        ranked = rank(pairs, evaluator=name, by=by, on=on)
        print(f"\n{name}: {pairs.height} pairs")
        print(format_table(ranked.select(by, *columns)))
        shown = "unknown" if share is None else f"{share:.3f} ({same} of {judged} pairs)"
        print(f"position bias: {shown}: the same position chosen in both orders")
