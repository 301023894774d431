"""AnswerRelevancy: regenerated questions, embeddings, strict mode, caching."""

from __future__ import annotations

from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import AnswerRelevancy

QUESTION = "What is the capital of France?"
RELEVANT = "Paris is the capital of France."
OFF_TOPIC = "Bananas are rich in potassium and dietary fiber."
EMBED = "openai/sim-embed"


def sim_judge(sim: Any) -> fk.Judge:
    return fk.Judge("openai/sim", api_base=sim.api_base, api_key="sk-test")


def test_relevant_answer_scores_above_off_topic_with_api_embeddings(judge_simulator, tmp_path):
    df = pl.DataFrame({"input": [QUESTION, QUESTION], "output": [RELEVANT, OFF_TOPIC]})
    ev = AnswerRelevancy(embedding_model=EMBED)
    out = fk.evaluate_dataframe(
        df, [ev], judge=sim_judge(judge_simulator), cache=tmp_path, progress=False
    )
    relevant, off_topic = out["answer_relevancy_score"].to_list()
    assert 0.7 <= relevant <= 1.0 and 0.0 <= off_topic < 0.5
    assert out["answer_relevancy_passed"].to_list() == [True, False]
    assert out["answer_relevancy_label"].to_list() == ["committal", "committal"]
    # The explanation names the regenerated questions and the embedding model.
    explanation = out["answer_relevancy_explanation"][0]
    assert '"What is Paris is the capital of France.?"' in explanation and EMBED in explanation

    stats = judge_simulator.stats()
    assert stats["chat"] == 2 and stats["embeddings"] >= 1
    embedded = [t for r in judge_simulator.requests if "input" in r for t in r["input"]]
    assert QUESTION in embedded and len(embedded) == len(set(embedded)) == 1 + 2 * 3
    # The judge never sees the request in default mode: it cannot copy it.
    for body in judge_simulator.requests:
        if "messages" in body:
            assert QUESTION not in body["messages"][1]["content"]

    # Embeddings are cached like completions: a rerun calls nothing.
    judge_simulator.reset()
    again = fk.evaluate_dataframe(
        df, [ev], judge=sim_judge(judge_simulator), cache=tmp_path, progress=False
    )
    assert judge_simulator.stats()["total"] == 0
    assert again.equals(out)


def test_relevant_answer_scores_above_off_topic_with_the_offline_embedder(judge_simulator):
    pytest.importorskip("framekit.judges.local.embedder")
    ev = AnswerRelevancy()  # embedding_model=None: the offline embedder
    judge = sim_judge(judge_simulator)
    try:
        relevant = ev.score(input=QUESTION, output=RELEVANT, judge=judge, cache=False)
    except fk.LocalModelError as exc:  # pragma: no cover - depends on the install
        pytest.skip(f"offline model unavailable: {exc}")
    if relevant.error and "LocalModelError" in relevant.error:
        pytest.skip(relevant.error)
    off_topic = ev.score(input=QUESTION, output=OFF_TOPIC, judge=judge, cache=False)
    assert relevant.error is None and off_topic.error is None
    assert relevant.value > off_topic.value
    assert judge_simulator.stats()["embeddings"] == 0
    assert "all-MiniLM-L6-v2" in relevant.explanation


