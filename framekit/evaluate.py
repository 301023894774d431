"""``evaluate_dataframe``: score the rows of a table and append typed result columns.

The entry layer of a run: a frame in (:mod:`framekit._frames`), its rows prepared per
evaluator (:mod:`framekit.engine.prepare`), settled by the engine
(:func:`framekit.engine.plan.run`), and their results appended as the typed columns of
the contract (:mod:`framekit._result_columns`), in the kind of frame that came in. Also
one record scored the same way (:func:`ascore_record`), which ``Evaluator.score`` reaches
through the scorer the package installs (see :mod:`framekit._record_scorer`).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import polars as pl

from framekit import _provenance, _secrets
from framekit._aio import note_interrupted, run_sync
from framekit._errors import EvaluationFailed, InputError, JudgeError
from framekit._frames import FrameIn, pandas_result, to_polars
from framekit._progress import RunProgress
from framekit._result_columns import (
    DETAIL_COLUMNS,
    FINDINGS_COLUMNS,
    RESULT_COLUMNS,
    result_columns,
)
from framekit._results import ProgressFn, Record, Verdict
from framekit._score import Score, passes
from framekit.engine import savings
from framekit.engine.budget import check_priced, current_budget, rows_left, spending_limit
from framekit.engine.cache import Cache, resolve_cache
from framekit.engine.mapping import MappingValue
from framekit.engine.plan import LimiterFor, run
from framekit.engine.prepare import (
    Prepared,
    prepare,
    prepare_one,
)
from framekit.engine.stats import RunStats, record_last
from framekit.evaluators.base import Evaluator, check_evaluators
from framekit.judges.resolve import JudgeLike, JudgeResolver

OnError = Literal["record", "raise"]
#: How the warning of a run whose every evaluation failed begins.
ALL_FAILED = "framekit: every evaluation of this run failed"


def _result_series(share: Prepared, details: bool) -> list[pl.Series]:
    """One evaluator's result columns: each record's result, given to every row behind it."""
    ev, records = share.evaluator, share.records
    take = pl.Series("idx", share.inverse, dtype=pl.UInt32)

    def col(kind: str, values: list[Any]) -> pl.Series:
        """One column from each record's value (and the answers read as columns)."""
        dtype = RESULT_COLUMNS.get(kind) or DETAIL_COLUMNS.get(kind) or FINDINGS_COLUMNS[kind]
        values = share.spread(kind, values)
        return pl.Series(f"{ev.name}_{kind}", values, dtype=dtype, strict=False).gather(take)

    score = col("score", [r.value for r in records])
    out = [
        score,
        col("label", [r.label for r in records]),
        col("explanation", [_explained(r.explanation, r.note, r.value) for r in records]),
        passes(score, ev.threshold, ev.direction).alias(f"{ev.name}_passed"),
        col("confidence", [r.confidence for r in records]),
        col("error", [r.error for r in records]),
    ]
    if details:
        out += [
            col("tokens", [r.tokens for r in records]),
            col("cost_usd", [r.cost_usd for r in records]),
            col("cached", [r.cached for r in records]),
            col("latency_s", [r.latency_s for r in records]),
            _masked(col("judge", [_decided_by(share, r) for r in records])),
        ]
        if ev.has_details:
            out.append(col("details", [_json(r.details) for r in records]))
    return out


def _masked(models: pl.Series) -> pl.Series:
    """The ``_judge`` column with a key given as the model string masked (a few distinct
    values: each is looked at once)."""
    shown = {m: _secrets.mask_keys(m) for m in models.drop_nulls().unique().to_list()}
    changed = {m: s for m, s in shown.items() if s != m}
    return models.replace(changed) if changed else models


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False)


def _decided_by(share: Prepared, record: Record) -> str | None:
    """The model of the judge whose verdict a record holds (a cascade says which stage's);
    none for an error."""
    if record.error is not None:
        return None
    return record.judge if share.judge.cascade is not None else share.judge.model


