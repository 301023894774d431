"""Parquet larger than memory, and DuckDB: ``evaluate_parquet``, ``evaluate_sql``, ``register``.

``evaluate_parquet`` scores a Parquet file (or glob, or list of files) slice by slice:

- Slices follow the row groups (merged when tiny, split when huge), read with
  ``pl.scan_parquet(...).slice(offset, n)``; only the columns the mapping needs are read
  for scoring, so peak memory follows the slice size, not the file size.
- Each finished slice's result columns go to a *part* in a hidden directory next to the
  destination (``.<name>.framekit-parts/part-00000.parquet``), written under a temporary
  name and renamed into place only when complete. A manifest there records what the parts
  belong to: the sources' identity (path, size, mtime) and a fingerprint of the evaluators,
  mapping and judges. A re-run with the same manifest skips the finished slices, and the
  unfinished ones cost nothing for answers already in the response cache.
- When every slice is done, the input columns (read again in small batches) and the
  parts are streamed into one file under a temporary name, which is then renamed onto
  the destination: no half-written file ever has the destination's name, and an existing
  destination stays as it was until the new one is complete.

DuckDB: ``evaluate_sql`` (and a relation passed as ``source``) first copies the query's
result to a temporary Parquet file (DuckDB streams it), then proceeds as above. ``register`` puts a scored frame (without copying it) or a Parquet file in front of
a DuckDB connection as a view.
"""

from __future__ import annotations

import contextlib
import glob as globlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Union

import polars as pl

from framekit._aio import run_sync
from framekit._errors import InputError
from framekit._mapping import MappingValue, resolve_mapping
from framekit.engine.cache import Cache, digest, resolve_cache
from framekit.engine.stats import RunStats, record_last
from framekit.evaluators.base import FIELDS, Evaluator
from framekit.frame import EvaluationFailed, OnError, _check_evaluators, aevaluate_dataframe
from framekit.frame import result_columns as _result_columns
from framekit.judges.base import JudgeLike, resolve_judge

__all__ = [
    "ParquetRun",
    "aevaluate_parquet",
    "evaluate_parquet",
    "evaluate_sql",
    "register",
]

SourceLike = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]], Any]

#: Slicing bounds when ``slice_rows`` is None (row-group sized slices).
MIN_SLICE_ROWS = 10_000  # consecutive smaller row groups are merged up to this
# Scoring a slice holds its mapped values as Python objects (a few times their Arrow
# size), so slices stay near 100,000 rows: about 250 MB of peak RSS for short texts.
MAX_SLICE_ROWS = 100_000  # larger row groups are split
MAX_SLICE_BYTES = 64 * 2**20  # ... and so are row groups above this uncompressed size
ASSEMBLY_BATCH_ROWS = 16_384  # rows read at a time when the destination is written
OUTPUT_ROW_GROUP_ROWS = 65_536  # row group size of the destination

_MANIFEST_FORMAT = 1
_PARQUET_MAGIC = b"PAR1"


# --------------------------------------------------------------------------- summary


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
    stats: RunStats = field(default_factory=RunStats)
    elapsed_s: float = 0.0

    def summary(self) -> str:
        """One line for a terminal or a log."""
        resumed = (
            f", {self.skipped_slices} already done ({self.skipped_rows} rows)"
            if self.skipped_slices
            else ""
        )
        return (
            f"framekit: wrote {self.rows} rows to {self.destination} in {self.elapsed_s:.1f}s "
            f"({self.slices} slices{resumed}); {self.stats.requests_sent} requests sent, "
            f"{self.stats.cache_hits} cache hits, {self.failed_rows} rows with errors"
        )


# --------------------------------------------------------------------------- sources


def _is_glob(text: str) -> bool:
    return any(ch in text for ch in "*?[")


