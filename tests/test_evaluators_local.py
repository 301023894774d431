"""The offline judge's methods: calibrated cut points onto each evaluator's labels."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import (
    AnswerRelevancy,
    Coherence,
    ContextRelevance,
    ResponseRelevance,
    RetrievalRelevance,
)
from framekit.judges.local import LocalJudge

lm = pytest.importorskip("framekit.judges.local.methods")


class PlantedEmbedder:
    """Embeds "q" as e1 and "a@<cos>" as a unit vector at exactly that cosine to e1."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = []
        for text in texts:
            if text.startswith("a@"):
                c = float(text[2:])
                rows.append([c, math.sqrt(max(0.0, 1.0 - c * c)), 0.0])
            else:
                rows.append([1.0, 0.0, 0.0])
        return np.asarray(rows, dtype=np.float32)


class PlantedJudge(LocalJudge):
    # The planted vectors must never share cache entries with the real model's.
    model_id = "test/planted"  # type: ignore[assignment]


def planted_judge() -> LocalJudge:
    # The embedding proxies, even where the lm extra is installed.
    return PlantedJudge(embedder=PlantedEmbedder(), likelihood=False)


def band_middles(cuts: Sequence[float]) -> list[float]:
    """One similarity inside each band of a scale, worst band first."""
    edges = [max(-0.2, cuts[0] - 0.2), *cuts, min(1.0, cuts[-1] + 0.2)]
    return [round((lo + hi) / 2, 4) for lo, hi in zip(edges, edges[1:])]


@pytest.mark.parametrize(
    ("factory", "scale_name", "fields"),
    [
        (ResponseRelevance, "relevance_five", lambda a: {"input": "q", "output": a}),
        (ContextRelevance, "relevance_three", lambda a: {"input": "q", "context": ["a@-0.5", a]}),
        (RetrievalRelevance, "relevance_binary", lambda a: {"input": "q", "context": [a]}),
    ],
)
def test_each_band_of_the_calibrated_scale_gives_its_label(factory, scale_name, fields, tmp_path):
    ev = factory()
    scale = getattr(lm.CALIBRATION, scale_name)
    sims = band_middles(scale.cuts)
    df = pl.DataFrame([fields(f"a@{s}") for s in sims])
    out = fk.evaluate_dataframe(df, [ev], judge=planted_judge(), cache=tmp_path, progress=False)
    worst_first = sorted(ev.choices, key=ev.choices.get)
    assert out[f"{ev.name}_label"].to_list() == worst_first
    assert out[f"{ev.name}_score"].to_list() == [ev.choices[label] for label in worst_first]
    assert out[f"{ev.name}_error"].null_count() == len(sims)
    for explanation, s in zip(out[f"{ev.name}_explanation"], sims):
        assert "Local similarity proxy" in explanation and f"cosine {s:.3f}" in explanation
        assert f"{scale.cuts[0]:.3f}" in explanation


def test_context_relevance_lists_are_as_relevant_as_their_best_document(tmp_path):
    top = lm.CALIBRATION.relevance_three.cuts[-1] + 0.05
    score = ContextRelevance().score(
        input="q", context=["a@0.0", f"a@{top:.4f}", "a@0.1"], judge=planted_judge(), cache=tmp_path
    )
    assert score.label == "high"
    assert "best of 3 document(s), document 2" in score.explanation


def test_answer_relevancy_direct_comparison_puts_the_relevance_cut_at_the_pass_mark(tmp_path):
    cut = lm.CALIBRATION.relevance_binary.cuts[0]
    judge = planted_judge()
    at_cut = AnswerRelevancy().score(input="q", output=f"a@{cut}", judge=judge, cache=tmp_path)
    assert at_cut.value == pytest.approx(0.7, abs=1e-3)
    above = AnswerRelevancy().score(
        input="q", output=f"a@{min(1.0, cut + 0.1)}", judge=judge, cache=tmp_path
    )
    below = AnswerRelevancy().score(input="q", output=f"a@{cut - 0.1}", judge=judge, cache=tmp_path)
    assert below.value < 0.7 <= at_cut.value + 1e-3 < above.value + 1e-3
    assert (below.passed, above.passed) == (False, True)
    assert "direct comparison" in above.explanation and f"{cut:.3f}" in above.explanation


def test_coherence_single_sentence_has_nothing_to_stray_from(tmp_path):
    score = Coherence().score(output="Hello there.", judge=planted_judge(), cache=tmp_path)
    assert score.label == "Completely Yes" and "nothing to stray from" in score.explanation
    assert "similarity proxy" in score.explanation and "SummEval" in score.explanation


def test_coherence_falls_with_a_sentence_off_topic_and_with_repetition(tmp_path):
    # "q"-like sentences all embed to e1 (focus 1.0); a planted sentence pulls focus down.
    judge = planted_judge()
    smooth = Coherence().score(
        output="First point. Second point. Third point.", judge=judge, cache=tmp_path
    )
    assert smooth.label == "Completely Yes"
    assert "focus 1.000, repeated trigrams 0.000" in smooth.explanation
    jumpy = Coherence().score(
        output="First point.\na@-0.5\nThird point.", judge=judge, cache=tmp_path
    )
    looping = Coherence().score(
        output="It is good. It is good. It is good. It is good.", judge=judge, cache=tmp_path
    )
    assert "repeated trigrams 0.700" in looping.explanation  # 3 distinct of 10
    for worse in (jumpy, looping):
        assert worse.value is not None and smooth.value is not None and worse.value < smooth.value


def test_offline_coherence_refuses_when_calibration_finds_no_signal(tmp_path, monkeypatch):
    section = {**lm.CALIBRATION.source["coherence"], "usable": False, "offline_figure": 0.01}
    monkeypatch.setitem(lm.CALIBRATION.source, "coherence", section)
    df = pl.DataFrame({"answer": ["One. Two.", "Three."]})
    out = fk.evaluate_dataframe(
        df,
        [Coherence()],
        {"output": "answer"},
        judge=planted_judge(),
        cache=tmp_path,
        progress=False,
    )
    assert out["coherence_score"].to_list() == [None, None]
    error = out["coherence_error"][0]
    assert "SummEval dev Spearman 0.01" in error and "LLM judge" in error and "\n" not in error


def test_every_built_in_runs_offline_on_the_real_model(tmp_path):
    embedder = pytest.importorskip("framekit.judges.local.embedder")
    if not embedder.local_model_available():
        pytest.skip("offline model not installed")
    df = pl.DataFrame(
        {
            "question": ["What is the capital of France?", "What is the capital of France?"],
            "answer": ["Paris is the capital of France.", "Bananas are rich in potassium."],
            "docs": [
                ["Paris is the capital and largest city of France."],
                ["Bananas grow in the tropics."],
            ],
        }
    )
    evaluators = [
        ResponseRelevance(),
        Coherence(),
        AnswerRelevancy(),
        ContextRelevance(),
        RetrievalRelevance(),
    ]
    out = fk.evaluate_dataframe(
        df,
        evaluators,
        {"input": "question", "output": "answer", "context": "docs"},
        judge="local",
        cache=tmp_path,
        progress=False,
    )
    for ev in evaluators:
        assert out[f"{ev.name}_error"].null_count() == 2, out[f"{ev.name}_error"].to_list()
    for name in (
        "response_relevance",
        "answer_relevancy",
        "context_relevance",
        "retrieval_relevance",
    ):
        on_topic, off_topic = out[f"{name}_score"].to_list()
        assert on_topic >= off_topic, name
    assert out["answer_relevancy_score"][0] > out["answer_relevancy_score"][1]
