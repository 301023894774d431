"""``fk.rank``: win rates and Bradley-Terry strengths from a pairs frame, with intervals."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import polars as pl
import pytest

import framekit as fk
from benchmarks._pairs_model import bradley_terry_pairs, centred, true_win_rates
from framekit.analysis import _bradley_terry as bt

TRUE = {"bm25": -0.5, "dense": 0.0, "hybrid": 0.5}


def pairs_frame(winners: list[str | None], errors: list[str | None] | None = None, **extra):
    n = len(winners)
    return pl.DataFrame(
        {
            "question_id": list(range(n)),
            "a": ["bm25"] * n,
            "b": ["dense"] * n,
            "preference_winner": winners,
            "preference_error": errors or [None] * n,
            **extra,
        },
        schema_overrides={"preference_winner": pl.String, "preference_error": pl.String},
    )


def test_rank_recovers_the_true_order_and_covers_the_true_strengths():
    pairs = bradley_terry_pairs(TRUE, 150, seed=7)
    assert pairs.height == 450
    ranked = fk.rank(pairs, by="strategy")
    assert ranked["strategy"].to_list() == ["hybrid", "dense", "bm25"]
    assert ranked["n"].to_list() == [300, 300, 300]
    assert ranked["rank"].to_list() == [1, 2, 3]
    # Centred strengths: they sum to 0, and each interval holds the true one.
    assert ranked["strength"].sum() == pytest.approx(0.0, abs=1e-9)
    truth = centred(TRUE)
    for group, low, high in ranked.select("strategy", "strength_ci_low", "strength_ci_high").rows():
        assert low < truth[group] < high
    rates = true_win_rates(TRUE)
    for group, low, high in ranked.select("strategy", "win_rate_ci_low", "win_rate_ci_high").rows():
        assert low < rates[group] < high


def test_the_fit_is_the_maximum_of_the_likelihood_found_by_a_general_optimiser():
    scipy_optimize = pytest.importorskip("scipy.optimize")
    rng = np.random.default_rng(3)
    scores = rng.integers(1, 20, size=(4, 4)).astype(float) / 2  # half wins: ties
    np.fill_diagonal(scores, 0.0)

    def negative_log_likelihood(free: np.ndarray) -> float:
        s = np.append(free, -free.sum())  # centred, as the fit reports them
        diff = s[:, None] - s[None, :]
        return float(np.sum(scores * np.log1p(np.exp(-diff))))

    best = scipy_optimize.minimize(negative_log_likelihood, np.zeros(3), method="BFGS", tol=1e-12)
    expected = np.append(best.x, -best.x.sum())
    assert bt.fit(scores) == pytest.approx(expected, abs=1e-5)
    # Vectorised over resamples: each matrix fitted on its own.
    stacked = bt.fit(np.stack([scores, scores.T]))
    assert stacked[0] == pytest.approx(expected, abs=1e-5)
    assert stacked[1] == pytest.approx(bt.fit(scores.T), abs=1e-9)


def test_a_tie_counts_half_a_win_to_each_side():
    ranked = fk.rank(pairs_frame(["bm25", "tie", "tie", "dense", "bm25"]), n_boot=200)
    rows = {r["group"]: r for r in ranked.iter_rows(named=True)}
    assert (rows["bm25"]["wins"], rows["bm25"]["ties"], rows["bm25"]["losses"]) == (2, 2, 1)
    assert rows["bm25"]["win_rate"] == pytest.approx(3 / 5)
    assert rows["dense"]["win_rate"] == pytest.approx(2 / 5)
    # Scores 3 to 2, plus the one virtual tie between two groups that met: odds 3.5 / 2.5.
    difference = rows["bm25"]["strength"] - rows["dense"]["strength"]
    assert difference == pytest.approx(math.log(3.5 / 2.5))


def test_a_group_that_won_everything_has_a_finite_strength():
    ranked = fk.rank(pairs_frame(["dense"] * 12), n_boot=200)
    assert ranked["group"].to_list() == ["dense", "bm25"]
    assert ranked["win_rate"].to_list() == [1.0, 0.0]
    # 12 wins plus the virtual tie: odds 12.5 / 0.5 = 25.
    strength = ranked["strength"].to_list()
    assert strength[0] - strength[1] == pytest.approx(math.log(25.0))
    assert all(math.isfinite(v) for v in ranked["strength_ci_high"].to_list())


def test_error_rows_are_left_out_and_counted():
    clean = bradley_terry_pairs(TRUE, 60, seed=1)
    # Failed rows added to keys that are there anyway: the same keys are resampled.
    failed = clean.head(30).with_columns(
        preference_winner=pl.lit("hybrid"), preference_error=pl.lit("HTTP 500")
    )
    no_verdict = clean.slice(30, 10).with_columns(preference_winner=pl.lit(None, pl.String))
    noisy = pl.concat([clean, failed, no_verdict])
    expected = fk.rank(clean)
    got = fk.rank(noisy)
    same = [c for c in expected.columns if c != "errors"]
    assert got.select(same).equals(expected.select(same))
    involved = pl.concat([failed, no_verdict]).select(pl.concat_list("a", "b").alias("g"))
    counts = involved.explode("g")["g"].value_counts()
    errors = dict(got.select("group", "errors").rows())
    assert errors == dict(counts.rows())
    assert sum(errors.values()) == 2 * 40


def test_pandas_in_pandas_out_with_the_same_figures():
    pairs = bradley_terry_pairs(TRUE, 40, seed=2)
    from_polars = fk.rank(pairs, by="strategy")
    from_pandas = fk.rank(pairs.to_pandas(), by="strategy")
    assert isinstance(from_pandas, pd.DataFrame)
    assert list(from_pandas.columns) == from_polars.columns
    assert str(from_pandas["wins"].dtype) == "Int64"
    assert pl.from_pandas(from_pandas).equals(from_polars)


def test_the_same_seed_gives_the_same_intervals():
    pairs = bradley_terry_pairs(TRUE, 40, seed=4)
    assert fk.rank(pairs, seed=5).equals(fk.rank(pairs, seed=5))
    assert not fk.rank(pairs, seed=5).equals(fk.rank(pairs, seed=6))
    assert fk.rank(pairs, seed=5, n_boot=300)["strength"].to_list() == pytest.approx(
        fk.rank(pairs, seed=6, n_boot=300)["strength"].to_list()
    )


def test_groups_the_data_cannot_tell_apart_share_a_rank():
    pairs = bradley_terry_pairs({"a1": 1.5, "b1": 0.0, "b2": 0.0}, 100, seed=0)
    ranked = fk.rank(pairs)
    assert dict(ranked.select("group", "rank").rows()) == {"a1": 1, "b1": 2, "b2": 2}


def test_a_reference_group_is_zero_and_the_others_are_log_odds_against_it():
    pairs = bradley_terry_pairs(TRUE, 80, seed=5)
    centred_fit = fk.rank(pairs)
    pinned = fk.rank(pairs, reference="bm25")
    strengths = dict(pinned.select("group", "strength").rows())
    assert strengths["bm25"] == 0.0
    assert pinned.filter(pl.col("group") == "bm25")["strength_ci_low"].item() == 0.0
    before = dict(centred_fit.select("group", "strength").rows())
    assert strengths["hybrid"] == pytest.approx(before["hybrid"] - before["bm25"])
    with pytest.raises(fk.InputError, match="reference 'vector'.*groups"):
        fk.rank(pairs, reference="vector")


def test_human_verdicts_give_three_methods_and_ppi_is_narrower_than_classical():
    pairs = bradley_terry_pairs(TRUE, 150, seed=11, agreement=0.8, n_human=60)
    ranked = fk.rank(pairs, human="human", by="strategy")
    assert ranked.height == 9
    assert ranked["method"].to_list() == ["ppi", "classical", "judge_only"] * 3
    assert ranked["strategy"].to_list()[::3] == ["hybrid", "dense", "bm25"]
    plain = fk.rank(pairs.drop("human"), by="strategy")
    judge_rows = ranked.filter(pl.col("method") == "judge_only").select(plain.columns)
    assert judge_rows.equals(plain)
    labelled = pairs.filter(pl.col("human").is_not_null())
    for group in TRUE:
        rows = {
            r["method"]: r for r in ranked.filter(pl.col("strategy") == group).iter_rows(named=True)
        }
        width = {m: r["win_rate_ci_high"] - r["win_rate_ci_low"] for m, r in rows.items()}
        assert width["ppi"] < width["classical"]
        mine = labelled.filter((pl.col("a") == group) | (pl.col("b") == group))
        assert rows["classical"]["n_labelled"] == mine.height
        assert rows["classical"]["wins"] == (mine["human"] == group).sum()
        assert rows["ppi"]["n"] == 300 and 0.0 < rows["ppi"]["lam"] <= 1.0


def test_groups_with_few_human_verdicts_get_null_ppi_figures_and_a_warning():
    pairs = bradley_terry_pairs(TRUE, 60, seed=3, n_human=9)  # at most 9 per group
    with pytest.warns(UserWarning, match="an interval needs at least 10"):
        ranked = fk.rank(pairs, human="human")
    for method in ("ppi", "classical"):
        assert ranked.filter(pl.col("method") == method)["win_rate"].null_count() == 3
    assert ranked.filter(pl.col("method") == "judge_only")["win_rate"].null_count() == 0


def test_input_errors_name_the_row_column_or_choice():
    with pytest.raises(fk.InputError, match=r"row 2: preference_winner = 'vector'"):
        fk.rank(pairs_frame(["bm25", "dense", "vector"]))
    with pytest.raises(fk.InputError, match=r"row 1: human = 'A'"):
        fk.rank(pairs_frame(["bm25", "dense"], human=[None, "A"]), human="human")
    with pytest.raises(fk.InputError, match="faces itself"):
        fk.rank(pairs_frame(["bm25"]).with_columns(b=pl.lit("bm25")))
    two = pairs_frame(["bm25"], tone_winner=["dense"], tone_error=[None])
    with pytest.raises(fk.InputError, match=r"several evaluators \['preference', 'tone'\]"):
        fk.rank(two)
    assert fk.rank(two, evaluator="tone", n_boot=100)["group"].to_list() == ["dense", "bm25"]
    with pytest.raises(fk.InputError, match="not a pairs frame"):
        fk.rank(pl.DataFrame({"q": [1], "a": ["x"], "b": ["y"]}))
    with pytest.raises(fk.InputError, match="by='wins' would clash"):
        fk.rank(pairs_frame(["bm25"]), by="wins")
    with pytest.raises(fk.InputError, match="n_boot"):
        fk.rank(pairs_frame(["bm25"]), n_boot=10)


def test_groups_that_never_meet_cannot_be_ranked():
    apart = pl.DataFrame(
        {
            "question_id": [1, 1],
            "a": ["bm25", "hybrid"],
            "b": ["dense", "vector"],
            "preference_winner": ["bm25", "vector"],
            "preference_error": [None, None],
        },
        schema_overrides={"preference_error": pl.String},
    )
    with pytest.raises(fk.InputError, match="never meet"):
        fk.rank(apart)


def test_a_group_whose_every_pair_failed_is_listed_last_without_figures():
    pairs = pl.concat(
        [
            pairs_frame(["bm25", "dense", "bm25"]),
            pairs_frame(["dense"], ["HTTP 500"]).with_columns(b=pl.lit("vector")),
        ]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ranked = fk.rank(pairs, n_boot=200)
    last = ranked.row(-1, named=True)
    assert (last["group"], last["n"], last["errors"]) == ("vector", 0, 1)
    assert last["strength"] is None and last["win_rate"] is None and last["rank"] is None


def test_the_bootstrap_resamples_keys_so_pairs_of_one_key_move_together():
    once = bradley_terry_pairs(TRUE, 100, seed=8)
    # Every row twice: under the same key (one question asked twice, perfectly
    # correlated) or under a key of its own (twice the independent questions).
    same_key = pl.concat([once, once])
    new_keys = pl.concat([once, once.with_columns(pl.col("question_id") + 1000)])

    def width(pairs: pl.DataFrame) -> float:
        ranked = fk.rank(pairs).filter(pl.col("group") == "hybrid")
        return ranked["strength_ci_high"].item() - ranked["strength_ci_low"].item()

    # Same counts, same point estimates; only the keys differ: about sqrt(2) apart.
    assert fk.rank(same_key)["strength"].to_list() == pytest.approx(
        fk.rank(new_keys)["strength"].to_list(), abs=1e-6
    )
    assert width(same_key) / width(new_keys) == pytest.approx(math.sqrt(2), rel=0.15)


def test_groups_that_only_met_a_baseline_are_ranked_against_it():
    # evaluate_pairwise(..., against="bm25"): every group faces the baseline only.
    star = bradley_terry_pairs(TRUE, 150, seed=9).filter(pl.col("a") == "bm25")
    ranked = fk.rank(star, reference="bm25")
    assert ranked["group"].to_list() == ["hybrid", "dense", "bm25"]
    for group, low, high in ranked.select("group", "strength_ci_low", "strength_ci_high").rows():
        assert low <= TRUE[group] - TRUE["bm25"] <= high