def resolve_sources(source: SourceLike) -> list[Path]:
    """Expand a path, glob, directory or list of them into Parquet files (checked).

    Raises :class:`InputError` for a missing file, an empty glob, or a file that is not
    Parquet, naming the path.

    Examples
    --------
    >>> resolve_sources("no/such/file.parquet")
    Traceback (most recent call last):
    ...
    framekit._errors.InputError: no such file: 'no/such/file.parquet'
    """
    if isinstance(source, (str, os.PathLike)):
        items: list[Any] = [source]
    else:
        try:
            items = list(source)
        except TypeError:
            raise InputError(
                f"source must be a path, a glob or a list of paths, not {type(source).__name__}"
            ) from None
    if not items:
        raise InputError("no source file given")
    files: list[Path] = []
    for item in items:
        text = os.fspath(item)
        if os.path.isdir(text):
            found = sorted(globlib.glob(os.path.join(text, "**", "*.parquet"), recursive=True))
            if not found:
                raise InputError(f"directory {text!r} holds no .parquet file")
        elif not os.path.exists(text) and _is_glob(text):
            found = sorted(p for p in globlib.glob(text, recursive=True) if os.path.isfile(p))
            if not found:
                raise InputError(f"no file matches {text!r}")
        elif not os.path.exists(text):
            raise InputError(f"no such file: {text!r}")
        else:
            found = [text]
        files += [Path(p).resolve() for p in found]
    unique = list(dict.fromkeys(files))
    for path in unique:
        _check_parquet(path)
    return unique


def _check_parquet(path: Path) -> None:
    # The magic bytes give a clear message before pyarrow or polars give a cryptic one.
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 4))
            tail = fh.read(4)
    except OSError as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None
    if size < 12 or head != _PARQUET_MAGIC or tail != _PARQUET_MAGIC:
        raise InputError(
            f"{str(path)!r} is not a Parquet file (it does not start and end with 'PAR1'); "
            "convert it first, e.g. pl.read_csv(...).write_parquet(...)"
        )


def _schema_of(files: Sequence[Path]) -> pl.Schema:
    schemas = []
    for path in files:
        try:
            schemas.append(pl.read_parquet_schema(path))
        except Exception as exc:  # polars raises several kinds for a corrupt footer
            raise InputError(f"cannot read the Parquet schema of {str(path)!r}: {exc}") from None
    first = schemas[0]
    for path, schema in zip(files[1:], schemas[1:]):
        if dict(schema) != dict(first):
            differ = sorted(set(schema.items()) ^ set(first.items()), key=str)
            raise InputError(
                f"{str(path)!r} does not have the columns and types of {str(files[0])!r} "
                f"(differences: {', '.join(f'{n}: {t}' for n, t in differ[:4])})"
            )
    return pl.Schema(first)


def _row_groups(files: Sequence[Path]) -> list[tuple[int, int]]:
    """(rows, uncompressed bytes) of every row group of every file, in order."""
    import pyarrow.parquet as pq

    groups = []
    for path in files:
        meta = pq.read_metadata(path)
        for i in range(meta.num_row_groups):
            rg = meta.row_group(i)
            groups.append((rg.num_rows, rg.total_byte_size))
    return groups