def _explained(explanation: str | None, note: str | None, value: float | None) -> str | None:
    """A scored record's explanation, with what was cut to fit the context window."""
    if note is None or value is None:
        return explanation
    return f"{explanation} {note}" if explanation else note


async def aevaluate_dataframe(
    df: Any,
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    judge: JudgeLike | None = None,
    cache: Cache | str | bool | None = None,
    on_error: OnError = "record",
    progress: bool | ProgressFn = True,
    details: bool = False,
    overwrite: bool = False,
    max_cost_usd: float | None = None,
) -> Any:
    """Awaitable :func:`evaluate_dataframe` (same parameters and result)."""
    if on_error not in ("record", "raise"):
        raise InputError(f"on_error must be 'record' or 'raise', got {on_error!r}")
    stats = RunStats()
    try:
        with spending_limit(max_cost_usd):
            out, stats = await evaluate_with_stats(
                df,
                evaluators,
                mapping,
                judge=judge,
                cache=cache,
                progress=progress,
                details=details,
                overwrite=overwrite,
                stats=stats,
            )
    except asyncio.CancelledError:
        record_last(stats)  # what the interrupted run did, for fk.last_run()
        raise
    record_last(stats)
    if on_error == "record":
        warn_if_all_failed(stats)
    elif stats.failures:
        raise EvaluationFailed(
            f"{stats.failures} evaluations failed; first: {stats.first_error}", out
        )
    return out


async def evaluate_with_stats(
    df: Any,
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    judge: JudgeLike | None = None,
    cache: Cache | str | bool | None = None,
    progress: bool | ProgressFn = True,
    details: bool = False,
    overwrite: bool = False,
    stats: RunStats | None = None,
    limiter_for: LimiterFor | None = None,
) -> tuple[Any, RunStats]:
    """One run: the scored frame and *this* run's statistics, together.

    Every entry point that scores frames of its own (``evaluate_parquet``'s slices, Ray's
    blocks, the demo) calls this and takes the statistics from here: ``fk.last_run()`` is
    the process's latest run, another thread's as likely as this one's, and only the
    public edges set it. ``stats`` (default: new) is filled in place, so that a caller
    still has the counts of a run that was interrupted. ``limiter_for`` hands a judge's
    calls a limiter shared beyond this process (``framekit.ray``'s).
    """
    started = time.perf_counter()
    evs = check_evaluators(evaluators)
    frame_in: FrameIn = to_polars(df)
    frame = frame_in.frame
    new_cols = result_columns(evs, details)
    present = set(frame.columns)
    clash = [c for c in new_cols if c in present]
    if clash and not overwrite:
        raise InputError(
            f"result column {clash[0]!r} already exists; pass overwrite=True to replace it"
        )
    base = frame.drop(clash) if clash else frame

    prepared = await prepare(base, evs, mapping, JudgeResolver(judge))
    await check_priced(share.judge for share in prepared)  # under a budget, before any call
    stats = stats if stats is not None else RunStats()
    stats.rows, stats.evaluations = base.height, base.height * len(evs)
    resolved_cache = resolve_cache(cache)
    saved_before = resolved_cache.saved
    # A callable is someone else's progress display (evaluate_parquet's bar over every
    # slice): it is told of each finished evaluation, and no bar or summary is printed.
    hook = progress if callable(progress) else None
    show = progress is True
    bar = RunProgress(base.height, len(evs), stats=stats) if show and stats.evaluations else None
    try:
        await run(
            prepared,
            resolved_cache,
            stats,
            bar.report if bar else hook,
            show=show,
            limiter_for=limiter_for,
        )
    except asyncio.CancelledError:
        stats.elapsed_s = time.perf_counter() - started
        note_interrupted(
            "framekit: run interrupted. "
            + kept_answers(resolved_cache, resolved_cache.saved - saved_before, always=True)
        )
        raise
    except JudgeError as exc:
        # The run stops (a rejected key, an unreachable endpoint, a missing offline
        # model): say what was kept.
        kept = kept_answers(resolved_cache, resolved_cache.saved - saved_before)
        if kept:
            exc.args = (f"{exc} {kept}",)
        raise exc from None
    finally:
        if bar is not None:
            bar.close()
    # Said in the summary and fk.last_run(), not only at the end of each explanation.
    stats.cut_to_fit = sum(r.weight for share in prepared for r in share.records if r.note)
    # Typed even for an empty frame.
    appended = pl.DataFrame([s for share in prepared for s in _result_series(share, details)])
    result = base.hstack(appended)
    savings.tally(prepared, stats)
    budget = current_budget()
    if budget is not None:
        stats.budget_usd, stats.rows_left = budget.limit, rows_left(result, [e.name for e in evs])
    stats.elapsed_s = time.perf_counter() - started
    if stats.failures:
        stats.first_error = _first_failure(result, evs)
    stats.provenance = _provenance.build(evs, [share.judge for share in prepared], mapping, stats)
    if show:
        print(stats.summary(), file=sys.stderr)
    if frame_in.kind == "pandas":  # pandas in, pandas out; any other kind gets polars
        return pandas_result(frame_in.original, appended), stats
    return result, stats


