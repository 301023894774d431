"""What a scored trace table holds: its span ids and its evaluators' result columns."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from framekit._errors import InputError

logger = logging.getLogger("framekit.traces")

_RESULT = ("_score", "_label", "_explanation", "_passed", "_error")


@dataclass
class ExportResult:
    """What an export sent, and the failed rows it left out (per evaluator)."""

    sent: int = 0
    skipped_failed: dict[str, int] = field(default_factory=dict)
    destination: str = ""

    def __str__(self) -> str:
        skipped = sum(self.skipped_failed.values())
        where = f" to {self.destination}" if self.destination else ""
        return f"{self.sent} annotations{where}; {skipped} failed rows left out"


def as_polars(scored: Any) -> pl.DataFrame:
    """A scored frame (polars, pandas, Arrow, a LazyFrame or a Parquet path) as polars."""
    if isinstance(scored, pl.LazyFrame):
        return scored.collect()
    if isinstance(scored, pl.DataFrame):
        return scored
    if isinstance(scored, str) or hasattr(scored, "__fspath__"):
        return pl.read_parquet(scored)
    if type(scored).__module__.startswith("pandas"):
        return pl.from_pandas(scored)
    frame = pl.from_arrow(scored)
    if not isinstance(frame, pl.DataFrame):
        raise InputError(f"expected a scored frame, got {type(scored).__name__}")
    return frame


def evaluator_names(frame: pl.DataFrame, evaluators: Sequence[Any] | None) -> list[str]:
    """The evaluators whose result columns the frame holds (all of them when None)."""
    found = [c[: -len("_score")] for c in frame.columns if c.endswith("_score")]
    found = [n for n in found if f"{n}_error" in frame.columns]
    if evaluators is None:
        if not found:
            raise InputError(
                "the frame has no framekit result columns (<name>_score and <name>_error); "
                f"columns: {', '.join(frame.columns[:12])}"
            )
        return found
    names = [e if isinstance(e, str) else str(e.name) for e in evaluators]
    missing = [n for n in names if n not in found]
    if missing:
        raise InputError(
            f"no result columns for evaluator {missing[0]!r} ({missing[0]}_score, "
            f"{missing[0]}_error); evaluators in the frame: {', '.join(found) or '(none)'}"
        )
    return names


def span_column(frame: pl.DataFrame) -> str:
    for name in ("span_id", "context.span_id"):
        if name in frame.columns:
            return name
    raise InputError(
        "the scored frame has no span_id column: score a table from fk.traces.load "
        f"(or keep its span_id); columns: {', '.join(frame.columns[:12])}"
    )


def succeeded(frame: pl.DataFrame, name: str, span: str) -> pl.DataFrame:
    """The rows an evaluator scored: no error, a score, and a span id."""
    return frame.filter(
        pl.col(f"{name}_error").is_null()
        & pl.col(f"{name}_score").is_not_null()
        & pl.col(span).is_not_null()
    )


def report_skipped(skipped: dict[str, int]) -> None:
    total = sum(skipped.values())
    if total:
        parts = ", ".join(f"{name}: {n}" for name, n in skipped.items() if n)
        message = f"{total} failed rows left out of the annotations ({parts})"
        logger.info(message)
        warnings.warn(message, UserWarning, stacklevel=3)
