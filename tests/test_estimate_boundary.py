"""fk.estimate at the edges (issue 39): infinite human values, and intervals at 0 and 1."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest

import framekit as fk

Z95 = 1.959963984540054


def wilson_interval(mean: float, n: int) -> tuple[float, float]:
    """The p a score test would not reject: roots of (mean - p)^2 = z^2 p (1 - p) / n."""
    k = Z95**2 / n
    roots = np.roots([1.0 + k, -(2.0 * mean + k), mean**2]).real
    return float(max(0.0, roots.min())), float(min(1.0, roots.max()))


def _frame(human: list, judge: list[float], passed: list[bool] | None = None) -> pl.DataFrame:
    labels = {0.0: "Not At All", 0.5: "Neutral/Mixed", 1.0: "Completely Yes"}
    return pl.DataFrame(
        {
            "human": human,
            "c_score": judge,
            "c_label": [labels.get(v, "Generally Yes") for v in judge],
            "c_passed": passed if passed is not None else [v >= 0.5 for v in judge],
            "c_error": pl.Series([None] * len(judge), dtype=pl.String),
        }
    )


def _rows(out: pl.DataFrame) -> dict[str, dict]:
    return {r["method"]: r for r in out.iter_rows(named=True)}


@pytest.mark.parametrize("bad", [float("inf"), float("-inf")])
def test_an_infinite_human_value_names_the_column_and_the_rows(bad):
    human = [0.5] * 20
    human[3], human[11] = bad, bad
    frame = _frame(human + [None] * 10, [0.5] * 30)
    with pytest.raises(fk.InputError) as raised:
        fk.estimate(frame, human="human", evaluator="c", statistic="mean")
    message = str(raised.value)
    assert "'human'" in message and "rows 3, 11" in message and "infinite" in message
    assert "\n" not in message


def test_fifty_identical_labels_give_wilsons_interval_not_a_point():
    # 50 people all said "Completely Yes"; the judge varies on the unlabelled rows.
    rng = np.random.default_rng(3)
    judge = [1.0] * 50 + list(rng.choice([0.0, 0.5, 1.0], 200))
    frame = _frame(["Completely Yes"] * 50 + [None] * 200, judge)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy warning, no degenerate-interval warning
        out = _rows(fk.estimate(frame, human="human", evaluator="c", statistic="mean"))
    low, high = wilson_interval(1.0, 50)
    assert (round(low, 4), high) == (0.9287, 1.0)
    for method in ("ppi", "classical"):
        row = out[method]
        assert row["estimate"] == 1.0
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high))  # was [1.0, 1.0]
    rate = _rows(fk.estimate(frame, human="human", evaluator="c"))
    assert rate["classical"]["ci_low"] < 1.0 == rate["classical"]["ci_high"]


def test_a_judge_that_never_varies_gets_a_wilson_interval_too():
    frame = _frame([1.0, 0.0] * 10 + [None] * 30, [1.0] * 50)
    out = _rows(fk.estimate(frame, human="human", evaluator="c", statistic="mean"))
    assert out["judge_only"]["ci_low"] == pytest.approx(wilson_interval(1.0, 50)[0])
    assert out["judge_only"]["ci_high"] == 1.0


def test_intervals_of_values_in_zero_one_are_clipped_to_it():
    # 49 of 50 pass: the normal interval reaches 1.019.
    frame = _frame([1.0] * 49 + [0.0] + [None] * 20, [1.0] * 49 + [0.0] + [1.0] * 20)
    classical = _rows(fk.estimate(frame, human="human", evaluator="c"))["classical"]
    assert classical["estimate"] == pytest.approx(0.98)
    assert classical["ci_high"] == 1.0 and classical["ci_low"] == pytest.approx(
        0.98 - Z95 * np.sqrt(0.98 * 0.02 / 50), abs=1e-6
    )


def test_other_numbers_with_no_spread_keep_a_point_and_say_so():
    frame = _frame([4.0] * 20 + [None] * 10, [0.5] * 30)
    with pytest.warns(UserWarning, match="all 4: with no spread"):
        out = _rows(fk.estimate(frame, human="human", evaluator="c", statistic="mean"))
    assert out["classical"]["ci_low"] == out["classical"]["ci_high"] == 4.0
