"""``evaluate_pairwise``: strategies compared head to head, every pair asked in both orders.

A frame holds one row per (key, group): a question answered by each strategy. Rows with
the same key face each other, two groups at a time; each pair becomes two records of a
pairwise evaluator (:class:`~framekit.evaluators.Preference`), one with a's candidate
shown first and one with b's, scored by the normal engine (:func:`framekit.evaluate.
evaluate_with_stats`): so caching, deduplication, batch mode, cascades, confidences and
rate limits are those of any run, and a re-run sends nothing. The two verdicts are read
back into one row per pair; a pair whose orders name different winners is a tie, and the
share of pairs in which the judge chose the same position in both orders is the run's
position bias, per evaluator.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import polars as pl

from framekit import _provenance
from framekit import _result_columns as contract
from framekit._aio import run_sync
from framekit._errors import EvaluationFailed, InputError, MappingError
from framekit._frames import like_input, to_polars
from framekit._progress import RunProgress
from framekit._results import ProgressFn
from framekit.analysis._pairs import position_bias
from framekit.engine.budget import spending_limit
from framekit.engine.cache import Cache
from framekit.engine.mapping import MappingValue
from framekit.engine.prepare import resolved_fields
from framekit.engine.stats import RunStats, record_last
from framekit.evaluate import OnError, evaluate_with_stats, warn_if_all_failed
from framekit.evaluators.base import Evaluator, check_evaluators
from framekit.evaluators.pairwise import FIRST, SECOND
from framekit.judges.resolve import JudgeLike

__all__ = ["aevaluate_pairwise", "evaluate_pairwise"]

#: The fields a pairwise evaluator reads: the request, and each candidate's output and
#: documents.
_FIELDS = ("input", "output", "context")


@dataclass
class _Pair:
    """One row of the pairs frame before its verdicts: the key, the groups, the rows."""

    key: tuple[Any, ...]
    a: Any
    b: Any
    row_a: int | None
    row_b: int | None
    shared_input: Any
    error: str | None = None
    asked: int | None = None  # index of its first request (a first); the next is b first


def evaluate_pairwise(
    df: Any,
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    by: str,
    on: str | Sequence[str],
    judge: JudgeLike | None = None,
    against: Any = None,
    cache: Cache | str | bool | None = None,
    on_error: OnError = "record",
    progress: bool | ProgressFn = True,
    max_cost_usd: float | None = None,
) -> Any:
    """Compare the groups of ``by`` head to head on every key of ``on``, each pair of
    answers judged in both orders.

    Parameters
    ----------
    df
        One row per (key, group): polars, pandas, Arrow or DuckDB, as for
        ``evaluate_dataframe``.
    evaluators
        Pairwise evaluators (:class:`~framekit.evaluators.Preference`).
    mapping
        Field -> source as for ``evaluate_dataframe``: ``input`` (the request, required),
        ``output`` (each group's answer) and/or ``context`` (each group's documents).
        With only ``context``, the retrievals are compared.
    by
        The group column (strategy, model, prompt version).
    on
        The key column(s): rows with the same key face each other.
    judge
        Anything a judge can be for ``evaluate_dataframe`` (a model string, a
        :class:`~framekit.Judge`, ``"local"``, a :class:`~framekit.Cascade`).
    against
        A group: every other group is compared with it only (it is ``a`` in every pair).
        Default: every two groups (``a`` before ``b`` in sorted order).
    cache, on_error, progress, max_cost_usd
        As for ``evaluate_dataframe``. With ``on_error="raise"``,
        :class:`~framekit.EvaluationFailed` holds the pairs frame.

    Returns
    -------
    polars.DataFrame or pandas.DataFrame
        Pandas in, pandas out; otherwise polars. One row per (key, a, b), keys in the
        order they first appear: the key column(s), ``a``, ``b``, the input column (the
        request, once: the first group's, in sorted order, that has the key), then per
        evaluator ``<name>_winner`` (a's group, b's group or ``"tie"``; null on an error),
        ``<name>_ab`` and ``<name>_ba`` (the verdict with a shown first, and with b shown
        first: ``"A"``, ``"B"`` or ``"tie"``), ``<name>_consistent`` (both orders gave the
        same outcome), ``<name>_confidence`` (the lower of the two verdicts' confidences),
        ``<name>_explanation`` (both orders' reasoning) and ``<name>_error``. A pair whose
        orders disagree is a tie. A key missing a group gives that group's pairs an error
        (``no row of group ...``) and nothing is asked about them; a key repeated within a
        group is an :class:`~framekit.InputError`, as for ``fk.side_by_side``.

        ``fk.last_run().position_bias[name]`` is the share of pairs judged in both orders
        in which the judge chose the same position (first, or second) both times: 0 for a
        judge that follows the content only, 1 for one that follows the position only. It
        is also in the run summary and the run record (``fk.last_run().provenance``).

    Raises
    ------
    InputError
        A missing column, fewer than two groups, ``against`` not a group, a key repeated
        within a group, an evaluator that does not compare pairs, nothing to compare
        (neither ``output`` nor ``context`` mapped).

    Examples
    --------
    >>> import polars as pl
    >>> import framekit as fk
    >>> from framekit.evaluators import Preference
    >>> df = pl.DataFrame({
    ...     "question_id": [1, 1],
    ...     "strategy": ["bm25", "dense"],
    ...     "question": ["How do I reset my password?"] * 2,
    ...     "answer": ["Open Settings, then Security, then Reset password.",
    ...                "Our office is open from nine to five."],
    ... })
    >>> pairs = fk.evaluate_pairwise(
    ...     df, [Preference()], {"input": "question", "output": "answer"},
    ...     by="strategy", on="question_id", judge="local", cache=False,
    ...     progress=False)  # doctest: +SKIP
    >>> pairs.select("a", "b", "preference_winner").rows()  # doctest: +SKIP
    [('bm25', 'dense', 'bm25')]
    """
    return run_sync(
        aevaluate_pairwise(
            df,
            evaluators,
            mapping,
            by=by,
            on=on,
            judge=judge,
            against=against,
            cache=cache,
            on_error=on_error,
            progress=progress,
            max_cost_usd=max_cost_usd,
        )
    )


async def aevaluate_pairwise(
    df: Any,
    evaluators: Evaluator | Sequence[Evaluator],
    mapping: Mapping[str, MappingValue] | None = None,
    *,
    by: str,
    on: str | Sequence[str],
    judge: JudgeLike | None = None,
    against: Any = None,
    cache: Cache | str | bool | None = None,
    on_error: OnError = "record",
    progress: bool | ProgressFn = True,
    max_cost_usd: float | None = None,
) -> Any:
    """Awaitable :func:`evaluate_pairwise` (same parameters and result)."""
    if on_error not in ("record", "raise"):
        raise InputError(f"on_error must be 'record' or 'raise', got {on_error!r}")
    evs = check_evaluators(evaluators)
    for ev in evs:
        if not getattr(ev, "compares_pairs", False):
            raise InputError(
                f"{ev.name}: {type(ev).__name__} scores one answer at a time; "
                "evaluate_pairwise takes pairwise evaluators such as Preference()"
            )
    frame_in = to_polars(df)
    frame = frame_in.frame
    keys = _key_columns(frame, by, on)
    fields = resolved_fields(frame, mapping, set(_FIELDS))
    if "input" not in fields.columns:
        raise MappingError(
            "evaluate_pairwise needs field 'input' (the request both answers are for); "
            "map it with mapping={'input': <column>}"
        )
    if "output" not in fields.columns and "context" not in fields.columns:
        raise MappingError(
            "nothing to compare: map 'output' (each group's answer) and/or 'context' "
            "(each group's documents)"
        )
    pairs, groups = _pairs(frame, fields.columns, fields.row_errors, keys, by, against)
    requests = _requests(pairs, fields.columns)
    stats = RunStats()
    bar = None
    hook: bool | ProgressFn = progress
    if progress is True:
        bar = RunProgress(requests.height, len(evs), stats=stats)
        hook = bar.report
    elif progress is not False and not callable(progress):
        raise InputError(f"progress must be True, False or a callable, got {progress!r}")
    try:
        # Both orders of every pair spend from one budget; a pair the budget left keeps
        # the resumable error on the orders not asked.
        with spending_limit(max_cost_usd):
            scored, stats = await evaluate_with_stats(
                requests,
                evs,
                {f: f for f in _FIELDS if f in requests.columns},
                judge=judge,
                cache=cache,
                progress=hook,
                stats=stats,
            )
    except asyncio.CancelledError:
        record_last(stats)
        raise
    finally:
        if bar is not None:
            bar.close()
    input_name = _input_name(mapping)
    out = _pairs_frame(pairs, scored, evs, keys, input_name, frame.schema[by])
    _count(stats, evs, out, len(pairs))
    stats.provenance = _provenance.with_pairwise(
        stats.provenance or {},
        mapping,
        {
            "by": by,
            "on": keys,
            "against": None if against is None else str(against),
            "groups": [str(g) for g in groups],
            "pairs": len(pairs),
            "position_bias": stats.position_bias,
            "evaluators": stats.pairwise["evaluators"],
        },
    )
    if progress is True:
        print(stats.summary(), file=sys.stderr)
    record_last(stats)
    result = like_input(out, frame_in)
    if on_error == "record":
        warn_if_all_failed(stats)
    elif stats.failures:
        raise EvaluationFailed(
            f"{stats.failures} evaluations failed; first: {stats.first_error}", result
        )
    return result


def _key_columns(frame: pl.DataFrame, by: str, on: str | Sequence[str]) -> list[str]:
    keys = [on] if isinstance(on, str) else list(on)
    if not keys:
        raise InputError("on= names no key column")
    for name, role in [(by, "by"), *[(k, "on") for k in keys]]:
        if not isinstance(name, str) or name not in frame.columns:
            raise InputError(
                f"{role}={name!r}: no such column; columns are {', '.join(frame.columns)}"
            )
    if by in keys:
        raise InputError(f"the key {keys} must not include the group column {by!r}")
    return keys


def _pairs(
    frame: pl.DataFrame,
    fields: Mapping[str, pl.Series],
    row_errors: Mapping[str, Mapping[int, str]],
    keys: list[str],
    by: str,
    against: Any,
) -> tuple[list[_Pair], list[Any]]:
    """Every (key, a, b) to judge, keys in the order they first appear."""
    groups = frame.get_column(by).drop_nulls().unique().sort().to_list()
    if len(groups) < 2:
        raise InputError(f"evaluate_pairwise needs at least two groups in {by!r}, found {groups}")
    if against is not None:
        named = [g for g in groups if str(g) == str(against)]
        if not named:
            raise InputError(
                f"against={against!r} is not a group of {by!r}; groups: {[str(g) for g in groups]}"
            )
        faced = [(named[0], g) for g in groups if g != named[0]]
    else:
        faced = list(combinations(groups, 2))
    errors: dict[int, str] = {}
    for field in _FIELDS:
        for row, message in (row_errors.get(field) or {}).items():
            errors.setdefault(row, message)
    rows: dict[tuple[Any, ...], dict[Any, int]] = {}
    key_rows = frame.select(keys).rows()
    inputs = fields["input"].to_list()
    for i, (key, group) in enumerate(zip(key_rows, frame.get_column(by).to_list())):
        if group is None or any(k is None for k in key):
            continue  # no key, or no group: it faces nothing (as in fk.side_by_side)
        seen = rows.setdefault(key, {})
        if group in seen:
            raise InputError(
                f"key {keys} does not identify one row per group: "
                f"{dict(zip(keys, key))} appears more than once in group {group!r}"
            )
        seen[group] = i
    pairs = []
    for key, present in rows.items():
        first = next((present[g] for g in groups if g in present), None)
        shared = None if first is None else inputs[first]
        for a, b in faced:
            pair = _Pair(key, a, b, present.get(a), present.get(b), shared)
            missing = [g for g, r in ((a, pair.row_a), (b, pair.row_b)) if r is None]
            if missing:
                pair.error = f"no row of group {missing[0]!r} for this key"
            else:
                failed = errors.get(pair.row_a) or errors.get(pair.row_b)  # type: ignore[arg-type]
                if failed:
                    pair.error = failed
            pairs.append(pair)
    return pairs, groups


def _requests(pairs: list[_Pair], fields: Mapping[str, pl.Series]) -> pl.DataFrame:
    """Two records per pair with both rows: a's candidate first, then b's first."""
    values = {f: fields[f].to_list() for f in _FIELDS if f in fields}
    columns: dict[str, list[Any]] = {f: [] for f in values}
    asked = 0
    for pair in pairs:
        if pair.error is not None or pair.row_a is None or pair.row_b is None:
            continue
        pair.asked = asked
        asked += 2
        for first, second in ((pair.row_a, pair.row_b), (pair.row_b, pair.row_a)):
            columns["input"].append(pair.shared_input)
            for field in ("output", "context"):
                if field in values:
                    columns[field].append([values[field][first], values[field][second]])
    return pl.DataFrame([_column(name, data) for name, data in columns.items()])


def _column(name: str, values: list[Any]) -> pl.Series:
    try:
        return pl.Series(name, values, strict=False)
    except Exception:  # values polars cannot type together: kept as Python objects
        return pl.Series(name, values, dtype=pl.Object)


def _input_name(mapping: Mapping[str, MappingValue] | None) -> str:
    """The pairs frame's input column: the mapped column's name, else ``input``."""
    source = (mapping or {}).get("input", (mapping or {}).get("query", "input"))
    return source if isinstance(source, str) else "input"


def _outcome(label: str | None, first: Any, second: Any) -> str | None:
    """The group (as text) a verdict names, ``"tie"``, or None without a verdict."""
    if label is None:
        return None
    return {FIRST: str(first), SECOND: str(second)}.get(label, contract.TIE)


def _pairs_frame(
    pairs: list[_Pair],
    scored: pl.DataFrame,
    evs: Sequence[Evaluator],
    keys: list[str],
    input_name: str,
    group_dtype: Any,
) -> pl.DataFrame:
    """One row per pair: its key, groups and input, then each evaluator's columns."""
    columns: dict[str, pl.Series] = {}
    for k, name in enumerate(keys):
        columns[name] = pl.Series(name, [p.key[k] for p in pairs])
    for side in (contract.PAIR_A, contract.PAIR_B):
        values = [getattr(p, side) for p in pairs]
        columns[side] = pl.Series(side, values, dtype=group_dtype, strict=False)
    if input_name not in columns:
        columns[input_name] = pl.Series(input_name, [p.shared_input for p in pairs])
    for ev in evs:
        for kind, series in _verdicts(pairs, scored, ev.name).items():
            columns[contract.column(ev.name, kind)] = series
    return pl.DataFrame(list(columns.values()))


def _verdicts(pairs: list[_Pair], scored: pl.DataFrame, name: str) -> dict[str, pl.Series]:
    """One evaluator's pair columns from its two verdicts per pair."""
    label = scored[contract.column(name, "label")].to_list() if scored.height else []
    error = scored[contract.column(name, "error")].to_list() if scored.height else []
    why = scored[contract.column(name, "explanation")].to_list() if scored.height else []
    sure = scored[contract.column(name, "confidence")].to_list() if scored.height else []
    out: dict[str, list[Any]] = {kind: [] for kind in contract.PAIR_COLUMNS}
    for pair in pairs:
        if pair.asked is None:
            row = dict.fromkeys(contract.PAIR_COLUMNS)
            row["error"] = pair.error
        else:
            i, j = pair.asked, pair.asked + 1
            ab, ba = label[i], label[j]
            failed = [f"{o}: {e}" for o, e in (("a first", error[i]), ("b first", error[j])) if e]
            row = {"ab": ab, "ba": ba, "error": "; ".join(failed) or None}
            if not failed:
                said_ab = _outcome(ab, pair.a, pair.b)
                said_ba = _outcome(ba, pair.b, pair.a)
                row["consistent"] = said_ab == said_ba
                # Both orders must agree: a judge that named each group once, or a
                # group once and a tie once, has not told them apart.
                row["winner"] = said_ab if said_ab == said_ba else contract.TIE
                confidences = [c for c in (sure[i], sure[j]) if c is not None]
                row["confidence"] = min(confidences) if len(confidences) == 2 else None
            explained = [(o, w) for o, w in (("a first", why[i]), ("b first", why[j])) if w]
            row["explanation"] = "\n".join(f"[{o}] {w}" for o, w in explained) or None
        for kind in contract.PAIR_COLUMNS:
            out[kind].append(row.get(kind))
    return {
        kind: pl.Series(contract.column(name, kind), values, dtype=contract.PAIR_COLUMNS[kind])
        for kind, values in out.items()
    }


def _count(stats: RunStats, evs: Sequence[Evaluator], out: pl.DataFrame, n_pairs: int) -> None:
    """The run's pairwise counts and position bias, per evaluator."""
    per: dict[str, dict[str, int]] = {}
    for ev in evs:
        share, same, judged = position_bias(out, ev.name)
        consistent = out[contract.column(ev.name, "consistent")]
        stats.position_bias[ev.name] = share
        per[ev.name] = {
            "judged": judged,
            "same_position": same,
            "inconsistent": int((~consistent.drop_nulls()).sum()),
        }
    stats.pairwise = {"pairs": n_pairs, "evaluators": per}
