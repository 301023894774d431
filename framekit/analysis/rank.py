"""``fk.rank``: groups ranked from head-to-head verdicts, with intervals.

The pairs frame of ``evaluate_pairwise`` says, per key (question) and pair of groups
(strategies), which group the judge preferred. Ranking it answers "which strategy is
best, and is that clear?":

- **Counts and win rate**: wins, ties, losses and ``(wins + ties / 2) / n``, ``n`` the
  pairs the group took part in with a verdict (errors are left out and counted).
- **Bradley-Terry strength** (``_bradley_terry``): ``P(i beats j) = 1 / (1 + exp(s_j -
  s_i))``, a tie counting half a win to each side, strengths centred at mean 0 (or 0 for
  a ``reference`` group). It uses every pair at once, so a group that only met weak
  opponents is not flattered by its win rate.
- **Intervals**: a seeded bootstrap over keys. Keys are resampled with replacement and
  every figure is recomputed on each resample: the pairs of one key share answers, so
  they are resampled together, never one by one. 95 % percentile intervals.
- **A clear order only where the data say so**: ``rank`` is 1 + the number of groups
  clearly stronger, "clearly" meaning the bootstrap interval of the difference of
  strengths excludes 0 after Holm's correction over all pairs of groups. Groups the data
  cannot tell apart share a rank.

With ``human=``, the win rates are also estimated from people's verdicts on some pairs:
prediction-powered inference (PPI++, ``fk.estimate``'s ``ppi_mean``) over the pairs each
group took part in, a pair's value being the group's score in it (1, 0.5, 0), next to the
classical figure from the labelled pairs alone and the judge's own. Those intervals treat
pairs as independent (the normal interval of PPI): pairs of one key share an answer, so
with many groups per key they are somewhat optimistic.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from framekit import _result_columns as contract
from framekit._errors import InputError
from framekit._frames import like_input
from framekit._frames import to_polars as frame_in_of
from framekit.analysis import _bradley_terry as bt
from framekit.analysis._inputs import FrameLike, resolve_columns
from framekit.analysis._pairs import LOSS, TIE, WIN, Pairs, key_columns, read_pairs
from framekit.analysis._stats import _percentile_interval, _sign_pvalue, holm
from framekit.analysis.estimate import MIN_LABELLED, classical_mean, ppi_mean

__all__ = ["METHODS", "rank"]

#: The figures of ``rank(..., human=...)``, in row order per group.
METHODS = ("ppi", "classical", "judge_only")
#: Bootstrap resamples are drawn in slices of at most this many (resample, key) cells.
_CHUNK_CELLS = 4_000_000

FloatArray = NDArray[np.float64]


def rank(
    pairs: FrameLike,
    human: str | None = None,
    *,
    evaluator: str | None = None,
    by: str = "group",
    on: str | Sequence[str] | None = None,
    reference: Any = None,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int | None = 0,
) -> Any:
    """One row per group: wins, ties, losses, win rate and Bradley-Terry strength, with
    intervals, strongest first.

    Parameters
    ----------
    pairs
        A pairs frame (``evaluate_pairwise``'s output; polars, pandas or Arrow): key
        column(s), ``a``, ``b`` and per evaluator ``<name>_winner`` (a's group, b's group
        or ``"tie"``) and ``<name>_error``.
    human
        A column of people's verdicts: a group name or ``"tie"`` on the pairs they judged,
        null elsewhere. Adds the PPI, classical and judge-only win rates (see Returns).
    evaluator
        The evaluator whose verdicts to rank by; default the only one in the frame.
    by
        The name of the group column in the output. The pairs frame does not record the
        group column's name: pass the one of your data (``by="strategy"``).
    on
        The key column(s); default the columns before ``a``, where the pairs frame puts
        them. Keys are what the bootstrap resamples.
    reference
        A group whose strength is fixed at 0 (a baseline: the others' strengths are then
        log-odds of beating it). Default: strengths centred at mean 0.
    confidence
        Interval level (0.95: 95 % intervals).
    n_boot
        Bootstrap resamples of the keys (at least 100).
    seed
        Seeds the bootstrap: the same seed gives the same intervals.

    Returns
    -------
    polars.DataFrame or pandas.DataFrame
        The kind of frame given (pandas in, pandas out). Columns: ``<by>``, ``wins``,
        ``ties``, ``losses``, ``n`` (pairs with a verdict), ``errors`` (pairs left out:
        ``<name>_error`` set or no winner), ``win_rate`` (ties half a win),
        ``win_rate_ci_low``, ``win_rate_ci_high``, ``strength`` (Bradley-Terry, natural
        log scale, a tie half a win to each side, one virtual tie added between every two
        groups that met so a group that won everything stays finite), ``strength_ci_low``,
        ``strength_ci_high`` and ``rank`` (1 + the groups clearly stronger; equal ranks:
        not told apart). A group whose every pair failed has ``n`` 0 and null figures.

        With ``human=``: three rows per group, ``method`` after ``<by>``: ``ppi``
        (PPI++ win rate from the human and judge verdicts; counts, strength and rank
        null), ``classical`` (from the labelled pairs alone: people's counts, their
        normal-interval win rate and a Bradley-Terry fit of their verdicts) and
        ``judge_only`` (the judge's figures, as without ``human=``), plus
        ``n_labelled`` (human verdicts used) and ``lam`` (PPI++'s weight on the judge).
        A group with fewer than 10 labelled pairs gets null ``ppi`` and ``classical``
        win rates, with a warning naming it.

    Raises
    ------
    InputError
        Not a pairs frame, several evaluators and none chosen, a missing column, a null or
        self-facing group, a winner that is neither group of its row nor ``"tie"`` (naming
        the row), groups that never meet (directly or through others), an unknown
        ``reference``, no human verdict at all, or a bad ``confidence`` or ``n_boot``.

    Examples
    --------
    >>> import polars as pl
    >>> pairs = pl.DataFrame({
    ...     "question_id": [1, 2, 3, 4, 5, 6],
    ...     "a": ["bm25"] * 6,
    ...     "b": ["dense"] * 6,
    ...     "preference_winner": ["dense", "dense", "bm25", "dense", "tie", None],
    ...     "preference_error": [None] * 5 + ["timeout"],
    ... })
    >>> ranked = rank(pairs, by="strategy", n_boot=200)
    >>> ranked.select("strategy", "wins", "ties", "losses", "errors", "win_rate").rows()
    [('dense', 3, 1, 1, 1, 0.7), ('bm25', 1, 1, 3, 1, 0.3)]
    """
    frame_in = frame_in_of(pairs)
    frame = frame_in.frame
    name = contract.resolve_pair_evaluator(frame.columns, evaluator)
    contract.check_dtypes(frame.schema, [name], ["error"])
    winner = contract.column(name, "winner")
    if frame.schema[winner] not in (pl.String, pl.Categorical, pl.Null):
        raise InputError(f"column {winner!r} holds {frame.schema[winner]}: expected group names")
    if human is not None:
        resolve_columns(frame, human, "human")
    keys = key_columns(frame, on)
    if by in _HUMAN_SCHEMA:
        raise InputError(f"by={by!r} would clash with the output column of that name")
    alpha = 1.0 - _check_confidence(confidence)
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 100:
        raise InputError(f"n_boot must be a whole number >= 100, got {n_boot!r}")
    data = read_pairs(frame, name, keys, human)
    if data.n_keys == 0:
        raise InputError("the pairs frame has no rows to rank")
    ref = _reference_index(data, reference)
    sources = [data.score_a] if data.human_a is None else [data.score_a, data.human_a]
    per_key = [data.per_key(s) for s in sources]
    resampled = _resample(per_key, n_boot, np.random.default_rng(seed))
    judge = _standing(data, data.score_a, per_key[0], resampled[0], ref, alpha, "judge")
    if data.human_a is None:
        rows = [{by: group, **_plain(judge, g)} for g, group in enumerate(data.groups.to_list())]
        out = _frame(rows, by, data.groups.dtype, _SCHEMA)
    else:
        assert human is not None
        people = _standing(data, data.human_a, per_key[1], resampled[1], ref, alpha, "people")
        out = _with_methods(data, judge, people, confidence, by, human)
    order = _strongest_first(judge["strength"], data.groups)
    if data.human_a is not None:  # three rows a group: the groups' order, methods within
        order = np.repeat(order * len(METHODS), len(METHODS)) + np.tile(
            np.arange(len(METHODS)), len(order)
        )
    return like_input(out[order.tolist()], frame_in)


#: Column -> dtype of the figures per group (after ``<by>``), in output order.
_SCHEMA: dict[str, Any] = {
    "wins": pl.Int64,
    "ties": pl.Int64,
    "losses": pl.Int64,
    "n": pl.Int64,
    "errors": pl.Int64,
    "win_rate": pl.Float64,
    "win_rate_ci_low": pl.Float64,
    "win_rate_ci_high": pl.Float64,
    "strength": pl.Float64,
    "strength_ci_low": pl.Float64,
    "strength_ci_high": pl.Float64,
    "rank": pl.Int64,
}
_HUMAN_SCHEMA: dict[str, Any] = {
    "method": pl.String,
    **{k: _SCHEMA[k] for k in ("wins", "ties", "losses", "n")},
    "n_labelled": pl.Int64,
    **{k: v for k, v in _SCHEMA.items() if k not in ("wins", "ties", "losses", "n")},
    "lam": pl.Float64,
}


def _check_confidence(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence must be between 0 and 1, got {confidence!r}")
    return confidence


def _reference_index(data: Pairs, reference: Any) -> int | None:
    if reference is None:
        return None
    names = [str(g) for g in data.groups.to_list()]
    if str(reference) not in names:
        raise InputError(f"reference {reference!r} is not a group of the pairs; groups: {names}")
    return names.index(str(reference))


def _resample(per_key: list[FloatArray], n_boot: int, rng: np.random.Generator) -> list[FloatArray]:
    """Score matrices of ``n_boot`` resamples of the keys, one array per source, each of
    shape ``(n_boot, k, k)``. A resample draws ``n_keys`` keys with replacement, as a count
    per key (multinomial), and the same counts serve every source."""
    n_keys, k = per_key[0].shape[0], per_key[0].shape[1]
    flat = [p.reshape(n_keys, k * k) for p in per_key]
    out = [np.empty((n_boot, k, k)) for _ in per_key]
    step = max(1, _CHUNK_CELLS // max(n_keys, 1))
    uniform = np.full(n_keys, 1.0 / n_keys)
    for start in range(0, n_boot, step):
        size = min(step, n_boot - start)
        counts = rng.multinomial(n_keys, uniform, size=size).astype(np.float64)
        for target, source in zip(out, flat):
            target[start : start + size] = (counts @ source).reshape(size, k, k)
    return out


def _counts(data: Pairs, score_a: FloatArray) -> dict[str, NDArray[np.int64]]:
    """Wins, ties and losses per group from a's score per row (NaN rows left out)."""
    k = len(data.groups)
    out = {}
    for kind, a_value, b_value in (("wins", WIN, LOSS), ("ties", TIE, TIE), ("losses", LOSS, WIN)):
        out[kind] = np.bincount(data.a[score_a == a_value], minlength=k) + np.bincount(
            data.b[score_a == b_value], minlength=k
        )
    return out


def _standing(
    data: Pairs,
    score_a: FloatArray,
    per_key: FloatArray,
    resampled: FloatArray,
    reference: int | None,
    alpha: float,
    whose: str,
) -> dict[str, Any]:
    """Counts, win rates and strengths with intervals per group, from one source of
    verdicts (the judge's or people's)."""
    k = len(data.groups)
    counts = _counts(data, score_a)
    scores = per_key.sum(0)
    games = scores + scores.T
    n = games.sum(1)
    active = np.flatnonzero(n > 0)
    figures = {name: np.full(k, np.nan) for name in _SCHEMA if name not in counts}
    figures["rank"] = np.full(k, np.nan)
    figures["n"] = n
    involved = np.bincount(data.a, minlength=k) + np.bincount(data.b, minlength=k)
    figures["errors"] = involved - n if whose == "judge" else np.full(k, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        figures["win_rate"] = scores.sum(1) / n
        boot_rates = resampled.sum(2) / (resampled + np.swapaxes(resampled, 1, 2)).sum(2)
    for g in active:
        rates = boot_rates[:, g]
        low, high = _percentile_interval(rates[np.isfinite(rates)], alpha)
        figures["win_rate_ci_low"][g], figures["win_rate_ci_high"][g] = low, high
    strengths = _strengths(data, scores, resampled, active, reference, alpha, whose)
    if strengths is not None:
        for column, values in zip(
            ("strength", "strength_ci_low", "strength_ci_high", "rank"), strengths
        ):
            figures[column][active] = values
    return {**counts, **figures}


def _strengths(
    data: Pairs,
    scores: FloatArray,
    resampled: FloatArray,
    active: NDArray[np.int64],
    reference: int | None,
    alpha: float,
    whose: str,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray] | None:
    """Bradley-Terry strengths of the groups with verdicts, their intervals and ranks;
    ``None`` (with a warning) when people's verdicts leave the groups unconnected."""
    if len(active) < 2:
        return None
    sub = np.ix_(active, active)
    met = (scores + scores.T)[sub] > 0
    components = bt.connected(met)
    if len(components) > 1:
        names = [[str(data.groups[int(active[i])]) for i in c] for c in components]
        message = (
            f"the groups fall into parts that never meet, directly or through others: "
            f"{names}; strengths across parts cannot be compared"
        )
        if whose == "judge":
            raise InputError(message)
        warnings.warn(f"people's verdicts: {message}; their strengths are null", stacklevel=4)
        return None
    ref = None
    if reference is not None:
        if reference not in active:
            raise InputError(f"reference {data.groups[reference]!r} has no pair with a verdict")
        ref = int(np.flatnonzero(active == reference)[0])
    point = bt.fit(bt.with_prior(scores[sub], met), ref)
    boot = bt.fit(bt.with_prior(resampled[:, sub[0], sub[1]], met), ref)
    intervals = [_percentile_interval(boot[:, i], alpha) for i in range(len(active))]
    low, high = (np.array(side) for side in zip(*intervals))
    return point, low, high, _clear_ranks(point, boot, alpha)


def _clear_ranks(point: FloatArray, boot: FloatArray, alpha: float) -> FloatArray:
    """1 + the number of groups clearly stronger: the bootstrap interval of the difference
    excludes 0 at level ``alpha`` after Holm's correction over every pair of groups."""
    k = len(point)
    pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]
    pvalues = holm([_sign_pvalue(boot[:, i] - boot[:, j]) for i, j in pairs])
    above = np.zeros((k, k), dtype=bool)
    for (i, j), p in zip(pairs, pvalues):
        if p < alpha:
            stronger, weaker = (i, j) if point[i] > point[j] else (j, i)
            above[stronger, weaker] = True
    return 1.0 + above.sum(0)


def _with_methods(
    data: Pairs,
    judge: dict[str, Any],
    people: dict[str, Any],
    confidence: float,
    by: str,
    human: str,
) -> pl.DataFrame:
    """Three rows per group: the PPI, classical and judge-only figures."""
    assert data.human_a is not None
    if np.isnan(data.human_a).all():
        raise InputError(f"no row of {human!r} holds a verdict: label some pairs first")
    rows: list[dict[str, Any]] = []
    for g, group in enumerate(data.groups.to_list()):
        y, f = _values_for(data, g, data.human_a), _values_for(data, g, data.score_a)
        labelled = ~np.isnan(y)
        paired = labelled & ~np.isnan(f)
        unlabelled = ~labelled & ~np.isnan(f)
        ppi: dict[str, Any] = {"n": int(paired.sum() + unlabelled.sum())}
        classical: dict[str, Any] = {**_plain(people, g), "errors": None}
        if paired.sum() < MIN_LABELLED:
            warnings.warn(
                f"group {group!r}: only {int(paired.sum())} pair(s) carry both a human and a "
                f"judge verdict; an interval needs at least {MIN_LABELLED}, so its ppi and "
                "classical win rates are null",
                stacklevel=3,
            )
            for name in ("win_rate", "win_rate_ci_low", "win_rate_ci_high"):
                classical[name] = None
        else:
            point, low, high, lam = ppi_mean(y[paired], f[paired], f[unlabelled], confidence)
            ppi.update(win_rate=point, win_rate_ci_low=low, win_rate_ci_high=high, lam=lam)
            point, low, high = classical_mean(y[labelled], confidence)
            classical.update(win_rate=point, win_rate_ci_low=low, win_rate_ci_high=high)
        ppi.update(n_labelled=int(paired.sum()), errors=_item(judge["errors"][g]))
        classical["n_labelled"] = int(labelled.sum())
        own = {**_plain(judge, g), "n_labelled": 0}
        for method, figures in zip(METHODS, (ppi, classical, own)):
            rows.append({by: group, "method": method, **figures})
    return _frame(rows, by, data.groups.dtype, _HUMAN_SCHEMA)


def _values_for(data: Pairs, group: int, score_a: FloatArray) -> FloatArray:
    """The group's score (1, 0.5, 0; NaN: none) in every pair it took part in."""
    mine = (data.a == group) | (data.b == group)
    return np.where(data.a == group, score_a, 1.0 - score_a)[mine]


def _item(value: Any) -> float | None:
    """A numpy figure as a plain number, NaN as None."""
    number = float(value)
    return None if np.isnan(number) else number


def _plain(figures: dict[str, Any], group: int) -> dict[str, float | None]:
    """One group's figures as plain numbers (None where there is none)."""
    return {name: _item(values[group]) for name, values in figures.items()}


def _frame(
    rows: list[dict[str, Any]], by: str, group_dtype: Any, schema: dict[str, Any]
) -> pl.DataFrame:
    """The rows as a frame: numbers built as Float64, then each column cast to its dtype
    (whole counts to Int64), in the schema's order."""
    columns = {by: group_dtype, **{k: pl.Float64 for k in schema if schema[k] != pl.String}}
    text = [k for k in schema if schema[k] == pl.String]
    built = pl.DataFrame(rows, schema={**columns, **{k: pl.String for k in text}}, orient="row")
    return built.select(by, *[pl.col(k).cast(schema[k]) for k in schema])


def _strongest_first(strength: FloatArray, groups: pl.Series) -> NDArray[np.int64]:
    """Row order: strongest first, groups without a strength last, ties by name."""
    names = [str(g) for g in groups.to_list()]
    missing = np.isnan(strength)
    return np.array(
        sorted(
            range(len(names)), key=lambda i: (missing[i], -np.nan_to_num(strength[i]), names[i])
        ),
        dtype=np.int64,
    )
