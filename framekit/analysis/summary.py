"""Summaries and comparisons of scored frames (the HTML report built from them is ``report``).

Everything here reads the result columns that ``evaluate_dataframe`` appends (see
DESIGN.md): an evaluator ``<name>`` is recognised by ``<name>_score`` next to
``<name>_error``. A row whose evaluation failed (an *error*: see ``_outcome``) has no score:
it is counted in ``errors``, left out of every mean, interval and test (never averaged as
0), and counts as not passed in ``pass_rate``.

Intervals are percentile bootstraps with a fixed seed, so a report is reproducible. Each
(evaluator, group) cell draws from its own generator derived from ``seed`` and the cell's
key, so adding a group or an evaluator never changes the numbers of the others, and the
per-group intervals of ``compare`` equal those of ``summarize(by=...)``.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, fields
from typing import Any, Literal

import numpy as np
import polars as pl

from framekit import _result_columns as result_columns
from framekit._errors import InputError
from framekit._score import Direction
from framekit.analysis import _outcome as outcome
from framekit.analysis import _stats
from framekit.analysis._inputs import FrameLike
from framekit.analysis._inputs import resolve_columns as _resolve_columns
from framekit.analysis._inputs import resolve_evaluators as _resolve_evaluators
from framekit.analysis._inputs import score as _score
from framekit.analysis._inputs import to_polars as _to_polars

Test = Literal["bootstrap", "wilcoxon", "t"]

_LABEL_COUNTS = pl.List(pl.Struct({"label": pl.String, "count": pl.Int64}))
_TEST_NAMES: dict[str, tuple[str, str]] = {  # test -> (paired name, unpaired name)
    "bootstrap": ("paired bootstrap", "bootstrap"),
    "wilcoxon": ("wilcoxon signed-rank", "mann-whitney u"),
    "t": ("paired t", "welch t"),
}


# --------------------------------------------------------------------------- inputs


#: The columns of a ``compare`` table that a decision needs (the terminal and the HTML
#: report show these; the rest are one click or one ``select`` away).
DECISION_COLUMNS = (
    "evaluator", "group_a", "group_b", "mean_a", "mean_b", "diff", "diff_ci_low",
    "diff_ci_high", "n_pairs", "p_value", "p_adjusted", "winner",
)  # fmt: skip


def evaluator_names(scored: FrameLike) -> list[str]:
    """Names of the evaluators whose result columns are in ``scored``, in column order.

    An evaluator ``<name>`` is present when both ``<name>_score`` and ``<name>_error`` are.

    Examples
    --------
    >>> df = pl.DataFrame({"q": ["a"], "coherence_score": [1.0], "coherence_error": [None]})
    >>> evaluator_names(df)
    ['coherence']
    """
    columns = (
        scored.collect_schema().names()
        if isinstance(scored, pl.LazyFrame)
        else _to_polars(scored).columns
    )
    return result_columns.evaluator_names(columns)


def _check_options(confidence: float, n_resamples: int, seed: int) -> float:
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    if n_resamples < 1:
        raise InputError(f"n_resamples must be at least 1, got {n_resamples}")
    if seed < 0:
        raise InputError(f"seed must be a non-negative integer, got {seed}")
    return 1.0 - confidence


def _rng(seed: int, *key: object) -> np.random.Generator:
    """A generator for one cell, independent of which other cells exist."""
    return np.random.default_rng([seed, zlib.crc32(repr(key).encode())])


def _num(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else float(value)


# --------------------------------------------------------------------------- summarize


def _aggregations(name: str, columns: set[str], grouped: bool) -> list[pl.Expr]:
    score = outcome.scored(name)
    exprs = [
        pl.len().cast(pl.Int64).alias("rows"),
        score.count().cast(pl.Int64).alias("scored"),
        outcome.error_count(name).alias("errors"),
        score.mean().alias("mean"),
        outcome.pass_rate(name, columns),
    ]
    label = f"{name}_label"
    if label in columns:
        counts = (
            pl.col(label).cast(pl.String).drop_nulls().alias("label").value_counts(name="count")
        )
        exprs.append((counts if grouped else counts.implode()).alias("label_counts"))
    else:
        exprs.append(pl.lit(None, _LABEL_COUNTS).alias("label_counts"))
    if f"{name}_tokens" in columns:
        exprs.append(pl.col(f"{name}_tokens").sum().cast(pl.Int64).alias("tokens"))
    cost = f"{name}_cost_usd"
    if cost in columns:
        # Unknown costs are null; the sum covers the known ones, null when none is known.
        exprs.append(
            pl.when(pl.col(cost).count() > 0)
            .then(pl.col(cost).cast(pl.Float64).sum())
            .alias("cost_usd")
        )
    scores = score.drop_nulls().alias("__scores")
    exprs.append(scores if grouped else scores.implode())
    return exprs


def _summarize_one(
    frame: pl.DataFrame, name: str, keys: list[str], alpha: float, n_resamples: int, seed: int
) -> pl.DataFrame:
    columns = set(frame.columns)
    if keys:
        table = (
            frame.group_by(keys)
            .agg(_aggregations(name, columns, grouped=True))
            .sort(keys, nulls_last=True)
        )
        cells = list(table.select(keys).iter_rows())
    else:
        table = frame.select(_aggregations(name, columns, grouped=False))
        cells = [()]
    lows, highs = [], []
    for key, scores in zip(cells, table.get_column("__scores"), strict=True):
        low, high = _stats.bootstrap_mean_ci(
            scores.to_numpy(),
            confidence=1.0 - alpha,
            n_resamples=n_resamples,
            rng=_rng(seed, name, key),
        )
        lows.append(_num(low))
        highs.append(_num(high))
    by_count = [
        pl.element().struct.field("count"),
        pl.element().struct.field("label"),
    ]
    return table.drop("__scores").with_columns(
        pl.lit(name).alias("evaluator"),
        pl.Series("ci_low", lows, pl.Float64),
        pl.Series("ci_high", highs, pl.Float64),
        # Most frequent label first; ties by label so the output is deterministic.
        pl.col("label_counts")
        .list.eval(pl.element().sort_by(by_count, descending=[True, False]))
        .cast(_LABEL_COUNTS),
    )


def summarize(
    scored: FrameLike,
    by: str | Sequence[str] | None = None,
    *,
    evaluators: str | Sequence[str] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> pl.DataFrame:
    """One row of statistics per evaluator (and per group of ``by``).

    Parameters
    ----------
    scored
        A frame returned by ``evaluate_dataframe`` (polars, pandas, Arrow or DuckDB).
    by
        Column name(s) to group by, e.g. ``"strategy"``; groups are sorted, nulls last.
    evaluators
        Evaluator names to include; default every evaluator found, in column order.
    confidence
        Level of the bootstrap interval of the mean.
    n_resamples
        Bootstrap resamples per interval.
    seed
        Seed of the bootstrap: the same frame and seed give the same intervals.

    Returns
    -------
    polars.DataFrame
        ``evaluator``, the ``by`` columns, ``rows``, ``scored`` (rows with a score),
        ``errors`` (rows whose evaluation failed: counted, never averaged; ``scored +
        errors == rows``), ``mean``, ``ci_low``, ``ci_high`` (percentile bootstrap of the
        mean), ``pass_rate`` (share of *all* rows that passed: an error counts as not
        passed, as in ``fk.gate``), ``label_counts`` (list of ``{label, count}`` structs,
        most frequent first: ``.explode("label_counts").unnest("label_counts")`` makes it
        a table), then ``tokens`` and ``cost_usd`` (sums of known values) when those
        columns exist.

    Examples
    --------
    >>> df = pl.DataFrame({
    ...     "strategy": ["a", "a", "a", "b", "b", "b"],
    ...     "coherence_score": [1.0, 0.5, None, 1.0, 1.0, 0.75],
    ...     "coherence_label": ["yes", "mixed", None, "yes", "yes", "mostly"],
    ...     "coherence_passed": [True, True, None, True, True, True],
    ...     "coherence_error": [None, None, "timeout", None, None, None],
    ... })
    >>> s = summarize(df, by="strategy", n_resamples=200)
    >>> s.select("strategy", "rows", "scored", "errors", "mean", "pass_rate").rows()
    [('a', 3, 2, 1, 0.75, 0.6666666666666666), ('b', 3, 3, 0, 0.9166666666666666, 1.0)]
    >>> s["label_counts"][1].to_list()
    [{'label': 'yes', 'count': 2}, {'label': 'mostly', 'count': 1}]
    """
    frame = _to_polars(scored)
    alpha = _check_options(confidence, n_resamples, seed)
    names = _resolve_evaluators(frame, evaluators)
    keys = _resolve_columns(frame, by, "by")
    parts = [_summarize_one(frame, name, keys, alpha, n_resamples, seed) for name in names]
    out = pl.concat(parts, how="diagonal_relaxed")
    order = [
        "evaluator",
        *keys,
        "rows",
        "scored",
        "errors",
        "mean",
        "ci_low",
        "ci_high",
        "pass_rate",
        "label_counts",
        "tokens",
        "cost_usd",
    ]
    return out.select([c for c in order if c in out.columns])


def failures(scored: FrameLike, *, evaluators: str | Sequence[str] | None = None) -> pl.DataFrame:
    """How often each error message occurred, per evaluator.

    Returns
    -------
    polars.DataFrame
        ``evaluator``, ``error``, ``count``: most frequent first; empty when nothing failed.

    Examples
    --------
    >>> df = pl.DataFrame({"coherence_score": [None, None, 1.0],
    ...                    "coherence_error": ["timeout", "timeout", None]})
    >>> failures(df).rows()
    [('coherence', 'timeout', 2)]
    """
    frame = _to_polars(scored)
    parts = [
        frame.select(pl.col(f"{name}_error").cast(pl.String).alias("error"))
        .drop_nulls()
        .group_by("error")
        .len("count")
        .sort(["count", "error"], descending=[True, False])
        .select(pl.lit(name).alias("evaluator"), "error", pl.col("count").cast(pl.Int64))
        for name in _resolve_evaluators(frame, evaluators)
    ]
    return pl.concat(parts)


# --------------------------------------------------------------------------- compare


def _direction_of(direction: Direction | Mapping[str, Direction] | None, name: str) -> Direction:
    value = direction if direction is None or isinstance(direction, str) else direction.get(name)
    if value is None:
        return "maximize"
    if value not in ("maximize", "minimize"):
        raise InputError(f"direction for {name!r} must be 'maximize' or 'minimize', got {value!r}")
    return value


def _pair_test(
    a: np.ndarray,
    b: np.ndarray,
    paired: bool,
    test: Test,
    alpha: float,
    n_resamples: int,
    rng: np.random.Generator,
) -> _stats.TestResult:
    """The test of ``b - a``: ``a``/``b`` are aligned pairs when ``paired``."""
    confidence = 1.0 - alpha
    if paired:
        d = b - a
        if test == "t":
            return _stats.paired_t_test(d, confidence=confidence)
        boot = _stats.paired_bootstrap(d, confidence=confidence, n_resamples=n_resamples, rng=rng)
        if test == "bootstrap":
            return boot
        statistic, p = _stats.wilcoxon_signed_rank(d)
    else:
        if test == "t":
            return _stats.welch_t_test(a, b, confidence=confidence)
        boot = _stats.two_sample_bootstrap(
            a, b, confidence=confidence, n_resamples=n_resamples, rng=rng
        )
        if test == "bootstrap":
            return boot
        statistic, p = _stats.mann_whitney_u(a, b)
    # Rank tests have no interval of the mean difference: report the bootstrap one.
    return _stats.TestResult(boot.estimate, boot.ci_low, boot.ci_high, statistic, p)


def _pairs(groups: list[Any], baseline: Any) -> list[tuple[Any, Any]]:
    if baseline is None:
        return list(itertools.combinations(groups, 2))
    if baseline not in groups:
        raise InputError(f"baseline {baseline!r} is not one of the groups {groups}")
    return [(baseline, g) for g in groups if g != baseline]


@dataclass
class ComparisonRow:
    """One row of :func:`compare`: one evaluator, one pair of groups. Its fields, in
    order, are the columns of the result; their types give the column dtypes."""

    evaluator: str
    group_a: Any  # the dtype of the group column
    group_b: Any
    n_a: int
    mean_a: float | None
    ci_low_a: float | None
    ci_high_a: float | None
    n_b: int
    mean_b: float | None
    ci_low_b: float | None
    ci_high_b: float | None
    n_pairs: int | None  # null when unpaired
    dropped_pairs: int | None
    unmatched: int | None
    diff: float | None
    diff_ci_low: float | None
    diff_ci_high: float | None
    test: str
    p_value: float | None
    p_adjusted: float | None = None
    winner: Any = None

    @classmethod
    def schema(cls, group_type: pl.DataType) -> dict[str, Any]:
        """Column -> dtype of a comparison whose groups have ``group_type``."""
        dtypes = {"str": pl.String, "int": pl.Int64, "float": pl.Float64, "Any": group_type}
        return {f.name: dtypes[str(f.type).split(" ")[0]] for f in fields(cls)}


@dataclass(frozen=True)
class _Comparison:
    """What every pair of one ``compare`` call shares: the groups' rows and the options."""

    parts: dict[Any, pl.DataFrame]
    keys: list[str]
    test: Test
    alpha: float
    n_resamples: int
    seed: int

    def pair(
        self,
        name: str,
        values: dict[Any, np.ndarray],
        cis: dict[Any, tuple[float, float]],
        a: Any,
        b: Any,
    ) -> tuple[ComparisonRow, _stats.TestResult]:
        """Row ``b - a`` of evaluator ``name`` (without ``p_adjusted`` and ``winner``)."""
        rng = _rng(self.seed, name, "diff", a, b)
        pairs: tuple[int | None, int | None, int | None] = (None, None, None)
        if self.keys:
            left = self.parts[a].select(*self.keys, _score(name).alias("__a"))
            right = self.parts[b].select(*self.keys, _score(name).alias("__b"))
            joined = left.join(right, on=self.keys, how="inner")  # null keys never pair
            valid = joined.drop_nulls(["__a", "__b"])
            lone = left.height + right.height - 2 * joined.height
            pairs = (valid.height, joined.height - valid.height, lone)
            xa, xb = valid["__a"].to_numpy(), valid["__b"].to_numpy()
        else:
            xa, xb = values[a], values[b]
        result = _pair_test(xa, xb, bool(self.keys), self.test, self.alpha, self.n_resamples, rng)
        n_pairs, dropped, unmatched = pairs
        mean_a, mean_b = (float(values[g].mean()) if values[g].size else None for g in (a, b))
        row = ComparisonRow(
            evaluator=name,
            group_a=a,
            group_b=b,
            n_a=values[a].size,
            mean_a=mean_a,
            ci_low_a=_num(cis[a][0]),
            ci_high_a=_num(cis[a][1]),
            n_b=values[b].size,
            mean_b=mean_b,
            ci_low_b=_num(cis[b][0]),
            ci_high_b=_num(cis[b][1]),
            n_pairs=n_pairs,
            dropped_pairs=dropped,
            unmatched=unmatched,
            diff=_num(result.estimate),
            diff_ci_low=_num(result.ci_low),
            diff_ci_high=_num(result.ci_high),
            test=_TEST_NAMES[self.test][0 if self.keys else 1],
            p_value=_num(result.pvalue),
        )
        return row, result


