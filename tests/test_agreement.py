"""fk.agreement: figures equal hand-computed values; intervals cover at the stated rate."""

from __future__ import annotations

import importlib.util
import math

import numpy as np
import polars as pl
import pytest

import framekit as fk
from framekit.analysis import _measures as m
from framekit.evaluators import Coherence

FIVE = ["Not At All", "Not Generally", "Neutral/Mixed", "Generally Yes", "Completely Yes"]
SCORE = dict(zip(FIVE, [0.0, 0.25, 0.5, 0.75, 1.0]))


def rubric_frame(
    human: list[str], judge: list[str | None], name: str = "coherence"
) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "human": human,
            f"{name}_score": [None if j is None else SCORE[j] for j in judge],
            f"{name}_label": judge,
            f"{name}_error": [("judge refused" if j is None else None) for j in judge],
        },
        schema_overrides={f"{name}_error": pl.String, f"{name}_score": pl.Float64},
    )


def test_binary_kappa_matches_the_hand_computation():
    # Confusion (rows human, columns judge): [[20, 5], [10, 15]], n = 50.
    # p_o = 35/50 = 0.7; p_e = (25*30 + 25*20) / 50**2 = 0.5; kappa = (0.7-0.5)/0.5 = 0.4.
    human = ["irrelevant"] * 25 + ["relevant"] * 25
    judge = ["irrelevant"] * 20 + ["relevant"] * 5 + ["irrelevant"] * 10 + ["relevant"] * 15
    df = pl.DataFrame(
        {
            "human": human,
            "retrieval_relevance_score": [1.0 if j == "relevant" else 0.0 for j in judge],
            "retrieval_relevance_label": judge,
            "retrieval_relevance_error": [None] * 50,
        },
        schema_overrides={"retrieval_relevance_error": pl.String},
    )
    row = fk.agreement(df, human="human", n_resamples=300).row(0, named=True)
    assert row["kind"] == "labels" and row["n"] == 50
    assert row["confusion"] == [[20, 5], [10, 15]]
    assert row["accuracy"] == pytest.approx(0.7)
    assert row["kappa"] == pytest.approx(0.4)
    # Precision of "relevant" = 15/20, recall = 15/25.
    relevant = row["per_label"][1]
    assert relevant["label"] == "relevant"
    assert relevant["precision"] == pytest.approx(0.75)
    assert relevant["recall"] == pytest.approx(0.6)
    assert row["kappa_ci_low"] < 0.4 < row["kappa_ci_high"]


def test_quadratic_weighted_kappa_on_five_levels_matches_the_hand_computation():
    # Three levels used of five: human/judge pairs giving the confusion on levels 0..2
    # [[2, 1, 0], [0, 2, 1], [0, 0, 2]] inside a 5x5 table (levels 3, 4 unused).
    pairs = [(0, 0)] * 2 + [(0, 1)] + [(1, 1)] * 2 + [(1, 2)] + [(2, 2)] * 2
    human = [FIVE[h] for h, _ in pairs]
    judge: list[str | None] = [FIVE[j] for _, j in pairs]
    # Add both unused labels to the rubric through the judge column, on an extra row
    # pair that agrees exactly (levels 3 and 4), then compute by hand on 5 levels.
    human += [FIVE[3], FIVE[4]]
    judge += [FIVE[3], FIVE[4]]
    row = fk.agreement(rubric_frame(human, judge), human="human", n_resamples=200).row(
        0, named=True
    )
    # Hand computation, weights (i-j)^2/16, n = 10.
    # rows (human) 3,3,2,1,1; cols (judge) 2,3,3,1,1.
    # observed disagreement: two cells off by one -> 2 * 1/16 = 0.125
    r = [3, 3, 2, 1, 1]
    c = [2, 3, 3, 1, 1]
    expected = sum(r[i] * c[j] / 10 * (i - j) ** 2 / 16 for i in range(5) for j in range(5))
    # By hand: sum r_i c_j (i-j)^2 = 120 + 54 + 32 + 34 + 72 = 312 (rows i = 0..4), / 10 / 16.
    assert expected == pytest.approx(1.95)
    assert row["weighted_kappa"] == pytest.approx(1 - 0.125 / 1.95)
    # Unweighted: p_o = 8/10; p_e = (6 + 9 + 6 + 1 + 1) / 100 = 0.23.
    assert row["kappa"] == pytest.approx((0.8 - 0.23) / (1 - 0.23))
    assert row["accuracy"] == pytest.approx(0.8)
    assert row["labels"] == FIVE


