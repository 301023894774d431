"""What the scoring commands share: reading the judge, mapping, cache and evaluator flags.

The API key is never a flag (it would land in the shell history): the judge reads
``FRAMEKIT_API_KEY`` (or the provider's variable litellm reads, such as
``OPENAI_API_KEY``), or the variable named by ``--api-key-env``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from framekit._errors import InputError, RunInterrupted
from framekit._paths import check_writable

#: ``-o -``: the Parquet file goes to standard output.
STDOUT = "-"

ENV_HELP = """\
environment:
  FRAMEKIT_JUDGE      default judge model (else the offline local judge)
  FRAMEKIT_API_KEY    API key of the judge endpoint (never pass a key as a flag)
  FRAMEKIT_API_BASE   default --api-base
  FRAMEKIT_CACHE_DIR  default cache directory (else ~/.cache/framekit)
"""


def check_output(output: str, *, no_wait: bool = False) -> None:
    """Refuse an ``-o`` that cannot be written, before any paid work (one line, exit 2).

    ``-o -`` is standard output: refused when it is a terminal (Parquet is binary) and
    with ``--no-wait``, whose answers are collected by running the command again into
    the file it names (a stream has none to come back to).
    """
    if output != STDOUT:
        check_writable(output, "-o", missing_dirs=True)
        return
    if no_wait:
        raise InputError(
            "-o - with --no-wait: the batch is collected by running the command again, "
            "and a stream has no file to collect into; give -o FILE"
        )
    if sys.stdout.isatty():
        raise InputError(
            "-o -: standard output is a terminal and Parquet is binary; pipe it into a "
            "reader or redirect it to a file"
        )


@contextlib.contextmanager
def output_file(output: str) -> Iterator[Path]:
    """The path a command writes its Parquet file to: ``output`` itself, or for ``-o -``
    a temporary file whose bytes (the run record in the footer included) go to standard
    output once the block has finished.

    The run writes a file first because a Parquet footer comes last and the run is
    assembled from finished slices. So ``-o -`` cannot resume: an interrupted run keeps
    its answers in the cache (the re-run does not pay for them again) but not its
    finished slices. While the block runs, anything printed goes to standard error, so
    that standard output carries the file and nothing else.
    """
    if output != STDOUT:
        yield Path(output)
        return
    with tempfile.TemporaryDirectory(prefix="framekit-stdout-") as tmp:
        path = Path(tmp) / "stdout.parquet"
        try:
            with contextlib.redirect_stdout(sys.stderr):
                yield path
        except RunInterrupted as exc:  # its finished slices leave with the directory
            said = re.sub(r"\S+ of \S+ slices are finished and kept in \S+; ", "", str(exc))
            raise RunInterrupted(f"{said} (with -o -, finished slices are not kept)") from None
        with path.open("rb") as written:
            shutil.copyfileobj(written, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        # The run's summary named the temporary file: say where the bytes went.
        size = path.stat().st_size
        print(f"framekit: {size:,} bytes of Parquet written to standard output", file=sys.stderr)


def mapping_of(values: Sequence[str] | None) -> dict[str, str] | None:
    """``--map FIELD=COLUMN`` flags as a mapping (``None`` when none is given)."""
    if not values:
        return None
    mapping: dict[str, str] = {}
    for item in values:
        field, sep, column = item.partition("=")
        if not sep or not field.strip() or not column.strip():
            raise InputError(f"--map {item!r}: expected FIELD=COLUMN, e.g. --map input=question")
        mapping[field.strip()] = column.strip()
    return mapping


def judge_of(args: argparse.Namespace) -> Any:
    """The judge the flags describe: a model string becomes a ``fk.Judge`` with limits;
    ``--cascade A,B --escalate-below T`` a ``fk.Cascade`` whose model stages share them."""
    from framekit.judges.resolve import ENV_JUDGE

    cascade = getattr(args, "cascade", None)
    if cascade:
        return _cascade_of(args, cascade)
    if getattr(args, "escalate_below", None):
        raise InputError("--escalate-below goes with --cascade")
    model = args.judge or os.environ.get(ENV_JUDGE, "").strip() or None
    if model is None or model.lower() == "local":
        given = [f"--{k}" for k, v in _limits(args).items() if v is not None]
        if given:
            print(f"framekit: {', '.join(given)} ignored by the local judge", file=sys.stderr)
        if model is None and not _offline_flags(args):
            return None  # the default judge, resolved as for any caller
        return _local_judge(args)
    offline = _offline_flags(args)
    if offline:
        print(f"framekit: {', '.join(offline)} ignored by the model judge {model}", file=sys.stderr)
    return _model_judge(args, model)


def _offline_flags(args: argparse.Namespace) -> list[str]:
    """The offline judge's flags given on the command line."""
    likelihood = getattr(args, "likelihood", None)
    flags = [] if likelihood is None else ["--likelihood" if likelihood else "--no-likelihood"]
    share = getattr(args, "relevant_share", None)
    return flags + (["--relevant-share"] if share is not None else [])


def _local_judge(args: argparse.Namespace) -> Any:
    """The offline judge, with ``--likelihood`` / ``--no-likelihood`` and
    ``--relevant-share`` where given."""
    if not _offline_flags(args):
        return "local"
    from framekit.judges.local import LocalJudge

    return LocalJudge(
        likelihood=getattr(args, "likelihood", None),
        relevant_share=getattr(args, "relevant_share", None),
    )


def _limits(args: argparse.Namespace) -> dict[str, Any]:
    price = getattr(args, "price", None)
    return {
        "rpm": args.rpm,
        "tpm": args.tpm,
        "concurrency": args.concurrency,
        "processes": args.processes,
        "batch": args.batch or None,
        "price": None if price is None else price_of(price),
    }


