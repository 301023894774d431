"""fk.plot.agreement draws the confusion matrix and the calibration plot it is given."""

from __future__ import annotations

import polars as pl
import pytest

import framekit as fk

pytest.importorskip("matplotlib")


def frame() -> pl.DataFrame:
    labels = ["irrelevant", "relevant"]
    human = ["relevant"] * 6 + ["irrelevant"] * 4
    judge = ["relevant"] * 5 + ["irrelevant"] * 1 + ["irrelevant"] * 3 + ["relevant"]
    return pl.DataFrame(
        {
            "human": human,
            "rating": [5, 4, 5, 4, 3, 2, 1, 2, 1, 3],
            "retrieval_relevance_label": judge,
            "retrieval_relevance_score": [float(labels.index(j)) for j in judge],
            "retrieval_relevance_error": [None] * 10,
        },
        schema_overrides={"retrieval_relevance_error": pl.String},
    )


def test_confusion_panel_shows_the_counts_and_kappa():
    fig = fk.plot.agreement(frame(), "human", "retrieval_relevance")
    matrix, calibration = fig.axes
    counts = sorted(t.get_text() for t in matrix.texts)
    # rows people, columns judge: irrelevant -> [3, 1], relevant -> [1, 5]
    assert counts == ["1", "1", "3", "5"]
    assert "kappa 0.58" in matrix.get_title()  # (0.8 - 0.52) / 0.48
    # Calibration: at judge score 0 people said relevant 1 of 4 times, at 1 5 of 6.
    line = calibration.lines[-1]
    assert list(line.get_xdata()) == [0.0, 1.0]
    assert list(line.get_ydata()) == pytest.approx([0.25, 5 / 6])


def test_numeric_ratings_give_the_calibration_panel_only(tmp_path):
    fig = fk.plot.agreement(frame(), "rating", "retrieval_relevance")
    assert len(fig.axes) == 1
    path = fk.plot.save(fig, tmp_path / "agreement.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
