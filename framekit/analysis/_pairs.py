"""A pairs frame (from ``evaluate_pairwise``) read as arrays: who met whom, under which
key, and who won.

One row of the pairs frame is one key (question) and two groups ``a`` and ``b``; the
evaluator's ``<name>_winner`` names a's group, b's group, or ``"tie"``. The ranking, the
report's head-to-head section and the win matrix all read it through :func:`read_pairs`,
so they count errors and ties the same way.

A row counts as an error, left out of every figure and counted, when its
``<name>_error`` is set or it has no winner.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl
from numpy.typing import NDArray

from framekit import _result_columns as contract
from framekit._errors import InputError
from framekit.analysis._inputs import resolve_columns

#: a's score in a pair: a win, a tie (half a win to each side), a loss.
WIN, TIE, LOSS = 1.0, 0.5, 0.0
#: The verdicts that name a position: the candidate shown first, the one shown second.
POSITIONS = ("A", "B")


@dataclass(frozen=True)
class Pairs:
    """The rows of a pairs frame as arrays (one entry per row).

    ``score_a`` is a's score (1, 0.5, 0) by the judge, NaN where the row is an error;
    ``human_a`` the same by people, NaN where nobody gave a verdict (only with ``human=``).
    """

    groups: pl.Series  # the distinct groups, sorted, in the dtype of a and b
    key: NDArray[np.int64]  # the row's key, 0 .. n_keys - 1
    n_keys: int
    a: NDArray[np.int64]  # index into groups
    b: NDArray[np.int64]
    score_a: NDArray[np.float64]
    human_a: NDArray[np.float64] | None

    @property
    def error(self) -> NDArray[np.bool_]:
        return np.isnan(self.score_a)

    def per_key(self, score_a: NDArray[np.float64]) -> NDArray[np.float64]:
        """Score matrices per key, shape ``(n_keys, k, k)``: ``[key, i, j]`` is i's score
        against j over that key's rows; NaN scores (errors, unlabelled rows) add nothing."""
        k = len(self.groups)
        out = np.zeros((self.n_keys, k, k))
        ok = ~np.isnan(score_a)
        np.add.at(out, (self.key[ok], self.a[ok], self.b[ok]), score_a[ok])
        np.add.at(out, (self.key[ok], self.b[ok], self.a[ok]), 1.0 - score_a[ok])
        return out


def key_columns(frame: pl.DataFrame, on: str | Sequence[str] | None) -> list[str]:
    """The key column(s): ``on``, else the columns before ``a`` (the pairs frame puts its
    ``<on>`` columns first)."""
    if on is not None:
        return resolve_columns(frame, on, "on")
    keys = frame.columns[: frame.columns.index(contract.PAIR_A)]
    if not keys:
        raise InputError("the pairs frame has no key column before 'a': name it with on=")
    return keys


def read_pairs(
    frame: pl.DataFrame, evaluator: str, keys: list[str], human: str | None = None
) -> Pairs:
    """The pairs frame's rows as :class:`Pairs`, checked row by row.

    Raises :class:`InputError` naming the row for a missing group, a group facing itself,
    or a winner (judge's or human) that is neither of the row's groups nor ``"tie"``.
    """
    a_col, b_col = contract.PAIR_A, contract.PAIR_B
    resolve_columns(frame, [a_col, b_col], "pair")
    for side in (a_col, b_col):
        missing = frame[side].is_null()
        if missing.any():
            raise InputError(f"row {int(missing.arg_max() or 0)}: column {side!r} is null")
    same = frame[a_col].cast(pl.String) == frame[b_col].cast(pl.String)
    if same.any():
        row = int(same.arg_max() or 0)
        raise InputError(f"row {row}: group {frame[a_col][row]!r} faces itself (a == b)")
    groups = pl.concat([frame[a_col], frame[b_col].cast(frame[a_col].dtype)]).unique().sort()
    index = {str(g): i for i, g in enumerate(groups.to_list())}
    a = np.array([index[str(g)] for g in frame[a_col].to_list()], dtype=np.int64)
    b = np.array([index[str(g)] for g in frame[b_col].to_list()], dtype=np.int64)
    winner = contract.column(evaluator, "winner")
    error = frame[contract.column(evaluator, "error")].is_not_null()
    score_a = _scores(frame, winner, error.to_numpy())
    human_a = None
    if human is not None:
        dtype = frame.schema[human]
        if dtype not in (pl.String, pl.Categorical, pl.Null):
            raise InputError(
                f"human column {human!r} holds {dtype}: give a group name or 'tie' per "
                "labelled pair (null elsewhere)"
            )
        human_a = _scores(frame, human, np.zeros(frame.height, dtype=bool))
    key_ids = (
        frame.select(keys)
        .with_row_index("_row")
        .join(
            frame.select(keys).unique(maintain_order=True).with_row_index("_key"),
            on=keys,
            how="left",
            nulls_equal=True,
        )
        .sort("_row")["_key"]
        .to_numpy()
        .astype(np.int64)
    )
    return Pairs(
        groups=groups,
        key=key_ids,
        n_keys=int(key_ids.max()) + 1 if len(key_ids) else 0,
        a=a,
        b=b,
        score_a=score_a,
        human_a=human_a,
    )


def position_bias(pairs: pl.DataFrame, evaluator: str) -> tuple[float | None, int, int]:
    """``(share, same, judged)``: of the pairs with a verdict in both orders (``judged``),
    those in which the judge chose the same position, first or second, both times
    (``same``): a judge that looks only at the content never does when it sees a
    difference, one that looks only at the position always does.

    Examples
    --------
    >>> frame = pl.DataFrame({"p_ab": ["A", "A", "B", "tie", None],
    ...                       "p_ba": ["A", "B", "B", "A", "A"]})
    >>> position_bias(frame, "p")
    (0.5, 2, 4)
    """
    ab = pl.col(contract.column(evaluator, "ab"))
    ba = pl.col(contract.column(evaluator, "ba"))
    counted = pairs.select(
        judged=(ab.is_not_null() & ba.is_not_null()).sum(),
        same=((ab == ba) & ab.is_in(list(POSITIONS))).fill_null(False).sum(),
    ).row(0)
    judged, same = int(counted[0]), int(counted[1])
    return (same / judged if judged else None), same, judged


def _scores(frame: pl.DataFrame, column: str, error: NDArray[np.bool_]) -> NDArray[np.float64]:
    """a's score per row from a column of winners: 1 (a), 0 (b), 0.5 (tie), NaN where the
    row is an error or holds no winner; another value is an error naming the row."""
    verdict = frame[column].cast(pl.String)
    a_name = frame[contract.PAIR_A].cast(pl.String)
    b_name = frame[contract.PAIR_B].cast(pl.String)
    known = (verdict == a_name) | (verdict == b_name) | (verdict == contract.TIE)
    bad = verdict.is_not_null() & ~known.fill_null(False) & ~pl.Series(error)
    if bad.any():
        row = int(bad.arg_max() or 0)
        raise InputError(
            f"row {row}: {column} = {verdict[row]!r} is neither of the pair's groups "
            f"({a_name[row]!r}, {b_name[row]!r}) nor {contract.TIE!r}"
        )
    score = np.where(
        (verdict == a_name).fill_null(False).to_numpy(),
        WIN,
        np.where((verdict == b_name).fill_null(False).to_numpy(), LOSS, TIE),
    )
    empty: Any = verdict.is_null().to_numpy() | error
    return np.where(empty, np.nan, score).astype(np.float64)


__all__ = ["LOSS", "POSITIONS", "TIE", "WIN", "Pairs", "key_columns", "position_bias", "read_pairs"]
