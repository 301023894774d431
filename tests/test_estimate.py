"""fk.estimate: PPI++ against ppi-python's own numbers, coverage over seeded trials, inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

import framekit as fk
from framekit import InputError
from framekit.analysis.estimate import MIN_LABELLED, classical_mean, ppi_mean
from framekit.evaluators import ResponseRelevance

FIVE = dict(ResponseRelevance().choices)


def binary(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A judge that passes too much: 10 % of true passes and 25 % of true fails flipped."""
    rng = np.random.default_rng(seed)
    n, big_n = 200, 2000
    truth = rng.random(n + big_n) < 0.6
    flip = rng.random(n + big_n) < np.where(truth, 0.10, 0.25)
    judge = np.where(flip, ~truth, truth).astype(float)
    return truth[:n].astype(float), judge[:n], judge[n:]


def graded(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Five-level scores; the judge is a quarter point generous and off by one level at random."""
    rng = np.random.default_rng(seed)
    n, big_n = 150, 3000
    levels = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
    truth = levels[rng.integers(0, 5, n + big_n)]
    judge = np.clip(truth + levels[1] * rng.integers(-1, 2, n + big_n) + 0.25, 0, 1)
    return truth[:n], judge[:n], judge[n:]


# Computed once with ppi-python 0.2.3 (ppi_mean_pointestimate and ppi_mean_ci with
# lam=None, alpha=0.05; classical_mean_ci with alpha=0.05) on the inputs above.
PPI_PYTHON = {
    ("binary", 11): {
        "ppi": (0.5884314484095035, 0.5382613327423167, 0.6386015640766902),
        "classical": (0.5424025498467904, 0.6775974501532096),
    },
    ("graded", 12): {
        "ppi": (0.5271423206035113, 0.4963369899776154, 0.5579476512294073),
        "classical": (0.5177178380644587, 0.6322821619355412),
    },
}


@pytest.mark.parametrize(("kind", "seed"), list(PPI_PYTHON))
def test_ppi_and_classical_intervals_equal_ppi_python(kind, seed):
    y, f, u = (binary if kind == "binary" else graded)(seed)
    reference = PPI_PYTHON[(kind, seed)]
    point, low, high, lam = ppi_mean(y, f, u)
    assert (float(point), float(low), float(high)) == pytest.approx(reference["ppi"], abs=1e-9)
    assert 0.0 < float(lam) < 1.0
    _, c_low, c_high = classical_mean(y)
    assert (float(c_low), float(c_high)) == pytest.approx(reference["classical"], abs=1e-9)


def scored_frame(y: np.ndarray, f: np.ndarray, u: np.ndarray) -> pl.DataFrame:
    """A scored frame of a pass/fail evaluator: human labels on the first len(y) rows."""
    judge = np.concatenate([f, u])
    human = [bool(v) for v in y] + [None] * len(u)
    return pl.DataFrame(
        {
            "human": pl.Series(human, dtype=pl.Boolean),
            "rel_score": judge,
            "rel_label": np.where(judge == 1.0, "relevant", "irrelevant"),
            "rel_passed": judge == 1.0,
            "rel_error": pl.Series([None] * len(judge), dtype=pl.String),
        }
    )


def test_estimate_on_a_frame_gives_ppi_classical_and_judge_only_rows():
    y, f, u = binary(11)
    out = fk.estimate(scored_frame(y, f, u), human="human", evaluator="rel")
    assert out.columns == [
        "evaluator",
        "method",
        "estimate",
        "ci_low",
        "ci_high",
        "n_labelled",
        "n_total",
        "lam",
    ]
    rows = {r["method"]: r for r in out.iter_rows(named=True)}
    reference = PPI_PYTHON[("binary", 11)]
    assert (
        rows["ppi"]["estimate"],
        rows["ppi"]["ci_low"],
        rows["ppi"]["ci_high"],
    ) == pytest.approx(reference["ppi"])
    assert (rows["classical"]["ci_low"], rows["classical"]["ci_high"]) == pytest.approx(
        reference["classical"]
    )
    assert rows["judge_only"]["estimate"] == pytest.approx(np.concatenate([f, u]).mean())
    assert (rows["ppi"]["n_labelled"], rows["ppi"]["n_total"]) == (200, 2200)
    assert (rows["classical"]["n_labelled"], rows["judge_only"]["n_total"]) == (200, 2200)


def test_human_labels_are_read_on_the_rubric_for_a_mean_and_a_pass_rate():
    y, f, u = graded(12)
    names = {v: k for k, v in FIVE.items()}
    judge = np.concatenate([f, u])
    frame = pl.DataFrame(
        {
            "human": [names[v].upper() for v in y] + [None] * len(u),  # case does not matter
            "c_score": judge,
            "c_label": [names[v] for v in judge],
            "c_passed": judge >= 0.5,
            "c_error": pl.Series([None] * len(judge), dtype=pl.String),
        }
    )
    mean = fk.estimate(frame, human="human", evaluator="c", statistic="mean")
    ppi = mean.filter(pl.col("method") == "ppi").row(0, named=True)
    assert (ppi["estimate"], ppi["ci_low"], ppi["ci_high"]) == pytest.approx(
        PPI_PYTHON[("graded", 12)]["ppi"]
    )
    rate = fk.estimate(frame, human="human", evaluator="c", statistic="pass_rate")
    classical = rate.filter(pl.col("method") == "classical").row(0, named=True)
    # The judge's pass mark (0.5, read off the frame) applied to the human labels' scores.
    assert classical["estimate"] == pytest.approx((y >= 0.5).mean())


def test_pass_rate_from_zero_one_numbers_and_a_pandas_frame():
    y, f, u = binary(11)
    frame = scored_frame(y, f, u).with_columns(pl.col("human").cast(pl.Int64)).to_pandas()
    out = fk.estimate(frame, human="human", evaluator="rel")
    ppi = out.filter(pl.col("method") == "ppi").row(0, named=True)
    assert ppi["estimate"] == pytest.approx(PPI_PYTHON[("binary", 11)]["ppi"][0])
    assert isinstance(frame, pd.DataFrame)


def test_by_group_estimates_each_group_and_a_small_group_warns_with_nulls():
    y, f, u = binary(11)
    frame = scored_frame(y, f, u).with_columns(
        group=pl.Series(
            ["a"] * 100 + ["b"] * 95 + ["c"] * 5 + ["a"] * 1000 + ["b"] * 1000, dtype=pl.String
        )
    )
    with pytest.warns(UserWarning, match="group 'c'"):
        out = fk.estimate(frame, human="human", evaluator="rel", by="group")
    assert out.columns[:3] == ["evaluator", "group", "method"]
    assert out.height == 9
    a = out.filter((pl.col("group") == "a") & (pl.col("method") == "ppi")).row(0, named=True)
    point, low, high, _ = ppi_mean(y[:100], f[:100], u[:1000])
    assert (a["estimate"], a["ci_low"], a["ci_high"]) == pytest.approx((point, low, high))
    c = out.filter(pl.col("group") == "c")
    assert c.filter(pl.col("method") != "judge_only")["estimate"].null_count() == 2
    assert c.filter(pl.col("method") == "ppi")["n_labelled"].item() == 5


def test_rows_whose_evaluation_failed_carry_no_judge_value():
    y, f, u = binary(11)
    frame = scored_frame(y, f, u).with_columns(
        rel_error=pl.when(pl.int_range(pl.len()) % 10 == 0).then(pl.lit("timeout")),
        rel_score=pl.when(pl.int_range(pl.len()) % 10 == 0)
        .then(None)
        .otherwise(pl.col("rel_score")),
    )
    rows = {r["method"]: r for r in fk.estimate(frame, "human", "rel").iter_rows(named=True)}
    assert rows["ppi"]["n_labelled"] == 180 and rows["ppi"]["n_total"] == 1980
    assert rows["classical"]["n_labelled"] == 200  # the human values stand on their own
    assert rows["judge_only"]["n_total"] == 1980


def test_inputs_that_cannot_be_estimated_name_what_is_wrong():
    y, f, u = binary(11)
    frame = scored_frame(y, f, u)
    with pytest.raises(InputError, match="no row of 'human'"):
        fk.estimate(frame.with_columns(human=pl.lit(None, pl.Boolean)), "human", "rel")
    few = frame.with_columns(
        human=pl.when(pl.int_range(pl.len()) < MIN_LABELLED - 1).then(pl.col("human"))
    )
    with pytest.raises(InputError, match=f"at least {MIN_LABELLED}"):
        fk.estimate(few, "human", "rel")
    labels = frame.with_columns(
        human=pl.when(pl.col("human")).then(pl.lit("relevant")).otherwise(pl.lit("irrelevant"))
    )
    labels = labels.with_columns(
        human=pl.when(pl.int_range(pl.len()) == 7).then(pl.lit("maybe")).otherwise(pl.col("human"))
    )
    with pytest.raises(InputError, match=r"row 7: human = 'maybe' is not a label of rel"):
        fk.estimate(labels, "human", "rel")
    numbers = frame.with_columns(human=pl.col("human").cast(pl.Float64) * 2)
    with pytest.raises(InputError, match=r"row 0: human = 2.0; a pass rate needs 0/1"):
        fk.estimate(numbers, "human", "rel")
    with pytest.raises(InputError, match="use statistic='pass_rate'"):
        fk.estimate(frame, "human", "rel", statistic="mean")
    with pytest.raises(InputError, match="statistic 'median'"):
        fk.estimate(frame, "human", "rel", statistic="median")
    with pytest.raises(InputError, match="'nobody' is not in the frame"):
        fk.estimate(frame, "nobody", "rel")
    with pytest.raises(InputError, match="no results for evaluator"):
        fk.estimate(frame, "human", "coherence")


def test_500_trials_cover_the_truth_and_are_narrower_than_the_labels_alone():
    """A judge with a known bias (it passes 20 % of true fails, misses 5 % of true passes):
    500 seeded trials of 200 labelled and 10,000 unlabelled rows, all at once."""
    rng = np.random.default_rng(2024)
    trials, n, big_n, rate = 500, 200, 10_000, 0.7
    truth = rng.random((trials, n + big_n)) < rate
    flip = rng.random((trials, n + big_n)) < np.where(truth, 0.05, 0.20)
    judge = np.where(flip, ~truth, truth).astype(np.float64)
    y = truth[:, :n].astype(np.float64)
    point, low, high, lam = ppi_mean(y, judge[:, :n], judge[:, n:])
    _, c_low, c_high = classical_mean(y)
    coverage = float(((low <= rate) & (rate <= high)).mean())
    ratio = float(np.median((high - low) / (c_high - c_low)))
    judge_rate = float(judge[:, n:].mean())
    assert coverage >= 0.93, coverage
    assert ratio < 0.8, ratio  # measured: 0.652, coverage 0.942 (classical 0.946)
    assert judge_rate == pytest.approx(0.7 * 0.95 + 0.3 * 0.2, abs=0.005)  # the bias PPI removes
    assert abs(float(point.mean()) - rate) < 0.003
    assert 0.5 < float(np.median(lam)) < 1.0