def plan_slices(
    groups: Sequence[tuple[int, int]], slice_rows: int | None = None
) -> list[tuple[int, int]]:
    """(offset, length) of each slice over the concatenated files.

    With ``slice_rows`` the slices are that long (the last one shorter). Without, a slice
    is a row group; consecutive row groups under ``MIN_SLICE_ROWS`` rows are merged and a
    row group above ``MAX_SLICE_ROWS`` rows or ``MAX_SLICE_BYTES`` is split evenly.

    Examples
    --------
    >>> plan_slices([(100, 1000), (100, 1000)], slice_rows=150)
    [(0, 150), (150, 50)]
    >>> plan_slices([(240_000, 10**6)])
    [(0, 80000), (80000, 80000), (160000, 80000)]
    """
    total = sum(rows for rows, _ in groups)
    if slice_rows is not None:
        if slice_rows < 1:
            raise InputError(f"slice_rows must be >= 1, got {slice_rows}")
        return [(off, min(slice_rows, total - off)) for off in range(0, total, slice_rows)]
    slices: list[tuple[int, int]] = []
    offset = pending_rows = pending_bytes = 0
    for rows, size in groups:
        if rows == 0:
            continue
        if pending_rows and (
            pending_rows + rows > MIN_SLICE_ROWS or pending_bytes + size > MAX_SLICE_BYTES
        ):
            slices.append((offset, pending_rows))
            offset += pending_rows
            pending_rows = pending_bytes = 0
        if rows >= MIN_SLICE_ROWS:
            pieces = max(-(-rows // MAX_SLICE_ROWS), -(-size // MAX_SLICE_BYTES), 1)
            step = -(-rows // pieces)
            for start in range(0, rows, step):
                slices.append((offset + start, min(step, rows - start)))
            offset += rows
        else:
            pending_rows += rows
            pending_bytes += size
    if pending_rows:
        slices.append((offset, pending_rows))
    return slices


def scan_sources(files: Sequence[Path]) -> pl.LazyFrame:
    """A LazyFrame over the files (globs already expanded, so none are re-globbed)."""
    return pl.scan_parquet(
        [str(p) for p in files], glob=False, hive_partitioning=False, cache=False
    )


# --------------------------------------------------------------------------- columns


def needed_columns(
    schema: pl.Schema,
    mapping: Mapping[str, MappingValue] | None,
    evaluators: Sequence[Evaluator],
) -> list[str]:
    """The input columns scoring reads: mapped columns, an expression's roots, and every
    column when a callable mapping needs the whole row."""
    wanted = {f for ev in evaluators for f in ev.fields}
    if mapping is None:
        return [c for c in schema if c in FIELDS and c in wanted]
    columns: set[str] = set()
    for name, source in mapping.items():
        if name not in wanted:
            continue
        if isinstance(source, str):
            columns.add(source)
        elif isinstance(source, pl.Expr):
            try:
                roots = source.meta.root_names()
            except Exception:
                return list(schema)
            if not roots or source.meta.is_regex_projection():
                return list(schema)
            columns.update(roots)
        else:  # a callable receives the whole row as a dict
            return list(schema)
    return [c for c in schema if c in columns]


def validate_inputs(
    schema: pl.Schema,
    evaluators: Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None,
    overwrite: bool,
    details: bool,
) -> list[str]:
    """Raise :class:`InputError` for a bad mapping, a missing field or a column clash,
    before any file is written or any judge is called. Returns the clashing columns."""
    empty = pl.DataFrame(schema=schema)
    needed = {f for ev in evaluators for f in ev.fields}
    resolved = resolve_mapping(empty, mapping, needed)
    for ev in evaluators:
        ev.check_fields(resolved.available, empty.columns)
    clash = [c for c in _result_columns(evaluators, details) if c in schema]
    if clash and not overwrite:
        raise InputError(
            f"result column {clash[0]!r} already exists in the input; pass overwrite=True "
            "(--overwrite) to replace it"
        )
    return clash


# --------------------------------------------------------------------------- fingerprint


def _plain(value: Any) -> Any:
    """``value`` if it is plain JSON data (so it fingerprints stably), else ``None``."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        items = [_plain(v) for v in value]
        return None if any(i is None and v is not None for i, v in zip(items, value)) else items
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: _plain(v) for k, v in value.items()}
    return None


def _judge_identity(judge: Any) -> dict[str, Any]:
    identity: dict[str, Any] = {"kind": getattr(judge, "kind", "?"), "model": judge.model}
    # The local model may be missing: scoring will say so, not the fingerprint.
    with contextlib.suppress(Exception):
        identity.update(judge.cache_identity())
    return identity


def _mapping_identity(mapping: Mapping[str, MappingValue] | None) -> Any:
    if mapping is None:
        return None
    out: dict[str, str] = {}
    for name, source in sorted(mapping.items()):
        if isinstance(source, str):
            out[name] = "column:" + source
        elif isinstance(source, pl.Expr):
            out[name] = "expr:" + str(source)
        else:
            code = getattr(source, "__code__", None)
            body = hashlib.sha256(code.co_code).hexdigest()[:16] if code is not None else ""
            qual = getattr(source, "__qualname__", type(source).__qualname__)
            out[name] = f"callable:{getattr(source, '__module__', '?')}.{qual}:{body}"
    return out


def run_fingerprint(
    evaluators: Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None,
    judge: Any,
    *,
    details: bool,
    overwrite: bool,
) -> str:
    """A digest of everything that decides the result columns (never an API key)."""
    evs = []
    for ev in evaluators:
        attrs = {k: _plain(v) for k, v in sorted(vars(ev).items()) if k != "judge"}
        spec = ev.judge if ev.judge is not None else judge
        evs.append(
            {
                "class": f"{type(ev).__module__}.{type(ev).__qualname__}",
                "namespace": ev.cache_namespace(),
                "attrs": attrs,
                "judge": spec if isinstance(spec, str) else _judge_identity(resolve_judge(spec)),
            }
        )
    payload = {
        "evaluators": evs,
        "mapping": _mapping_identity(mapping),
        "details": details,
        "overwrite": overwrite,
    }
    return digest(payload)


def _file_identity(files: Sequence[Path]) -> list[list[Any]]:
    out = []
    for path in files:
        st = path.stat()
        out.append([str(path), st.st_size, st.st_mtime_ns])
    return out


# --------------------------------------------------------------------------- parts


class _Parts:
    """The hidden directory of finished slices, its manifest and its lock."""

    def __init__(self, destination: Path) -> None:
        self.destination = destination
        self.dir = destination.with_name(f".{destination.name}.framekit-parts")
        self._lock: Any = None

    def open(self, manifest: dict[str, Any]) -> set[int]:
        """Lock the directory, start over if the manifest differs; return finished slices."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self._acquire()
        path = self.dir / "manifest.json"
        try:
            previous = json.loads(path.read_text())
        except (OSError, ValueError):
            previous = None
        if previous != manifest:
            for child in self.dir.iterdir():
                if child.name != ".lock":
                    child.unlink()
            tmp = self.dir / "manifest.json.tmp"
            tmp.write_text(json.dumps(manifest))
            os.replace(tmp, path)
            return set()
        done = set()
        for i, (_, length) in enumerate(manifest["slices"]):
            part = self.part(i)
            if part.exists() and _parquet_rows(part) == length:
                done.add(i)
        return done

    def _acquire(self) -> None:
        try:
            import fcntl
        except ImportError:  # Windows: no advisory lock, runs must not overlap
            return
        self._lock = open(self.dir / ".lock", "a")  # noqa: SIM115 (held for the whole run)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._lock.close()
            self._lock = None
            raise InputError(
                f"another framekit run is writing {str(self.destination)!r}; wait for it to finish"
            ) from None

    def part(self, index: int) -> Path:
        return self.dir / f"part-{index:05d}.parquet"

    def write(self, index: int, results: pl.DataFrame) -> None:
        import pyarrow.parquet as pq

        tmp = self.dir / f"part-{index:05d}.parquet.tmp"
        # Written by pyarrow as plain large_string/double/bool, like every other part, so
        # that the assembly appends columns of one type (polars' string views are not).
        pq.write_table(results.to_arrow(compat_level=pl.CompatLevel.oldest()), tmp)
        os.replace(tmp, self.part(index))

    def remove(self) -> None:
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def _parquet_rows(path: Path) -> int:
    import pyarrow.parquet as pq

    try:
        return int(pq.read_metadata(path).num_rows)
    except Exception:
        return -1


# --------------------------------------------------------------------------- assembly


def _input_batches(files: Sequence[Path], columns: list[str]) -> Iterator[Any]:
    """The input's record batches, in order, a few pages at a time."""
    import pyarrow.parquet as pq

    for path in files:
        with pq.ParquetFile(path) as handle:
            yield from handle.iter_batches(batch_size=ASSEMBLY_BATCH_ROWS, columns=columns)


def _assemble(
    files: Sequence[Path],
    columns: list[str],
    slices: Sequence[tuple[int, int]],
    parts: _Parts,
    destination: Path,
) -> None:
    """Stream the input columns and the result parts into a temporary file, then rename it.

    The input is read once more here, with pyarrow in batches of ``ASSEMBLY_BATCH_ROWS``
    rows rather than a slice at a time: decoding a whole row group for a slice costs
    several times its size in memory, and this step needs none of polars' work.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    tmp = parts.dir / "assembled.parquet.tmp"
    batches = _input_batches(files, columns)
    pending = None
    buffered: list[Any] = []
    writer: pq.ParquetWriter | None = None

    def flush() -> None:
        nonlocal writer
        table = pa.concat_tables(buffered).replace_schema_metadata(None)
        buffered.clear()
        if writer is None:
            writer = pq.ParquetWriter(tmp, table.schema, compression="zstd")
        elif table.schema != writer.schema:  # e.g. string in one file, large_string in another
            table = table.cast(writer.schema)
        writer.write_table(table, row_group_size=table.num_rows)

    try:
        for i, (_, length) in enumerate(slices):
            results = pq.read_table(parts.part(i))
            done = 0
            while done < length:
                if pending is None or pending.num_rows == 0:
                    pending = next(batches)
                take = min(pending.num_rows, length - done)
                piece = pa.Table.from_batches([pending.slice(0, take)])
                pending = pending.slice(take)
                for name in results.column_names:
                    piece = piece.append_column(
                        results.schema.field(name), results.column(name).slice(done, take)
                    )
                buffered.append(piece)
                done += take
                if sum(t.num_rows for t in buffered) >= OUTPUT_ROW_GROUP_ROWS:
                    flush()
        if buffered:
            flush()
    finally:
        if writer is not None:
            writer.close()
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, destination)


# --------------------------------------------------------------------------- evaluate


def _add_stats(total: RunStats, part: RunStats) -> None:
    for f in fields(RunStats):
        if f.name in ("elapsed_s", "cost_usd", "per_evaluator_failures"):
            continue
        setattr(total, f.name, getattr(total, f.name) + getattr(part, f.name))
    if part.cost_usd is not None:
        total.cost_usd = (total.cost_usd or 0.0) + part.cost_usd
    for name, n in part.per_evaluator_failures.items():
        total.per_evaluator_failures[name] = total.per_evaluator_failures.get(name, 0) + n


def _failed_rows(path: Path, evaluators: Sequence[Evaluator]) -> int:
    errors = [pl.col(f"{ev.name}_error").is_not_null() for ev in evaluators]
    value = pl.scan_parquet(path).select(pl.any_horizontal(errors).sum()).collect().item()
    return int(value or 0)


def _check_destination(destination: Path, files: Sequence[Path]) -> None:
    if destination.is_dir():
        raise InputError(f"destination {str(destination)!r} is a directory; name a file")
    if destination.resolve() in files:
        raise InputError(f"destination {str(destination)!r} is also a source; write elsewhere")


async def aevaluate_parquet(
    source: SourceLike,
    destination: str | os.PathLike[str],
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    judge: JudgeLike | None = None,
    cache: Cache | str | bool | None = None,
    on_error: OnError = "record",
    progress: bool = True,
    details: bool = False,
    overwrite: bool = False,
    slice_rows: int | None = None,
) -> ParquetRun:
    """Awaitable :func:`evaluate_parquet` (same parameters and result)."""
    opts = _Options(judge, cache, on_error, progress, details, overwrite, slice_rows)
    dest = Path(destination)
    if _is_duckdb_relation(source):
        with _materialised(source, dest) as (path, identity):
            return await _evaluate_files([path], identity, dest, evaluators, mapping, opts)
    return await _evaluate_files(resolve_sources(source), None, dest, evaluators, mapping, opts)


@dataclass(frozen=True)
class _Options:
    judge: JudgeLike | None
    cache: Cache | str | bool | None
    on_error: OnError
    progress: bool
    details: bool
    overwrite: bool
    slice_rows: int | None


async def _evaluate_files(
    files: list[Path],
    identity: Any,
    destination: Path,
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None,
    opts: _Options,
) -> ParquetRun:
    started = time.perf_counter()
    evs = _check_evaluators(evaluators)
    if opts.on_error not in ("record", "raise"):
        raise InputError(f"on_error must be 'record' or 'raise', got {opts.on_error!r}")
    dest = destination.absolute()
    _check_destination(dest, files)
    schema = _schema_of(files)
    clash = validate_inputs(schema, evs, mapping, opts.overwrite, opts.details)
    slices = plan_slices(_row_groups(files), opts.slice_rows)
    # At least one column, or a slice would have no height.
    columns = needed_columns(schema, mapping, evs) or list(schema)[:1]

    # Resolved once: one judge (one announcement, one limiter identity), one open cache.
    resolved_judge = resolve_judge(opts.judge)
    resolved_cache = resolve_cache(opts.cache)
    manifest = {
        "format": _MANIFEST_FORMAT,
        "sources": identity if identity is not None else _file_identity(files),
        "slices": [list(s) for s in slices],
        "run": run_fingerprint(
            evs, mapping, resolved_judge, details=opts.details, overwrite=opts.overwrite
        ),
    }
    dest.parent.mkdir(parents=True, exist_ok=True)
    parts = _Parts(dest)
    done = parts.open(manifest)
    scan = scan_sources(files)
    total_rows = sum(n for _, n in slices)
    run = ParquetRun(dest, total_rows, len(slices), len(done), sum(slices[i][1] for i in done))
    bar = _RowBar(total_rows, run.skipped_rows) if opts.progress and total_rows else None
    try:
        for i, (offset, length) in enumerate(slices):
            if i in done:
                continue
            frame = scan.select(columns).slice(offset, length).collect()
            scored = await aevaluate_dataframe(
                frame,
                evs,
                mapping,
                judge=resolved_judge,
                cache=resolved_cache,
                on_error="record",
                progress=False,
                details=opts.details,
                overwrite=opts.overwrite,
            )
            del frame
            slice_stats = _last_stats()
            parts.write(i, scored.select(_result_columns(evs, opts.details)))
            del scored
            _add_stats(run.stats, slice_stats)
            if bar is not None:
                bar.advance(length, run.stats.failures)
        if bar is not None:
            bar.close()
            bar = None
        if not slices:
            await _write_empty(scan, evs, mapping, opts.details, clash, dest, parts)
        else:
            if identity is None and _file_identity(files) != manifest["sources"]:
                raise InputError("a source file changed while it was being scored; run again")
            kept = [c for c in schema if c not in clash]
            _assemble(files, kept, slices, parts, dest)
        parts.remove()
    finally:
        if bar is not None:
            bar.close()
        parts.close()
    run.failed_rows = _failed_rows(dest, evs)
    run.elapsed_s = run.stats.elapsed_s = time.perf_counter() - started
    record_last(run.stats)
    if opts.progress:
        print(run.summary(), file=sys.stderr)
    if opts.on_error == "raise" and run.failed_rows:
        raise EvaluationFailed(
            f"{run.failed_rows} rows have errors; see the *_error columns of {dest}",
            pl.scan_parquet(dest),
        )
    return run


def _last_stats() -> RunStats:
    from framekit.engine.stats import last_run

    stats = last_run()
    return stats if stats is not None else RunStats()


async def _write_empty(
    scan: pl.LazyFrame,
    evs: Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None,
    details: bool,
    drop: Sequence[str],
    dest: Path,
    parts: _Parts,
) -> None:
    # No rows: the frame layer gives the typed, empty result columns without any call.
    empty = scan.collect().drop(drop)
    scored = await aevaluate_dataframe(
        empty, evs, mapping, judge="local", cache=False, progress=False, details=details
    )
    tmp = parts.dir / "assembled.parquet.tmp"
    scored.write_parquet(tmp)
    os.replace(tmp, dest)


class _RowBar:
    """One tqdm bar over every row of the input (resumed rows count as done)."""

    def __init__(self, total: int, initial: int) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(
            total=total, initial=initial, desc="framekit", unit="row", dynamic_ncols=True
        )

    def advance(self, rows: int, failures: int) -> None:
        self.bar.set_postfix({"failed": failures}, refresh=False)
        self.bar.update(rows)

    def close(self) -> None:
        self.bar.close()


def evaluate_parquet(
    source: SourceLike,
    destination: str | os.PathLike[str],
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    judge: JudgeLike | None = None,
    cache: Cache | str | bool | None = None,
    on_error: OnError = "record",
    progress: bool = True,
    details: bool = False,
    overwrite: bool = False,
    slice_rows: int | None = None,
) -> ParquetRun:
    """Score a Parquet file larger than memory, slice by slice, into a new Parquet file.

    The destination holds every input column and row, in order, then the result columns
    of :func:`framekit.evaluate_dataframe`. It appears only when complete (written under a
    temporary name, then renamed). An interrupted run leaves its finished slices in
    ``.<destination name>.framekit-parts/`` beside the destination; running the same call
    again skips them, and answers already in the cache are not paid for twice (with
    ``cache=False`` the unfinished slices are paid for again).

    Parameters
    ----------
    source
        A Parquet file, a glob (``"logs/*.parquet"``), a directory of Parquet files, a
        list of those (same columns and types), or a DuckDB relation.
    destination
        The Parquet file to write (replaced if it exists; parent directories created).
    evaluators, mapping, judge, cache, on_error, details, overwrite
        As for :func:`framekit.evaluate_dataframe`. With ``on_error="raise"`` the
        destination is still written, then :class:`framekit.EvaluationFailed` is raised
        (its ``.frame`` is a LazyFrame over the destination).
    progress
        One progress bar over every row of the input, and a summary line at the end.
    slice_rows
        Rows per slice; ``None`` follows the row groups (tiny ones merged, ones above
        100,000 rows or 64 MiB split). Peak memory grows with the slice size.

    Returns
    -------
    ParquetRun
        Rows, slices, skipped (already finished) slices, rows with errors, and the
        :class:`framekit.RunStats` totals of this run (also in ``fk.last_run()``).

    Examples
    --------
    >>> import framekit as fk
    >>> from framekit.evaluators import RetrievalRelevance
    >>> run = fk.evaluate_parquet(
    ...     "logs/*.parquet", "scored.parquet", [RetrievalRelevance()],
    ...     {"input": "question", "context": "docs"}, judge="openai/gpt-4o-mini",
    ... )  # doctest: +SKIP
    >>> run.rows, run.skipped_slices, run.stats.requests_sent  # doctest: +SKIP
    (2000000, 0, 1500)
    """
    return run_sync(
        aevaluate_parquet(
            source,
            destination,
            evaluators,
            mapping,
            judge=judge,
            cache=cache,
            on_error=on_error,
            progress=progress,
            details=details,
            overwrite=overwrite,
            slice_rows=slice_rows,
        )
    )


# --------------------------------------------------------------------------- DuckDB


def _is_duckdb_relation(value: Any) -> bool:
    return type(value).__module__.split(".")[0] in ("duckdb", "_duckdb") and hasattr(
        value, "to_parquet"
    )


def _quote_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def run_sql(sql: str, con: Any = None) -> Any:
    """The DuckDB relation of ``sql`` (on ``con`` or a new in-memory connection).

    A query DuckDB rejects (syntax, missing file or table) raises :class:`InputError`.
    """
    import duckdb

    connection = con if con is not None else duckdb.connect()
    try:
        return connection.sql(sql)
    except duckdb.Error as exc:
        raise InputError(f"the SQL query failed: {str(exc).splitlines()[0]}") from None


@contextlib.contextmanager
def _materialised(relation: Any, destination: Path) -> Iterator[tuple[Path, Any]]:
    """The relation copied to a temporary Parquet file next to the destination.

    The query is run again on every call (its inputs may have changed); its result's
    sha256 is the source identity, so a re-run over the same data resumes.
    """
    import duckdb

    # Beside the destination (same disk, room for big data) when that directory exists;
    # an input error must not leave a new directory behind.
    parent = destination.absolute().parent
    where = parent if parent.is_dir() else Path(tempfile.gettempdir())
    tmpdir = Path(tempfile.mkdtemp(prefix=f".{destination.name}.framekit-sql-", dir=where))
    try:
        path = tmpdir / "input.parquet"
        try:
            relation.to_parquet(str(path), compression="zstd", row_group_size=100_000)
        except duckdb.Error as exc:
            raise InputError(f"the SQL query failed: {str(exc).splitlines()[0]}") from None
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        yield path, [["duckdb", h.hexdigest()]]
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def evaluate_sql(
    sql: str,
    destination: str | os.PathLike[str],
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    con: Any = None,
    **options: Any,
) -> ParquetRun:
    """Score the result of a DuckDB query, streamed, into a Parquet file.

    The query's result is first copied to a temporary Parquet file beside the
    destination (DuckDB streams it, so it may be larger than memory); then this is
    :func:`evaluate_parquet`, including resuming after an interruption.

    Parameters
    ----------
    sql
        A DuckDB query, e.g. ``"select * from 'logs/*.parquet' where strategy = 'dense'"``.
    destination, evaluators, mapping
        As for :func:`evaluate_parquet`.
    con
        A DuckDB connection whose tables and views the query may use (default: a new
        in-memory connection).
    **options
        ``judge``, ``cache``, ``on_error``, ``progress``, ``details``, ``overwrite``,
        ``slice_rows``, as for :func:`evaluate_parquet`.

    Examples
    --------
    >>> run = evaluate_sql(
    ...     "select question, docs from 'runs.parquet' where day = '2024-06-01'",
    ...     "scored.parquet", [RetrievalRelevance()], {"input": "question", "context": "docs"},
    ... )  # doctest: +SKIP
    """
    return evaluate_parquet(run_sql(sql, con), destination, evaluators, mapping, **options)


def _as_paths(value: Any) -> list[str] | None:
    """A path, or a non-empty list of paths, as strings; ``None`` for anything else."""
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    if (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(v, (str, os.PathLike)) for v in value)
    ):
        return [os.fspath(v) for v in value]
    return None


def register(con: Any, name: str, scored_or_path: Any) -> Any:
    """Make a scored frame or a Parquet file queryable in DuckDB as the view ``name``.

    A polars DataFrame is handed over as Arrow without copying the data (polars' string
    views are shared with DuckDB; registering the DataFrame itself would copy it). A
    path or glob becomes ``CREATE OR REPLACE VIEW name AS SELECT * FROM read_parquet(...)``,
    so nothing is read until queried. pandas frames, Arrow tables and LazyFrames are
    registered as they are.

    Parameters
    ----------
    con
        A ``duckdb.DuckDBPyConnection``.
    name
        The view's name.
    scored_or_path
        A frame (polars, pandas, Arrow, LazyFrame), or a Parquet path or glob (str or
        Path), or a list of them.

    Returns
    -------
    The connection, for chaining.

    Examples
    --------
    >>> import duckdb, polars as pl
    >>> con = duckdb.connect()
    >>> scored = pl.DataFrame({"strategy": ["a", "b"], "coherence_score": [1.0, 0.5]})
    >>> _ = register(con, "scored", scored)
    >>> con.sql("select avg(coherence_score) from scored").fetchall()
    [(0.75,)]
    """
    paths = _as_paths(scored_or_path)
    if paths is not None:
        for text in paths:
            if not _is_glob(text) and not os.path.exists(text):
                raise InputError(f"no such file: {text!r}")
        listed = ", ".join(_quote_literal(p) for p in paths)
        con.execute(
            f"CREATE OR REPLACE VIEW {_quote_ident(name)} AS SELECT * FROM read_parquet([{listed}])"
        )
        return con
    obj = scored_or_path
    if isinstance(obj, pl.DataFrame):
        # The newest compat level keeps string views, which DuckDB reads in place.
        obj = obj.to_arrow(compat_level=pl.CompatLevel.newest())
    con.register(name, obj)
    return con