def warn_if_all_failed(stats: RunStats) -> None:
    """A run in which every evaluation failed says so, even with ``progress=False``.

    Not an exception: with ``on_error="record"`` the errors are the result, one per row
    (a configuration fault that every call would hit has already stopped the run).
    """
    if stats.evaluations and stats.failures == stats.evaluations:
        warnings.warn(
            f"{ALL_FAILED} ({stats.failures} of {stats.evaluations}); first: {stats.first_error}",
            RuntimeWarning,
            stacklevel=1,  # here, not asyncio's frames: the run may be on an event loop
        )


def kept_answers(cache: Cache, saved: int, always: bool = False) -> str:
    """What an early stop kept: the ``saved`` answers already written to the cache."""
    if not cache.enabled:
        return "Caching is off, so no answer of this run was kept." if always else ""
    if saved == 0 and not always:
        return ""
    return (
        f"{saved} responses received before the stop are saved in the cache at {cache.path}; "
        "run the same call again to resume without paying for them."
    )


def _first_failure(result: pl.DataFrame, evs: Sequence[Evaluator]) -> str:
    for ev in evs:
        errors = result.get_column(f"{ev.name}_error")
        idx = errors.is_not_null().arg_max()
        if idx is not None and errors[idx] is not None:
            return f"row {idx}, {ev.name}: {errors[idx]}"
    return "unknown"


