"""One Parquet run, whichever engine scores its slices (this process, or Ray workers).

:class:`ParquetJob` holds what both engines share: the checks made before any work, the
slice plan, the manifest that lets a re-run skip finished slices, filing each slice's
results as a part, the run record written into the output, the atomic assembly of the
destination, and the summary at the end. An engine only decides how the slices get
scored.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from framekit import _provenance
from framekit._errors import EvaluationFailed, InputError, OutputWriteError
from framekit._paths import check_regular_or_new, check_utf8_name
from framekit._progress import RunProgress
from framekit._result_columns import column
from framekit.engine.budget import rows_left
from framekit.engine.cache import Cache
from framekit.engine.mapping import MappingValue
from framekit.engine.stats import RunStats, record_last
from framekit.evaluate import OnError, kept_answers, warn_if_all_failed
from framekit.evaluators.base import Evaluator, check_evaluators
from framekit.io._assemble import _assemble
from framekit.io._columns import needed_columns, validate_inputs
from framekit.io._fingerprint import _file_identity, run_fingerprint
from framekit.io._parts import _MANIFEST_FORMAT, _Parts
from framekit.io._run import ParquetRun, _add_stats, _failed_rows, _top_error
from framekit.io._sources import _row_groups, _schema_of, plan_slices
from framekit.judges.resolve import JudgeLike, JudgeResolver


@dataclass(frozen=True)
class ParquetOptions:
    """How a Parquet run scores and writes, whichever engine scores its slices (the
    keywords of :func:`framekit.evaluate_parquet`)."""

    judge: JudgeLike | None = None
    cache: Cache | str | bool | None = None
    on_error: OnError = "record"
    progress: bool = True
    details: bool = False
    overwrite: bool = False
    slice_rows: int | None = None
    max_cost_usd: float | None = None


class ParquetJob:
    """Scoring Parquet ``files`` into ``destination``: checked and planned on creation.

    Use: ``job = ParquetJob(...)``; ``done = job.open(judge)``; score the slices not in
    ``done`` and hand each to :meth:`file_slice`; :meth:`write`; :meth:`close` (in a
    ``finally``); :meth:`finish` returns the :class:`ParquetRun`.
    """

    def __init__(
        self,
        files: list[Path],
        destination: Path,
        evaluators: Evaluator | Sequence[Evaluator],
        mapping: Mapping[str, MappingValue] | None,
        options: ParquetOptions,
    ) -> None:
        self.started = time.perf_counter()
        self.evaluators = check_evaluators(evaluators)
        if options.on_error not in ("record", "raise"):
            raise InputError(f"on_error must be 'record' or 'raise', got {options.on_error!r}")
        self.files, self.mapping, self.options = files, mapping, options
        self.details, self.overwrite = options.details, options.overwrite
        self.dest = destination.absolute()
        _check_destination(self.dest, files)
        self.schema = _schema_of(files)
        #: Input columns replaced by result columns (``overwrite=True``).
        self.clash = validate_inputs(
            self.schema, self.evaluators, mapping, self.overwrite, self.details
        )
        self.slices = plan_slices(_row_groups(files), options.slice_rows)
        # At least one column, or a slice would have no height.
        self.columns = (
            needed_columns(self.schema, mapping, self.evaluators) or list(self.schema)[:1]
        )
        self._parts: _Parts | None = None
        self._bar: RunProgress | None = None
        self._sources: Any = None
        self._cache: Cache | None = None
        self._saved_at_open = 0
        self._filed = 0  # slices finished by this run
        self.run: ParquetRun | None = None

    # -- before scoring -----------------------------------------------------------------
    def open(self, judge: Any, identity: Any = None, cache: Cache | None = None) -> set[int]:
        """Open the parts directory under this run's manifest; the finished slices.

        ``identity`` names the sources when their files are temporary (a DuckDB query
        copied to Parquet); otherwise the files' own identity is recorded and checked
        again before the destination is written. ``cache`` (when this process has it) is
        named when a write fails: the answers it keeps make the re-run free.
        """
        if cache is not None:
            self._cache, self._saved_at_open = cache, cache.saved
        self._recheck_sources = identity is None
        self._sources = identity if identity is not None else _file_identity(self.files)
        manifest = {
            "format": _MANIFEST_FORMAT,
            "sources": self._sources,
            "slices": [list(s) for s in self.slices],
            "run": run_fingerprint(
                self.evaluators,
                self.mapping,
                judge,
                details=self.details,
                overwrite=self.overwrite,
            ),
        }
        self.dest.parent.mkdir(parents=True, exist_ok=True)
        self._parts = _Parts(self.dest)
        # A slice with rows the budget left is scored again (its answers are in the
        # cache): the re-run with a higher budget sends exactly those rows.
        done = {i for i in self._parts.open(manifest) if not self._left_by_budget(i)}
        total = sum(n for _, n in self.slices)
        skipped = sum(self.slices[i][1] for i in done)
        self.run = ParquetRun(self.dest, total, len(self.slices), len(done), skipped)
        if self.options.progress and total:
            self._bar = RunProgress(total, len(self.evaluators), initial_rows=skipped)
        return done

    def _left_by_budget(self, index: int) -> bool:
        """Whether finished slice ``index`` holds rows a budget left unscored."""
        assert self._parts is not None
        names = [ev.name for ev in self.evaluators]
        errors = pl.scan_parquet(self._parts.part(index)).select(
            column(name, "error") for name in names
        )
        return rows_left(errors.collect(), names) > 0

    @property
    def bar(self) -> RunProgress | None:
        """The progress bar over every row (``None`` without ``progress``)."""
        return self._bar

    # -- while scoring ------------------------------------------------------------------
    def file_slice(self, index: int, results: pl.DataFrame, *stats: RunStats) -> None:
        """Save slice ``index``'s result columns as its part and count its work (the
        stats of whoever scored it: one run, or one per worker batch)."""
        assert self._parts is not None and self.run is not None, "open() first"
        try:
            self._parts.write(index, results)
        except OSError as exc:
            raise self._cannot_write(self._parts.part(index), exc) from None
        self._filed += 1
        for part in stats:
            _add_stats(self.run.stats, part)
        if self._bar is not None:
            self._bar.advance(self.slices[index][1], self.run.stats.failures)

    # -- after scoring ------------------------------------------------------------------
    def metadata(self, judge: Any, source: str | None = None) -> dict[bytes, bytes]:
        """The run record (kept in ``fk.last_run()``) as Parquet key-value metadata."""
        assert self.run is not None, "open() first"
        self._close_bar()
        resolver = JudgeResolver(judge)
        record = _provenance.build(
            self.evaluators,
            [resolver(ev.judge, ev.judge_options) for ev in self.evaluators],
            self.mapping,
            self.run.stats,
            source=source or _provenance.source_label(self.files),
        )
        self.run.stats.provenance = record
        return _provenance.to_metadata(record)

    @property
    def kept_columns(self) -> list[str]:
        """The input columns the destination keeps (those not replaced by results)."""
        return [c for c in self.schema if c not in self.clash]

    def write(self, metadata: dict[bytes, bytes]) -> None:
        """Write the destination atomically from the inputs and the parts."""
        assert self._parts is not None, "open() first"
        if self._recheck_sources and _file_identity(self.files) != self._sources:
            raise InputError("a source file changed while it was being scored; run again")
        try:
            _assemble(self.files, self.kept_columns, self.slices, self._parts, self.dest, metadata)
        except OSError as exc:
            raise self._cannot_write(self.dest, exc) from None
        self._parts.remove()

    def interrupted(self) -> str:
        """What an interrupted run kept, over the whole run: its finished slices and
        every answer it saved in the cache (a slice alone knows only its own answers)."""
        assert self.run is not None and self._parts is not None, "open() first"
        done = self.run.skipped_slices + self._filed
        slices = (
            f"{done} of {len(self.slices)} slices are finished and kept in {self._parts.dir}; "
            if done
            else ""
        )
        saved = self._cache.saved - self._saved_at_open if self._cache is not None else 0
        kept = kept_answers(self._cache, saved, always=True) if self._cache is not None else ""
        return f"framekit: run interrupted. {slices}{kept}".rstrip()

    def _cannot_write(self, path: Path, exc: OSError) -> OutputWriteError:
        """A write failed after the work was done (a full disk): one line saying that
        nothing paid for is lost, and how to get the output without paying again."""
        reason = exc.strerror or str(exc) or type(exc).__name__
        assert self._parts is not None
        kept = [f"the finished slices are in {self._parts.dir}"]
        cache = self._cache
        if cache is not None and cache.enabled:
            kept.append(
                f"the {cache.saved - self._saved_at_open} answers of this run are in the "
                f"cache at {cache.path}"
            )
            again = "free some space (or write elsewhere) and run the same command again"
        else:
            again = "free some space and run the same command again, to the same destination"
        return OutputWriteError(
            f"could not write {path} ({reason}). Nothing paid for is lost: "
            f"{' and '.join(kept)}; {again}: the re-run is free (no answer is bought twice)."
        )

    @property
    def parts(self) -> _Parts:
        assert self._parts is not None, "open() first"
        return self._parts

    def close(self) -> None:
        """Release the progress bar and the parts directory's lock (call in ``finally``);
        a run that stopped before any slice was finished leaves no parts directory."""
        self._close_bar()
        if self._parts is not None:
            self._parts.close(remove_if_empty=True)

    def finish(self) -> ParquetRun:
        """Count the failed rows, record the run, print its summary; raise if asked to."""
        run = self.run
        assert run is not None, "open() first"
        run.failed_rows = _failed_rows(self.dest, self.evaluators)
        run.top_error = _top_error(self.dest, self.evaluators) if run.failed_rows else None
        run.elapsed_s = run.stats.elapsed_s = time.perf_counter() - self.started
        record_last(run.stats)
        if self.options.progress:
            print(run.summary(), file=sys.stderr)
        if self.options.on_error == "record":
            warn_if_all_failed(run.stats)
        elif run.failed_rows:
            raise EvaluationFailed(
                f"{run.failed_rows} rows have errors; see the *_error columns of {self.dest}",
                pl.scan_parquet(self.dest),
            )
        return run

    def _close_bar(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _check_destination(destination: Path, files: Sequence[Path]) -> None:
    check_utf8_name(destination, "destination")
    check_regular_or_new(destination, "destination")  # a FIFO or device is never replaced
    if destination.is_dir():
        raise InputError(f"destination {str(destination)!r} is a directory; name a file")
    if destination.resolve() in files:
        raise InputError(f"destination {str(destination)!r} is also a source; write elsewhere")