def compare(
    scored: FrameLike,
    by: str = "strategy",
    on: str | Sequence[str] | None = None,
    evaluators: str | Sequence[str] | None = None,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    test: Test = "bootstrap",
    direction: Direction | Mapping[str, Direction] | None = None,
    baseline: Any = None,
) -> pl.DataFrame:
    """Compare the groups of ``by`` evaluator by evaluator, with tests and intervals.

    Every pair of groups is compared (or each group with ``baseline``); the difference is
    always ``mean_b - mean_a``. With ``on``, rows are paired across groups by that key (the
    same question under two strategies) and the test is paired; pairs where either score
    is null are dropped and counted in ``dropped_pairs``, keys found in one group only in
    ``unmatched``. Without ``on``, the groups are treated as independent samples. Rows
    whose group is null are left out. Groups are compared in sorted order.

    ``test`` picks the test:

    - ``"bootstrap"``: paired bootstrap of the mean difference, or, unpaired, independent
      bootstraps of each group. The p-value inverts the percentile interval, so
      ``p_value < 1 - confidence`` exactly when the interval excludes 0.
    - ``"wilcoxon"``: Wilcoxon signed-rank (paired) or Mann-Whitney U (unpaired), with
      scipy's default choice of exact or normal-approximation p-values; the interval of
      the difference is the bootstrap one.
    - ``"t"``: paired t-test, or Welch's unequal-variance t-test; t intervals.

    With more than two groups, ``p_adjusted`` applies Holm's correction across the pairs
    of one evaluator (with two groups it equals ``p_value``). ``winner`` names the better
    group when ``p_adjusted < 1 - confidence``, else it is null; higher scores are better
    unless ``direction`` says ``"minimize"`` (one value for all evaluators, or a mapping
    from evaluator name).

    Parameters
    ----------
    scored
        A frame returned by ``evaluate_dataframe``.
    by
        The column holding the group (strategy, model, prompt version...).
    on
        Key column(s) pairing rows across groups; each key may appear once per group.
    evaluators
        Evaluator names to compare; default every evaluator found.
    confidence, n_resamples, seed
        Interval level, bootstrap resamples and seed (results are reproducible).
    test
        ``"bootstrap"``, ``"wilcoxon"`` or ``"t"`` (see above).
    direction
        ``"maximize"`` (default) or ``"minimize"``, or a mapping evaluator -> direction.
    baseline
        Compare every group with this one instead of all pairs.

    Returns
    -------
    polars.DataFrame
        One row per evaluator and pair: ``evaluator``, ``group_a``, ``group_b``, per group
        ``n_`` (scored rows), ``mean_``, ``ci_low_``, ``ci_high_`` (suffixed ``a``/``b``,
        over all scored rows of the group, as in ``summarize``), ``n_pairs``,
        ``dropped_pairs``, ``unmatched`` (null when unpaired), ``diff``, ``diff_ci_low``,
        ``diff_ci_high``, ``test``, ``p_value``, ``p_adjusted``, ``winner``. Group columns
        keep the dtype of ``by``. When paired, ``diff`` is the mean over the pairs used.

    Examples
    --------
    >>> df = pl.DataFrame({
    ...     "strategy": ["plain"] * 8 + ["rag"] * 8,
    ...     "question": list(range(8)) * 2,
    ...     "rr_score": [0.0, 0.25, 0.5, 0.25, 0.0, 0.5, 0.25, 0.25,
    ...                  0.75, 1.0, 0.75, 0.5, 0.75, 1.0, 0.5, 1.0],
    ...     "rr_error": [None] * 16,
    ... })
    >>> c = compare(df, by="strategy", on="question")
    >>> c.select("group_a", "group_b", "n_pairs", "diff", "winner").rows()
    [('plain', 'rag', 8, 0.53125, 'rag')]
    >>> print(describe_comparison(c))  # doctest: +ELLIPSIS
    rr: rag is better than plain (mean difference rag - plain +0.531, 95% CI +0.375 to +0.688; ...
    """
    frame = _to_polars(scored)
    alpha = _check_options(confidence, n_resamples, seed)
    if test not in _TEST_NAMES:
        raise InputError(f"test must be one of {sorted(_TEST_NAMES)}, got {test!r}")
    names = _resolve_evaluators(frame, evaluators)
    if not isinstance(by, str):
        raise InputError(f"compare groups by one column; got by={by!r}")
    _resolve_columns(frame, by, "by")
    keys = _resolve_columns(frame, on, "on")
    if by in keys:
        raise InputError(f"the pairing key {keys} must not include the group column {by!r}")

    # Rows without a group belong to no strategy; a null winner must only mean "no winner".
    groups = frame.get_column(by).drop_nulls().unique().sort().to_list()
    if len(groups) < 2:
        raise InputError(f"compare needs at least two groups in {by!r}, found {groups}")
    pairs = _pairs(groups, baseline)
    parts = {g: frame.filter(pl.col(by) == g) for g in groups}
    if keys:
        for g, part in parts.items():
            dupes = part.drop_nulls(keys).filter(pl.struct(keys).is_duplicated())
            if dupes.height:
                raise InputError(
                    f"key {keys} does not identify one row per group: {dupes.row(0, named=True)}"
                    f" appears more than once in group {g!r}"
                )

    comparison = _Comparison(parts, keys, test, alpha, n_resamples, seed)
    rows: list[ComparisonRow] = []
    for name in names:
        sign = 1.0 if _direction_of(direction, name) == "maximize" else -1.0
        values = {
            g: part.select(_score(name)).to_series().drop_nulls().to_numpy()
            for g, part in parts.items()
        }
        cis = {
            g: _stats.bootstrap_mean_ci(
                x, confidence=confidence, n_resamples=n_resamples, rng=_rng(seed, name, (g,))
            )
            for g, x in values.items()
        }
        results = [comparison.pair(name, values, cis, a, b) for a, b in pairs]
        adjusted = _stats.holm([r.pvalue for _, r in results])
        for (row, result), p_adj in zip(results, adjusted, strict=True):
            row.p_adjusted = _num(p_adj)
            if p_adj < alpha and result.estimate != 0:
                row.winner = row.group_b if sign * result.estimate > 0 else row.group_a
            rows.append(row)

    schema = ComparisonRow.schema(frame.schema[by])
    return pl.DataFrame([astuple(row) for row in rows], schema=schema, orient="row")


