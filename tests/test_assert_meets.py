"""assert_meets in a test suite, as the Java evaluator is used from JUnit with meetsMetric."""

from __future__ import annotations

import pytest

from framekit.evaluators import ResponseRelevance, RetrievalRelevance
from framekit.judges.local import LocalJudge
from framekit.judges.local.embedder import local_model_available
from framekit.testing import assert_meets
from tests.helpers import sim_judge


def test_a_relevant_answer_meets_response_relevance(judge_simulator):
    judge = sim_judge(judge_simulator)
    score = assert_meets(
        ResponseRelevance(judge=judge),
        input="What is the capital of France? @sim(label=Completely Yes)",
        output="Paris is the capital of France.",
    )
    assert score.value == 1.0 and score.label == "Completely Yes"
    assert judge_simulator.stats()["by_status"] == {200: 1}


def test_a_failing_answer_raises_with_score_label_threshold_and_explanation(judge_simulator):
    judge = sim_judge(judge_simulator)
    with pytest.raises(AssertionError) as failure:
        assert_meets(
            ResponseRelevance(judge=judge),
            input="What is the capital of France? @sim(label=Not Generally)",
            output="Bananas are yellow.",
        )
    message = str(failure.value)
    assert "response_relevance: score 0.250 (Not Generally) is below the threshold 0.5" in message
    assert "judge's explanation: Simulated judgement" in message


def test_an_explicit_threshold_overrides_the_evaluators(judge_simulator):
    judge = sim_judge(judge_simulator)
    fields = {"input": "Which city? @sim(label=Generally Yes)", "output": "Paris."}
    assert_meets(ResponseRelevance(judge=judge), **fields)  # 0.75 >= 0.5
    with pytest.raises(AssertionError, match="below the threshold 0.9"):
        assert_meets(ResponseRelevance(judge=judge), threshold=0.9, **fields)


def test_a_failed_evaluation_is_an_assertion_error_with_the_reason(judge_simulator):
    judge = sim_judge(judge_simulator, max_retries=0)
    with pytest.raises(AssertionError, match="evaluation failed"):
        assert_meets(
            RetrievalRelevance(judge=judge),
            input="Which city? @sim(fault=refusal)",
            context=["Paris is in France."],
        )


@pytest.mark.skipif(not local_model_available(), reason="offline model not installed")
def test_framekit_judge_fixture_defaults_to_the_offline_judge(framekit_judge, monkeypatch):
    assert isinstance(framekit_judge, LocalJudge)
    score = assert_meets(
        RetrievalRelevance(),
        judge=framekit_judge,
        input="Who wrote Hamlet?",
        context=["Hamlet is a tragedy written by William Shakespeare."],
    )
    assert score.explanation is not None and "similarity proxy" in score.explanation


def test_framekit_judge_env_picks_an_llm_judge_for_the_same_test(judge_simulator, monkeypatch):
    from framekit.testing.pytest_plugin import judge_from_env
    from tests.helpers import API_KEY

    monkeypatch.setenv("FRAMEKIT_JUDGE", "openai/sim-judge")
    monkeypatch.setenv("FRAMEKIT_API_BASE", judge_simulator.api_base)
    monkeypatch.setenv("FRAMEKIT_API_KEY", API_KEY)
    judge = judge_from_env()
    assert not isinstance(judge, LocalJudge) and judge.model == "openai/sim-judge"
    assert_meets(
        ResponseRelevance(judge=judge),
        input="What is the capital of France? @sim(label=Generally Yes)",
        output="Paris.",
    )
    assert judge_simulator.stats()["by_status"] == {200: 1}