def evaluate_dataframe(
    df: Any,
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    judge: JudgeLike | None = None,
    cache: Cache | str | bool | None = None,
    on_error: OnError = "record",
    progress: bool | ProgressFn = True,
    details: bool = False,
    overwrite: bool = False,
    max_cost_usd: float | None = None,
) -> Any:
    """Score every row of a table with LLM-as-judge evaluators; append result columns.

    Parameters
    ----------
    df
        A polars DataFrame or LazyFrame, pandas DataFrame, pyarrow Table or DuckDB
        relation. Polars in gives polars out, pandas in gives pandas out (index kept);
        Arrow, DuckDB and LazyFrame inputs give a polars DataFrame.
    evaluators
        Evaluator instances; their names prefix the result columns and must differ.
    mapping
        Field -> source, where a field is ``input``, ``output``, ``context`` or
        ``history`` and a source is a column name, a polars expression, or a callable
        taking the row as a dict. Defaults to columns named like the fields.
    judge
        A litellm model string, a :class:`framekit.Judge`, ``"local"``, or a
        :class:`framekit.Cascade` of judges (each row asks the next judge only while the
        last one's confidence is below its threshold); ``None`` uses ``$FRAMEKIT_JUDGE``
        or else the offline local judge.
    cache
        A directory, a :class:`framekit.Cache`, or ``False``; ``None`` is the user cache
        directory (``$FRAMEKIT_CACHE_DIR`` or ``~/.cache/framekit``).
    on_error
        ``"record"`` writes a one-line reason into ``<name>_error``; ``"raise"`` raises
        :class:`EvaluationFailed` after the run (every answer stays cached).
    progress
        Show a progress bar and print a one-line summary (also in ``fk.last_run()``).
        A callable instead receives ``(evaluations, kind)`` as evaluations finish
        (``kind`` is ``"done"``, ``"cached"`` or ``"failed"``), for a display of your own.
    details
        Also append ``_tokens``, ``_cost_usd``, ``_cached``, ``_latency_s`` and
        ``_judge`` (the model whose verdict stands: with a :class:`~framekit.Cascade`,
        the stage that decided the row; its tokens, cost and latency add up over the
        stages the row went through).
    overwrite
        Replace result columns that already exist instead of raising.
    max_cost_usd
        A budget in US dollars for the calls of this run. A request goes out only while
        what was spent, plus the most the requests in flight could cost, plus the most it
        could cost (its prompt and the judge's ``max_tokens`` of answer at the judge's
        price) stays within it; after the first that does not fit, none does. The rows
        left get ``<name>_error`` starting ``"budget reached"``, are not cached, and a
        re-run with a higher budget sends exactly those. A judge without a known price
        is an :class:`~framekit.InputError` before any call. See ``docs/cost.md``.

    Returns
    -------
    The input's columns and rows in order, then per evaluator ``<name>_score`` (Float64,
    null on failure), ``_label``, ``_explanation``, ``_passed`` (Boolean), ``_confidence``
    (Float64 in [0, 1], null when the judge gives none) and ``_error``.

    Examples
    --------
    >>> import polars as pl
    >>> import framekit as fk
    >>> from framekit.evaluators import RetrievalRelevance
    >>> df = pl.DataFrame({"question": ["How do I reset my password?"],
    ...                    "docs": [["Open Settings, then Security, then Reset password."]]})
    >>> scored = fk.evaluate_dataframe(
    ...     df, [RetrievalRelevance()], {"input": "question", "context": "docs"},
    ...     judge="local", cache=False, progress=False)  # doctest: +SKIP
    >>> scored.columns[2:4]  # doctest: +SKIP
    ['retrieval_relevance_score', 'retrieval_relevance_label']
    """
    return run_sync(
        aevaluate_dataframe(
            df,
            evaluators,
            mapping,
            judge=judge,
            cache=cache,
            on_error=on_error,
            progress=progress,
            details=details,
            overwrite=overwrite,
            max_cost_usd=max_cost_usd,
        )
    )


async def ascore_record(
    evaluator: Evaluator,
    fields: Mapping[str, Any],
    *,
    judge: JudgeLike | None = None,
    cache: Cache | str | bool | None = None,
) -> Score:
    """Score a single record (``Evaluator.score`` / ``ascore``): the same engine as a
    frame's rows, one record. A record the evaluator cannot evaluate (a null or empty
    required field) raises its :class:`~framekit._errors.RecordError`, a ``ValueError``;
    a failed judge call is the returned score's ``error``."""
    resolved = JudgeResolver(evaluator.judge)(judge, evaluator.judge_options)
    share = await prepare_one(evaluator, resolved, fields)
    stats = RunStats(rows=1, evaluations=1)
    started = time.perf_counter()
    await run([share], resolve_cache(cache), stats)
    stats.elapsed_s = time.perf_counter() - started
    r = share.records[0]
    verdict = None if r.value is None else Verdict(r.value, r.label, r.explanation, r.confidence)
    metadata: dict[str, Any] = {
        "judge": r.judge if resolved.cascade is not None else _secrets.mask_keys(resolved.model),
        "template_version": evaluator.version,
        "tokens": r.tokens,
        "cost_usd": r.cost_usd,
        "cached": r.cached,
    }
    if r.details is not None:
        metadata["details"] = r.details
    return evaluator.make_score(verdict, error=r.error, metadata=metadata)