def _signed(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.3f}"


def describe_comparison(comparison: pl.DataFrame, *, confidence: float = 0.95) -> str:
    """One plain-English sentence per row of a ``compare`` result.

    ``confidence`` only labels the interval; pass the value given to ``compare``.

    Examples
    --------
    >>> c = pl.DataFrame({"evaluator": ["rr"], "group_a": ["a"], "group_b": ["b"],
    ...     "n_pairs": [None], "diff": [0.01], "diff_ci_low": [-0.05], "diff_ci_high": [0.07],
    ...     "test": ["welch t"], "p_value": [0.7], "p_adjusted": [0.7], "winner": [None]})
    >>> print(describe_comparison(c))
    rr: no significant difference between a and b (mean difference b - a +0.010, 95% CI -0.050 to +0.070; welch t p = 0.7).
    """
    level = f"{confidence * 100:g}%"
    lines = []
    for row in comparison.iter_rows(named=True):
        a, b, winner = row["group_a"], row["group_b"], row["winner"]
        if row["diff"] is None or row["p_value"] is None:
            lines.append(f"{row['evaluator']}: {a} vs {b}: not enough scored rows to test.")
            continue
        p = f"{row['test']} p = {row['p_value']:.3g}"
        if row["p_adjusted"] is not None and row["p_adjusted"] != row["p_value"]:
            p += f", Holm-adjusted {row['p_adjusted']:.3g}"
        if row.get("n_pairs") is not None:
            p += f", {row['n_pairs']} pairs"
        ci = f"{level} CI {_signed(row['diff_ci_low'])} to {_signed(row['diff_ci_high'])}"
        if winner is None:
            lines.append(
                f"{row['evaluator']}: no significant difference between {a} and {b} "
                f"(mean difference {b} - {a} {_signed(row['diff'])}, {ci}; {p})."
            )
        else:
            # Say it as "winner - loser", flipping the sign of b - a when a won.
            loser, flip = (a, 1.0) if winner == b else (b, -1.0)
            bounds = (row["diff_ci_low"], row["diff_ci_high"])
            low, high = (None, None) if None in bounds else sorted(flip * v for v in bounds)
            lines.append(
                f"{row['evaluator']}: {winner} is better than {loser} "
                f"(mean difference {winner} - {loser} {_signed(flip * row['diff'])}, "
                f"{level} CI {_signed(low)} to {_signed(high)}; {p})."
            )
    return "\n".join(lines)


__all__ = [
    "compare",
    "describe_comparison",
    "evaluator_names",
    "failures",
    "summarize",
]