def test_spearman_kendall_pearson_match_the_hand_computation():
    # Human 1-5 ratings vs judge scores. Ranks: x = 1..5, y = 1, 3, 2, 4, 5.
    # Spearman = 1 - 6 * sum d^2 / (n(n^2-1)) = 1 - 6*2/120 = 0.9
    # Kendall: 9 concordant, 1 discordant of 10 pairs -> 0.8
    df = pl.DataFrame(
        {
            "rating": [1, 2, 3, 4, 5],
            "coherence_score": [0.1, 0.5, 0.3, 0.7, 0.9],
            "coherence_error": [None] * 5,
        },
        schema_overrides={"coherence_error": pl.String},
    )
    row = fk.agreement(df, human="rating", n_resamples=200).row(0, named=True)
    assert row["kind"] == "numbers"
    assert row["spearman"] == pytest.approx(0.9)
    assert row["kendall"] == pytest.approx(0.8)
    # Pearson: x centred -2..2, y centred -0.4, 0, -0.2, 0.2, 0.4 ->
    # sum xy = 0.8+0+(-0)+0.2+0.8 = 1.8; sqrt(10 * 0.4) = 2 -> 0.9
    assert row["pearson"] == pytest.approx(0.9)
    assert row["accuracy"] is None and row["confusion"] is None


def test_rows_with_an_error_are_left_out_and_counted():
    df = rubric_frame(
        ["Completely Yes", "Not At All", "Completely Yes"], ["Completely Yes", "Not At All", None]
    )
    row = fk.agreement(df, human="human", n_resamples=50).row(0, named=True)
    assert row["n"] == 2 and row["n_errors"] == 1 and row["accuracy"] == 1.0


def test_a_nan_human_rating_is_not_labelled_and_is_counted_apart():
    # The five rows of the hand computation above, plus two unlabelled rows: NaN and null.
    df = pl.DataFrame(
        {
            "rating": [1.0, 2.0, 3.0, 4.0, 5.0, float("nan"), None],
            "coherence_score": [0.1, 0.5, 0.3, 0.7, 0.9, 0.2, 0.4],
            "coherence_error": [None] * 7,
        },
        schema_overrides={"coherence_error": pl.String},
    )
    row = fk.agreement(df, human="rating", n_resamples=200).row(0, named=True)
    assert (row["n"], row["n_unlabelled"], row["n_errors"]) == (5, 2, 0)
    assert row["spearman"] == pytest.approx(0.9) and row["pearson"] == pytest.approx(0.9)
    both = fk.agreement(
        df.with_columns(judge=pl.col("coherence_score")), between=("rating", "judge"),
        n_resamples=100,
    ).row(0, named=True)  # fmt: skip
    assert both["n"] == 5 and both["spearman"] == pytest.approx(0.9)


def test_an_evaluator_that_failed_on_every_row_says_so():
    df = rubric_frame(["Completely Yes", "Not At All"], [None, None])
    with pytest.raises(fk.InputError, match="all 2 evaluations of coherence failed") as caught:
        fk.agreement(df, human="human")
    assert "judge refused" in str(caught.value) and "not a label" not in str(caught.value)


