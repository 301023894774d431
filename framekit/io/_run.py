"""What a run did: :class:`ParquetRun`, and the stats summed over slices."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path

import polars as pl

from framekit._result_columns import column
from framekit.engine.savings import add_savings, budget_line
from framekit.engine.stats import RunStats, add_confidence, add_stages, cascade_lines, cut_note
from framekit.evaluators.base import Evaluator


@dataclass
class ParquetRun:
    """What :func:`evaluate_parquet` did.

    ``stats`` totals the work of *this* run (requests sent, cache hits, tokens...);
    slices finished by an earlier, interrupted run are counted in ``skipped_slices`` and
    ``skipped_rows``. ``failed_rows`` counts rows of the destination where at least one
    evaluator recorded an error.
    """

    destination: Path
    rows: int
    slices: int
    skipped_slices: int = 0
    skipped_rows: int = 0
    failed_rows: int = 0
    #: The most common error message in the destination and how many evaluations had it.
    top_error: tuple[str, int] | None = None
    stats: RunStats = field(default_factory=RunStats)
    elapsed_s: float = 0.0

    def summary(self) -> str:
        """One line for a terminal or a log."""
        resumed = (
            f", {self.skipped_slices} already done ({self.skipped_rows} rows)"
            if self.skipped_slices
            else ""
        )
        line = (
            f"framekit: wrote {_rows(self.rows)} to {self.destination} in {self.elapsed_s:.1f}s "
            f"({self.slices} slice{'' if self.slices == 1 else 's'}{resumed}); "
            f"{self.stats.requests_sent} requests sent, {self.stats.cache_hits} cache hits, "
            f"{_rows(self.failed_rows)} with errors"
        )
        if self.top_error is not None:
            message, count = self.top_error
            line += f" (most common, {count}x: {message})"
        line += cut_note(self.stats.cut_to_fit)
        line += f"; {self.stats.tokens_text()}, {self.stats.cost_text()}"
        if self.stats.batch_requests:
            line += f" ({self.stats.batch_requests} answered by batch API at 50 % price)"
        line += self.stats.per_1000_text()
        lines = [line, *cascade_lines(self.stats.stages)]
        budget = budget_line(self.stats)
        if budget is not None:
            lines.append(budget)
        return self.stats.with_hints("\n".join(lines))


def _add_stats(total: RunStats, part: RunStats) -> None:
    for f in fields(RunStats):
        if f.name in (
            "elapsed_s",
            "cost_usd",
            "per_evaluator_failures",
            "first_error",
            "hints",
            "transports",
            "provenance",
            "stages",
            "confidence",
            "budget_usd",
            "saved_dedup_usd",
            "saved_cache_usd",
            "position_bias",  # pairwise runs only, never sliced
            "pairwise",
        ):
            continue
        setattr(total, f.name, getattr(total, f.name) + getattr(part, f.name))
    if part.cost_usd is not None:
        total.cost_usd = (total.cost_usd or 0.0) + part.cost_usd
    for name, n in part.per_evaluator_failures.items():
        total.per_evaluator_failures[name] = total.per_evaluator_failures.get(name, 0) + n
    add_savings(total, part)
    add_confidence(total.confidence, part.confidence)
    total.first_error = total.first_error or part.first_error
    add_stages(total.stages, part.stages)
    total.transports += [t for t in part.transports if t not in total.transports]
    # Every slice would give the same advice: once is enough.
    if part.hints and not total.hints:
        total.hints = list(part.hints)


def _rows(n: int) -> str:
    return f"{n} row" + ("" if n == 1 else "s")


def _top_error(path: Path, evaluators: Sequence[Evaluator]) -> tuple[str, int] | None:
    """The most common error message of the file's error columns, and its count."""
    errors = pl.concat(
        [
            pl.scan_parquet(path).select(pl.col(column(ev.name, "error")).alias("error"))
            for ev in evaluators
        ]
    ).drop_nulls()
    top = (
        errors.group_by("error")
        .len()
        .sort(["len", "error"], descending=[True, False])
        .head(1)
        .collect()
    )
    return None if top.height == 0 else (str(top["error"][0]), int(top["len"][0]))


def _failed_rows(path: Path, evaluators: Sequence[Evaluator]) -> int:
    errors = [pl.col(column(ev.name, "error")).is_not_null() for ev in evaluators]
    value = pl.scan_parquet(path).select(pl.any_horizontal(errors).sum()).collect().item()
    return int(value or 0)