def add_judge_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that say how the judge is reached and paced, shared by the scoring
    commands: ``--cascade``, ``--escalate-below``, ``--api-base``, ``--api-key-env``,
    ``--price``, ``--max-cost``, ``--rpm``, ``--tpm`` and ``--concurrency``."""
    parser.add_argument(
        "--cascade",
        metavar="JUDGES",
        help="comma-separated judges, cheapest first (e.g. local,openai/gpt-4o-mini): a "
        "row goes to the next judge while its confidence is below --escalate-below",
    )
    parser.add_argument(
        "--escalate-below",
        metavar="T[,T...]",
        help="with --cascade: one confidence threshold in [0, 1] per judge but the last",
    )
    parser.add_argument(
        "--api-base", metavar="URL", help="endpoint of the judge (every model stage)"
    )
    parser.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="environment variable holding the API key (default FRAMEKIT_API_KEY)",
    )
    add_price_argument(parser)
    add_max_cost_argument(parser)
    parser.add_argument("--rpm", type=positive_float, help="requests per minute to stay under")
    parser.add_argument("--tpm", type=positive_float, help="tokens per minute to stay under")
    parser.add_argument("--concurrency", type=positive_int, help="requests in flight (default 16)")


def add_price_argument(parser: argparse.ArgumentParser) -> None:
    """``--price input=2,output=8,cached_input=0.5``: the judge's price (every model stage)."""
    parser.add_argument(
        "--price",
        metavar="KEY=USD,...",
        help="what the judge's endpoint charges (every model stage), in USD per million "
        "tokens: input=, output=, and optionally cached_input= and cache_write= (default: "
        "litellm's list price at the provider's own endpoint, else unknown)",
    )


def add_max_cost_argument(parser: argparse.ArgumentParser) -> None:
    """``--max-cost USD``: the run's budget (``max_cost_usd``)."""
    parser.add_argument(
        "--max-cost",
        type=positive_float,
        metavar="USD",
        help="a budget in USD: no request is sent that could take the run past it; the "
        "rows left get an error saying so (exit 1) and the same command with a higher "
        "--max-cost scores exactly those. With --dry-run: say whether the estimate fits",
    )


def price_of(text: str) -> dict[str, float]:
    """``--price input=2,output=8,cached_input=0.5`` as ``Judge(price=...)`` takes it,
    checked as the judge checks it (an :class:`~framekit.InputError` naming the key).

    Examples
    --------
    >>> price_of("input=2, output=8,cached_input=0.5")
    {'input': 2.0, 'output': 8.0, 'cached_input': 0.5}
    """
    from framekit.judges.pricing import PRICE_KEYS, price_from

    rates: dict[str, Any] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InputError(
                f"--price {text!r}: expected KEY=USD pairs separated by commas, e.g. "
                f"--price input=2,output=8 (keys: {', '.join(PRICE_KEYS)})"
            )
        try:
            rates[key] = float(value)
        except ValueError:
            rates[key] = value.strip()  # price_from names the key and the value
    price_from(rates, where="--price")
    return rates


def _model_judge(args: argparse.Namespace, model: str) -> Any:
    from framekit.judges.judge import Judge

    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise InputError(f"--api-key-env: environment variable {args.api_key_env} is not set")
    kwargs = {k: v for k, v in _limits(args).items() if v is not None}
    if args.batch and args.no_wait:
        kwargs["wait"] = False
    return Judge(model, api_base=args.api_base, api_key=api_key, **kwargs)


def _cascade_of(args: argparse.Namespace, spec: str) -> Any:
    """``--cascade local,openai/gpt-4o-mini --escalate-below 0.8``: the limits, endpoint
    and key flags apply to every model stage."""
    from framekit.judges.cascade import Cascade

    if args.judge:
        raise InputError("give --judge or --cascade, not both")
    models = [m.strip() for m in spec.split(",")]
    if len(models) < 2 or not all(models):
        raise InputError(
            f"--cascade {spec!r}: two or more comma-separated judges, cheapest first, "
            "e.g. --cascade local,openai/gpt-4o-mini"
        )
    if not args.escalate_below:
        raise InputError(
            f"--cascade needs --escalate-below: {len(models) - 1} comma-separated "
            "confidence(s) in [0, 1], e.g. --escalate-below 0.8 (fk.calibrate_cascade "
            "chooses them with a guarantee)"
        )
    try:
        thresholds = [float(t) for t in args.escalate_below.split(",")]
    except ValueError:
        raise InputError(
            f"--escalate-below {args.escalate_below!r}: comma-separated numbers in [0, 1]"
        ) from None
    judges = [_local_judge(args) if m.lower() == "local" else _model_judge(args, m) for m in models]
    return Cascade(judges, escalate_below=thresholds)


def cache_of(args: argparse.Namespace) -> Any:
    """``--cache DIR`` / ``--no-cache`` as ``cache=``."""
    return False if args.no_cache else args.cache


def evaluators_of(names: Sequence[str]) -> list[Any]:
    """``-e NAMES`` flags (comma-separated, repeatable) as evaluators."""
    from framekit.evaluators.registry import evaluators_by_names

    return evaluators_by_names(names)


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def positive_float(text: str) -> float:
    """An argparse type: a number > 0."""
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def builtin_names() -> list[str]:
    """The names ``-e`` takes for the built-in evaluators."""
    from framekit.evaluators.registry import BUILTIN_EVALUATORS

    return list(BUILTIN_EVALUATORS)


def command(sub: Any, name: str, *, help: str, description: str, epilog: str | None = None) -> Any:
    """Declare the subcommand ``name`` of ``framekit`` (its epilog, examples, kept as written)."""
    return sub.add_parser(
        name,
        help=help,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