def test_strict_mode_zeroes_answers_to_another_question_not_noncommittal_ones(judge_simulator):
    judge = sim_judge(judge_simulator)
    hedge = "I am not sure, Paris may be the capital of France. @sim(noncommittal=true)"
    lenient = AnswerRelevancy(embedding_model=EMBED).score(
        input=QUESTION, output=hedge, judge=judge, cache=False
    )
    strict = AnswerRelevancy(embedding_model=EMBED, strict_mode=True).score(
        input=QUESTION, output=hedge, judge=judge, cache=False
    )
    assert lenient.label == strict.label == "noncommittal"
    # The source's strict mode penalises another question only: noncommittal is reported.
    assert lenient.value > 0.5 and strict.value == lenient.value
    assert "noncommittal, which is reported but does not change the score" in strict.explanation
    # Template v0 zeroed it in strict mode, and still does when asked for.
    v0 = AnswerRelevancy(embedding_model=EMBED, strict_mode=True, version="v0").score(
        input=QUESTION, output=hedge, judge=judge, cache=False
    )
    assert (v0.value, v0.passed, v0.label) == (0.0, False, "noncommittal")
    assert "strict mode (template v0) sets the score to 0" in v0.explanation

    other = "Paris is the capital of France. @sim(different_question=true)"
    strict_other = AnswerRelevancy(embedding_model=EMBED, strict_mode=True).score(
        input=QUESTION, output=other, judge=judge, cache=False
    )
    assert (strict_other.value, strict_other.label) == (0.0, "different question")
    # The reason is a sentence first, as the source's `reason` is; the numbers follow.
    assert strict_other.explanation.startswith(
        "The score is 0.00 because the response answers a different question"
    )
    committed = AnswerRelevancy(embedding_model=EMBED, strict_mode=True).score(
        input=QUESTION, output=RELEVANT, judge=judge, cache=False
    )
    assert committed.label == "committal" and committed.value > 0.7

    # Strict mode shows the request (for the flag) and asks for it in the schema.
    bodies = [
        r
        for r in judge_simulator.requests
        if "messages" in r and r["messages"][0]["content"].startswith("You read")
    ]
    strict_body = bodies[-1]
    assert QUESTION in strict_body["messages"][1]["content"]
    schema = strict_body["response_format"]["json_schema"]["schema"]
    assert list(schema["properties"]) == ["questions", "noncommittal", "different_question"]
    assert (
        "different_question"
        not in bodies[0]["response_format"]["json_schema"]["schema"]["properties"]
    )


def test_n_questions_sets_the_schema_and_passed_flips_at_the_threshold(judge_simulator, tmp_path):
    judge = sim_judge(judge_simulator)
    ev = AnswerRelevancy(embedding_model=EMBED, n_questions=5)
    score = ev.score(input=QUESTION, output=RELEVANT, judge=judge, cache=tmp_path)
    body = judge_simulator.requests[0]
    items = body["response_format"]["json_schema"]["schema"]["properties"]["questions"]
    assert (items["minItems"], items["maxItems"]) == (5, 5)
    assert "write 5 different questions" in body["messages"][0]["content"]
    assert score.explanation.count("(cosine ") == 5
    value = score.value
    above = AnswerRelevancy(embedding_model=EMBED, n_questions=5, threshold=value)
    below = AnswerRelevancy(embedding_model=EMBED, n_questions=5, threshold=min(1.0, value + 1e-6))
    assert above.score(input=QUESTION, output=RELEVANT, judge=judge, cache=tmp_path).passed is True
    assert below.score(input=QUESTION, output=RELEVANT, judge=judge, cache=tmp_path).passed is False
    assert judge_simulator.stats()["chat"] == 1


def test_empty_fields_raise_without_a_call_and_options_are_checked(judge_simulator):
    judge = sim_judge(judge_simulator)
    with pytest.raises(ValueError, match="'output' is empty"):
        AnswerRelevancy(embedding_model=EMBED).score(
            input=QUESTION, output=" ", judge=judge, cache=False
        )
    assert judge_simulator.stats()["total"] == 0
    with pytest.raises(fk.InputError, match="n_questions"):
        AnswerRelevancy(n_questions=0)
    with pytest.raises(fk.InputError, match="embedding_model"):
        AnswerRelevancy(embedding_model=42)  # type: ignore[arg-type]


def test_describe_names_the_method_threshold_and_embeddings():
    text = AnswerRelevancy(embedding_model=EMBED, strict_mode=True).describe()
    assert "mean cosine similarity of 3 regenerated questions" in text
    assert ">= 0.7" in text and EMBED in text and "version=v1" in text
    assert "strict mode: 0 for answers to a different question" in text
    v0 = AnswerRelevancy(embedding_model=EMBED, strict_mode=True, version="v0").describe()
    assert "strict mode: 0 for noncommittal answers and answers to a different question" in v0
