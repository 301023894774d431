"""fk.plot.agreement draws the confusion matrix and the calibration plot it is given."""

from __future__ import annotations

import itertools

import polars as pl
import pytest

import framekit as fk
from tests import figure_layout

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
    assert "kappa 0.58" in fig.get_suptitle()  # (0.8 - 0.52) / 0.48
    # Calibration: at judge score 0 people said relevant 1 of 4 times, at 1 5 of 6.
    line = calibration.lines[-1]
    assert list(line.get_xdata()) == [0.0, 1.0]
    assert list(line.get_ydata()) == pytest.approx([0.25, 5 / 6])


def test_numeric_ratings_give_the_calibration_panel_only(tmp_path):
    fig = fk.plot.agreement(frame(), "rating", "retrieval_relevance")
    assert len(fig.axes) == 1
    path = fk.plot.save(fig, tmp_path / "agreement.png")
    assert path.read_bytes()[:4] == b"\x89PNG"


def five_levels() -> pl.DataFrame:
    """The bundled sample's shape: five labels and long column names, the names that ran
    the confusion panel's title into the calibration panel's axis label."""
    labels = ["Not At All", "Not Generally", "Neutral/Mixed", "Generally Yes", "Completely Yes"]
    human = [labels[i % 5] for i in range(60)]
    judge = [labels[max(0, i % 5 - (i % 3))] for i in range(60)]
    return pl.DataFrame(
        {
            "human_relevance": human,
            "response_relevance_label": judge,
            "response_relevance_score": [labels.index(j) / 4 for j in judge],
            "response_relevance_error": [None] * 60,
        },
        schema_overrides={"response_relevance_error": pl.String},
    )


@pytest.mark.parametrize("human", ["human_relevance", "rating"])
def test_no_text_runs_into_another_panel_or_off_the_figure(human: str) -> None:
    frame = five_levels().with_columns(rating=pl.Series([i % 5 + 1 for i in range(60)]))
    fig = fk.plot.agreement(frame, human, "response_relevance")
    renderer = figure_layout.draw(fig)
    headline = fig.get_suptitle()
    assert headline.startswith(f"response_relevance vs {human}: ")
    # (whose, what, where): the figure's title, then each panel's title, labels and ticks.
    (title,) = [t for t in fig.texts if t.get_text() == headline]
    boxes = [("figure", "title", title.get_window_extent(renderer))]
    for i, ax in enumerate(fig.axes):
        boxes += [(f"panel {i}", n, b) for n, b in figure_layout.texts(ax, renderer).items()]
    for whose, what, box in boxes:
        assert figure_layout.inside(box, fig.bbox), f"the {what} of {whose} is cut off"
    for (whose_a, a, box_a), (whose_b, b, box_b) in itertools.combinations(boxes, 2):
        if whose_a != whose_b:
            assert not box_a.overlaps(box_b), f"the {a} of {whose_a} runs into the {b} of {whose_b}"
    # The counts by each calibration point stay inside their panel.
    calibration = fig.axes[-1]
    frame_box = calibration.get_window_extent(renderer)
    counts = [t for t in calibration.texts if t.get_text().startswith("n=")]
    assert counts
    for text in counts:
        box = text.get_window_extent(renderer)
        assert figure_layout.inside(box, frame_box), f"{text.get_text()} sticks out of its panel"