def test_between_two_judges_compares_their_score_columns():
    a = [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    b = [0.0, 0.5, 0.5, 0.75, 1.0, 0.75]
    df = pl.DataFrame({"a_score": a, "b_score": b})
    row = fk.agreement(df, between=("a_score", "b_score"), n_resamples=100).row(0, named=True)
    assert row["evaluator"] == "a_score vs b_score"
    assert row["accuracy"] == pytest.approx(4 / 6)
    assert row["spearman"] is not None and row["spearman"] > 0.8


def test_by_gives_one_row_per_group():
    df = rubric_frame(
        ["Completely Yes", "Not At All"] * 4,
        ["Completely Yes", "Not At All"] * 3 + ["Not At All", "Completely Yes"],
    )
    df = df.with_columns(group=pl.Series(["x"] * 4 + ["y"] * 4))
    out = fk.agreement(df, human="human", by="group", n_resamples=50)
    assert out["group"].to_list() == ["x", "y"]
    assert out["accuracy"].to_list() == [1.0, 0.5]


def test_unknown_human_label_names_the_row():
    df = rubric_frame(["Completely Yes", "sort of"], ["Completely Yes", "Not At All"])
    with pytest.raises(fk.InputError, match=r"row 1: human = 'sort of' is not a label"):
        fk.agreement(df, human="human")
    # A rubric entry makes it known.
    out = fk.agreement(df, human="human", rubric={"sort of": 0.5}, n_resamples=20)
    assert "sort of" in out["labels"][0]


def test_missing_human_column_is_an_input_error():
    df = rubric_frame(["Completely Yes"], ["Completely Yes"])
    with pytest.raises(fk.InputError, match="'people'"):
        fk.agreement(df, human="people")


def test_bootstrap_is_repeatable_with_a_seed():
    df = rubric_frame(
        ["Completely Yes", "Not At All", "Neutral/Mixed"] * 10,
        ["Completely Yes", "Neutral/Mixed", "Neutral/Mixed"] * 10,
    )
    # The judge never said "Not At All": the evaluator supplies the whole rubric.
    a = fk.agreement(df, human="human", seed=3, n_resamples=200, rubric=Coherence())
    b = fk.agreement(df, human="human", seed=3, n_resamples=200, rubric=Coherence())
    assert a["labels"][0].to_list() == FIVE
    assert a.equals(b)


def test_spearman_interval_covers_the_true_value_at_about_95_percent():
    # Bivariate normal with correlation r: Spearman's population rho = 6/pi * asin(r/2).
    r, n, sims = 0.6, 150, 200
    truth = 6 / math.pi * math.asin(r / 2)
    rng = np.random.default_rng(11)
    cov = [[1.0, r], [r, 1.0]]
    covered = 0
    for s in range(sims):
        x, y = rng.multivariate_normal([0.0, 0.0], cov, size=n).T
        idx = m.resample_indices(n, 400, seed=s)
        low, high = m.interval(m.spearman_rows(x[idx], y[idx]), 0.95)
        assert low is not None and high is not None
        covered += low <= truth <= high
    assert 0.89 <= covered / sims <= 0.99


def test_kappa_interval_covers_the_true_value_at_about_95_percent():
    # Two raters on three ordered levels with a known joint distribution.
    joint = np.array([[0.20, 0.05, 0.02], [0.05, 0.25, 0.05], [0.01, 0.07, 0.30]])
    truth = m.kappa(joint * 10_000, "quadratic")  # kappa depends on proportions only
    rng = np.random.default_rng(5)
    n, sims, covered = 200, 200, 0
    for s in range(sims):
        cells = rng.choice(9, size=n, p=joint.ravel())
        rows, cols = (cells // 3).astype(np.int64), (cells % 3).astype(np.int64)
        boot = m.bootstrap_confusions(rows, cols, 3, m.resample_indices(n, 400, seed=s))
        low, high = m.interval(m.kappa(boot, "quadratic"), 0.95)
        assert low is not None and high is not None
        covered += low <= truth <= high
    assert 0.89 <= covered / sims <= 0.99


def test_between_two_label_columns_counts_matches_without_an_order():
    df = pl.DataFrame({"a_label": ["x", "y", "y", "x"], "b_label": ["x", "y", "x", "x"]})
    row = fk.agreement(df, between=("a_label", "b_label"), n_resamples=50).row(0, named=True)
    # p_o = 3/4; p_e = (2*3 + 2*1) / 16 = 0.5 -> kappa 0.5; unordered: no weighted kappa.
    assert row["confusion"] == [[2, 0], [1, 1]]
    assert row["kappa"] == pytest.approx(0.5)
    assert row["weighted_kappa"] is None and row["spearman"] is None


def test_agreement_on_the_labelled_sample_knows_the_rubric_without_being_told() -> None:
    # The offline judge never picks "Completely Yes", which a person did: it is still one
    # of ResponseRelevance's labels, and the run said so.
    pytest.importorskip("onnxruntime")
    from framekit.data import load_labelled_sample
    from framekit.evaluators import ResponseRelevance

    labelled = load_labelled_sample()
    scored = fk.evaluate_dataframe(
        labelled,
        [ResponseRelevance()],
        {"input": "question", "output": "answer"},
        judge="local",
        cache=False,
        progress=False,
    )
    assert "Completely Yes" in labelled["human_relevance"].to_list()
    assert "Completely Yes" not in scored["response_relevance_label"].to_list()
    out = fk.agreement(scored, human="human_relevance", evaluators="response_relevance")
    told = fk.agreement(
        scored, human="human_relevance", evaluators="response_relevance", rubric=ResponseRelevance()
    )
    assert out.row(0, named=True)["n"] == 60
    assert out.equals(told)  # the same reading as with rubric= given
    record = fk.last_run().provenance
    assert record is not None and "Completely Yes" in record["evaluators"][0]["labels"]
    # So do the calibration and the agreement plot the notebook draws next.
    pair = {"human": "human_relevance", "evaluator": "response_relevance"}
    calibrated = fk.calibrate(scored, **pair)
    assert calibrated.table.equals(fk.calibrate(scored, **pair, rubric=ResponseRelevance()).table)
    if importlib.util.find_spec("matplotlib") is not None:
        fig = fk.plot.agreement(scored, "human_relevance", "response_relevance")
        assert fig.get_suptitle().endswith("n = 60")


def test_without_scipy_the_correlations_are_null_with_one_warning_naming_the_install(
    monkeypatch,
) -> None:
    from framekit._dependencies import import_optional
    from framekit.analysis import agreement as module

    def no_scipy():
        return import_optional("scipy_not_installed", extra="stats", purpose="a rank correlation")

    monkeypatch.setattr(m, "_scipy_stats", no_scipy)
    monkeypatch.setattr(module, "_WARNED", set())
    frame = pl.DataFrame(
        {
            "c_score": [0.0, 0.5, 1.0, 1.0, 0.0, 0.5],
            "c_label": ["low", "mid", "high", "high", "low", "mid"],
            "c_error": [None] * 6,
            "human": ["low", "mid", "high", "mid", "low", "high"],
        }
    )
    with pytest.warns(UserWarning, match=r"pip install 'framekit\[stats\]'") as caught:
        out = fk.agreement(frame, human="human")
        fk.agreement(frame, human="human")  # a second call says nothing new
    assert len(caught) == 1
    assert out["spearman"][0] is None and out["kappa"][0] is not None
