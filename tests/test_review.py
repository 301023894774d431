"""fk.sample_for_review: the rows a person should label next."""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
import pytest

import framekit as fk
from framekit import InputError
from framekit.evaluators import ResponseRelevance

LEVELS = dict(ResponseRelevance().choices)


def scored(rows: int = 200, seed: int = 0, confidence: bool = True) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    labels = rng.choice(list(LEVELS), rows, p=[0.05, 0.1, 0.15, 0.3, 0.4])
    score = np.array([LEVELS[label] for label in labels])
    error = np.where(np.arange(rows) % 25 == 3, "timeout", None)
    frame = pl.DataFrame(
        {
            "id": np.arange(rows),
            "rel_score": np.where(error == None, score, np.nan),  # noqa: E711
            "rel_label": np.where(error == None, labels, None),  # noqa: E711
            "rel_passed": score >= 0.5,
            "rel_error": error,
            "group": np.where(np.arange(rows) % 2 == 0, "chat", "search"),
        }
    ).with_columns(pl.col("rel_score").fill_nan(None))
    if confidence:
        frame = frame.with_columns(rel_confidence=pl.Series(rng.uniform(0.3, 1.0, rows)))
    return frame


def test_uncertain_returns_the_least_confident_scored_rows_first():
    frame = scored()
    picked = fk.sample_for_review(frame, 20, evaluator="rel", strategy="uncertain")
    ok = frame.filter(pl.col("rel_error").is_null()).sort("rel_confidence")
    assert picked["id"].to_list() == ok["id"].head(20).to_list()
    assert picked["rel_error"].null_count() == 20
    assert picked.columns == frame.columns


def test_uncertain_without_a_confidence_column_goes_by_distance_from_the_pass_mark():
    frame = scored(confidence=False)
    picked = fk.sample_for_review(frame, 30, evaluator="rel", seed=1)
    # The pass mark read off the frame is 0.5: "Neutral/Mixed" rows are at distance 0.
    neutral = frame.filter((pl.col("rel_label") == "Neutral/Mixed") & pl.col("rel_error").is_null())
    assert 0 < neutral.height < 30
    assert set(picked["id"].head(neutral.height)) == set(neutral["id"])
    distance = (picked["rel_score"] - 0.5).abs().to_list()
    assert distance == sorted(distance)
    again = fk.sample_for_review(frame, 30, evaluator="rel", seed=1)
    assert again["id"].to_list() == picked["id"].to_list()


def test_stratified_gives_rare_labels_an_equal_share():
    frame = scored(rows=1000)
    picked = fk.sample_for_review(frame, 50, evaluator="rel", strategy="stratified", seed=3)
    counts = picked["rel_label"].value_counts()
    assert dict(zip(counts["rel_label"], counts["count"])) == dict.fromkeys(LEVELS, 10)
    assert picked["id"].to_list() == sorted(picked["id"].to_list())  # input order
    by_group = fk.sample_for_review(
        frame, 100, evaluator="rel", strategy="stratified", by="group", seed=3
    )
    cells = by_group.group_by("rel_label", "group").len()
    assert cells.height == 10 and set(cells["len"]) == {10}


def test_stratified_hands_a_small_stratums_share_to_the_others():
    frame = scored(rows=1000)
    rare = frame.filter(pl.col("rel_label") == "Not At All").height
    picked = fk.sample_for_review(
        frame, 5 * rare + 100, evaluator="rel", strategy="stratified", seed=0
    )
    assert picked.height == 5 * rare + 100
    assert picked.filter(pl.col("rel_label") == "Not At All").height == rare


def test_random_is_seeded_and_uniform_over_scored_rows():
    frame = scored(rows=1000)
    a = fk.sample_for_review(frame, 100, evaluator="rel", strategy="random", seed=5)
    b = fk.sample_for_review(frame, 100, evaluator="rel", strategy="random", seed=5)
    c = fk.sample_for_review(frame, 100, evaluator="rel", strategy="random", seed=6)
    assert a["id"].to_list() == b["id"].to_list() != c["id"].to_list()
    assert a["rel_error"].null_count() == 100
    chosen = np.zeros(1000)
    for seed in range(200):
        chosen[
            fk.sample_for_review(frame, 100, evaluator="rel", strategy="random", seed=seed)[
                "id"
            ].to_numpy()
        ] += 1
    scored_rows = frame["rel_error"].is_null().to_numpy()
    assert chosen[~scored_rows].sum() == 0
    assert chosen[scored_rows].mean() == pytest.approx(200 * 100 / scored_rows.sum())


def test_rows_already_labelled_are_not_chosen_again():
    frame = scored().with_columns(human=pl.when(pl.col("id") < 100).then(pl.lit("Generally Yes")))
    picked = fk.sample_for_review(frame, 30, evaluator="rel", labelled="human")
    assert picked["id"].min() >= 100 and picked["human"].null_count() == 30


def test_pandas_in_gives_the_same_pandas_rows_with_their_index():
    frame = scored().to_pandas()
    frame.index = [f"r{i}" for i in range(len(frame))]
    picked = fk.sample_for_review(frame, 5, evaluator="rel")
    assert isinstance(picked, pd.DataFrame)
    assert list(picked.columns) == list(frame.columns)
    assert picked.index.tolist() == [f"r{i}" for i in picked["id"]]


def test_asking_for_more_rows_than_there_are_warns_and_returns_them_all():
    frame = scored(rows=50)
    with pytest.warns(UserWarning, match="only 48 row"):
        picked = fk.sample_for_review(frame, 100, evaluator="rel", strategy="random", seed=0)
    assert picked.height == 48


def test_bad_requests_name_the_problem():
    frame = scored()
    with pytest.raises(InputError, match="strategy 'hardest'"):
        fk.sample_for_review(frame, 5, evaluator="rel", strategy="hardest")
    with pytest.raises(InputError, match="n must be"):
        fk.sample_for_review(frame, -1, evaluator="rel")
    with pytest.raises(InputError, match="no results for evaluator"):
        fk.sample_for_review(frame, 5, evaluator="coherence")
    with pytest.raises(InputError, match="'nope' is not in the frame"):
        fk.sample_for_review(frame, 5, evaluator="rel", labelled="nope")
