"""Rubric evaluators against the judge simulator: labels, scores, thresholds, options."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import (
    ClassificationEvaluator,
    Coherence,
    ContextRelevance,
    ResponseRelevance,
    RetrievalRelevance,
    RubricEvaluator,
)

FIVE_LEVELS = {
    "Not At All": 0.0,
    "Not Generally": 0.25,
    "Neutral/Mixed": 0.5,
    "Generally Yes": 0.75,
    "Completely Yes": 1.0,
}


def sim_judge(sim: Any) -> fk.Judge:
    return fk.Judge("openai/sim", api_base=sim.api_base, api_key="sk-test")


# (factory, expected choices, row builder: label -> the record's fields)
CASES: dict[str, tuple[Callable[..., RubricEvaluator], dict[str, float], Callable[[str], dict]]] = {
    "response_relevance": (
        ResponseRelevance,
        FIVE_LEVELS,
        lambda label: {
            "input": "How do I reset my password?",
            "output": f"Use Settings. @sim(label={label})",
        },
    ),
    "coherence": (
        Coherence,
        FIVE_LEVELS,
        lambda label: {
            "input": "Why?",
            "output": f"Because it rains, the road is wet. @sim(label={label})",
        },
    ),
    "context_relevance": (
        ContextRelevance,
        {"high": 1.0, "medium": 0.5, "low": 0.0},
        lambda label: {
            "input": f"Capital of France? @sim(label={label})",
            "context": ["Paris.", "Rome."],
        },
    ),
    "retrieval_relevance": (
        RetrievalRelevance,
        {"relevant": 1.0, "irrelevant": 0.0},
        lambda label: {"input": f"Capital of France? @sim(label={label})", "context": ["Paris."]},
    ),
    "tone": (
        lambda **kw: ClassificationEvaluator(
            "tone",
            "Is this reply polite?\n{output}",
            {"polite": 1.0, "neutral": 0.5, "rude": 0.0},
            **kw,
        ),
        {"polite": 1.0, "neutral": 0.5, "rude": 0.0},
        lambda label: {"output": f"Thanks for asking! @sim(label={label})"},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_every_label_maps_to_its_score_and_passed_flips_at_the_threshold(
    name, judge_simulator, tmp_path
):
    factory, choices, row = CASES[name]
    assert factory().choices == choices
    df = pl.DataFrame([row(label) for label in choices])
    judge = sim_judge(judge_simulator)
    out = fk.evaluate_dataframe(df, [factory()], judge=judge, cache=tmp_path, progress=False)
    assert out[f"{name}_label"].to_list() == list(choices)
    assert out[f"{name}_score"].to_list() == list(choices.values())
    assert out[f"{name}_error"].null_count() == df.height
    assert judge_simulator.stats()["chat"] == len(choices)

    # A threshold equal to a label's score passes it; the next step up fails it. Reruns
    # come from the cache: the threshold is not part of the request.
    for score in sorted(set(choices.values())):
        for threshold, passes in ((score, True), (min(1.0, score + 0.01), score == 1.0)):
            out = fk.evaluate_dataframe(
                df, [factory(threshold=threshold)], judge=judge, cache=tmp_path, progress=False
            )
            at = out.filter(pl.col(f"{name}_score") == score)
            assert at[f"{name}_passed"].to_list() == [passes] * at.height, (score, threshold)
    assert judge_simulator.stats()["chat"] == len(choices)


def test_default_thresholds_match_the_design():
    assert [ev.threshold for ev in (ResponseRelevance(), Coherence(), ContextRelevance())] == [
        0.5
    ] * 3


def test_score_one_record_carries_judge_and_template_version(judge_simulator):
    score = ResponseRelevance().score(
        input="What is 2+2?",
        output="4. @sim(label=Neutral/Mixed)",
        judge=sim_judge(judge_simulator),
        cache=False,
    )
    assert (score.value, score.label, score.passed) == (0.5, "Neutral/Mixed", True)
    assert score.metadata["judge"] == "openai/sim"
    assert score.metadata["template_version"] == "v1"
    assert score.explanation


def test_explanation_comes_before_the_label_in_the_answer_schema(judge_simulator):
    ResponseRelevance().score(input="q", output="a", judge=sim_judge(judge_simulator), cache=False)
    body = judge_simulator.requests[0]
    schema = body["response_format"]["json_schema"]["schema"]
    assert list(schema["properties"]) == ["explanation", "label"]
    assert schema["properties"]["label"]["enum"] == list(FIVE_LEVELS)


@pytest.mark.parametrize("factory", [ResponseRelevance, Coherence])
def test_include_inputs_false_leaves_the_request_out_of_the_prompt(factory, judge_simulator):
    judge = sim_judge(judge_simulator)
    fields = {"input": "How tall is the Eiffel tower?", "output": "About 330 metres."}
    factory().score(**fields, judge=judge, cache=False)
    factory(include_inputs=False).score(**fields, judge=judge, cache=False)
    with_input, without = (r["messages"][1]["content"] for r in judge_simulator.requests)
    assert "[BEGIN DATA: input]" in with_input and "Eiffel tower" in with_input
    assert "[BEGIN DATA: input]" not in without and "Eiffel tower" not in without
    assert "[BEGIN DATA: output]\nAbout 330 metres.\n[END DATA: output]" in without
    assert judge_simulator.stats()["chat"] == 2


@pytest.mark.parametrize("factory", [ResponseRelevance, Coherence, ContextRelevance])
def test_system_prompt_replaces_the_built_in_instructions(factory, judge_simulator):
    judge = sim_judge(judge_simulator)
    fields = {"input": "q", "output": "a", "context": ["d"]}
    fields = {k: v for k, v in fields.items() if k in factory().fields}
    factory().score(**fields, judge=judge, cache=False)
    factory(system_prompt="Be terse. Judge strictly.").score(**fields, judge=judge, cache=False)
    built_in, custom = (r["messages"][0]["content"] for r in judge_simulator.requests)
    assert custom == "Be terse. Judge strictly."
    assert built_in != custom and "[BEGIN DATA" in built_in
    # The data is unchanged: only the instructions differ.
    assert judge_simulator.requests[0]["messages"][1] == judge_simulator.requests[1]["messages"][1]


def test_v0_rubrics_stay_selectable_for_earlier_runs():
    # The default (v1) follows the source documents (tests/test_fidelity.py); v0 is kept
    # word for word so earlier scores and their cache entries reproduce.
    relevance = ResponseRelevance(version="v0").system_prompt
    for phrase in ("not factual accuracy", "I can't answer that", "Repetition is not penalised"):
        assert phrase in relevance
    coherence = Coherence(version="v0").system_prompt
    for phrase in (
        "Contradictions",
        "earlier turns",
        "Gaps in logic",
        "not whether the facts are true",
        "needs no reasoning",
    ):
        assert phrase in coherence


def test_unknown_template_version_lists_the_known_ones():
    with pytest.raises(fk.InputError, match=r"no template version 'v9'.*known versions: v0"):
        Coherence(version="v9")


def test_describe_shows_fields_scale_threshold_and_version():
    text = ResponseRelevance(threshold=0.75).describe()
    assert "required input, output; optional history" in text
    assert (
        "Not At All 0, Not Generally 0.25, Neutral/Mixed 0.5, Generally Yes 0.75, Completely Yes 1"
        in text
    )
    assert ">= 0.75" in text and "version=v1" in text
    assert "high 1, medium 0.5, low 0" in ContextRelevance().describe()
    assert "required output; optional input, history" in Coherence().describe()


def test_custom_rubric_can_minimize(judge_simulator):
    toxicity = ClassificationEvaluator(
        "toxicity", "Is this toxic?\n{output}", {"toxic": 1.0, "clean": 0.0}, direction="minimize"
    )
    judge = sim_judge(judge_simulator)
    clean = toxicity.score(output="Have a nice day @sim(label=clean)", judge=judge, cache=False)
    toxic = toxicity.score(output="You fool @sim(label=toxic)", judge=judge, cache=False)
    assert (clean.value, clean.passed) == (0.0, True)
    assert (toxic.value, toxic.passed) == (1.0, False)
    assert "<= 0.5" in toxicity.describe()


def test_an_empty_or_missing_record_raises_value_error_without_a_call(judge_simulator):
    judge = sim_judge(judge_simulator)
    empty = ContextRelevance().score(
        input="Capital of France?", context=[], judge=judge, cache=False
    )
    assert (empty.value, empty.label, empty.explanation) == (
        0.0,
        "low",
        "no documents were retrieved",
    )
    with pytest.raises(ValueError, match="'input' is empty"):
        ContextRelevance().score(input="  ", context=["Paris."], judge=judge, cache=False)
    with pytest.raises(ValueError, match="'output' is null"):
        ResponseRelevance().score(input="Hi", judge=judge, cache=False)
    assert judge_simulator.stats()["total"] == 0


def test_context_relevance_numbers_the_documents_and_fails_empty_requests_alone(judge_simulator):
    df = pl.DataFrame(
        {
            "q": ["Capital of France?", "", "Capital of Italy?"],
            "docs": [["Paris is the capital.", "Lyon is a city."], ["x"], []],
        },
        schema={"q": pl.String, "docs": pl.List(pl.String)},
    )
    out = fk.evaluate_dataframe(
        df,
        [ContextRelevance()],
        {"input": "q", "context": "docs"},
        judge=sim_judge(judge_simulator),
        cache=False,
        progress=False,
    )
    assert out["context_relevance_error"].to_list() == [None, "field 'input' is empty", None]
    # An empty request fails its row; an empty retrieval is "low" 0 without a call.
    assert out["context_relevance_score"].to_list()[1:] == [None, 0.0]
    assert out["context_relevance_explanation"][2] == "no documents were retrieved"
    assert judge_simulator.stats()["chat"] == 1
    prompt = judge_simulator.requests[0]["messages"][1]["content"]
    assert "Document 1:\nParis is the capital.\n\nDocument 2:\nLyon is a city." in prompt


def test_missing_required_field_is_an_error_before_any_call(judge_simulator):
    df = pl.DataFrame({"question": ["q"], "answer": ["a"]})
    with pytest.raises(fk.MappingError, match="needs field 'output'.*'question', 'answer'"):
        fk.evaluate_dataframe(
            df,
            [Coherence()],
            {"input": "question"},
            judge=sim_judge(judge_simulator),
            cache=False,
            progress=False,
        )
    assert judge_simulator.stats()["total"] == 0


def test_prompt_template_is_readable_and_replaceable(judge_simulator):
    ev = ResponseRelevance()
    assert "{input}" in ev.prompt_template and "{output}" in ev.prompt_template
    assert "{input}" not in ResponseRelevance(include_inputs=False).prompt_template
    ev.prompt_template = "Q: {input}\nA: {output}\nRate how on-topic A is."
    ev.score(
        input="Why is the sky blue?",
        output="Rayleigh scattering.",
        judge=sim_judge(judge_simulator),
        cache=False,
    )
    user = judge_simulator.requests[0]["messages"][1]["content"]
    assert user == (
        "Q: [BEGIN DATA: input]\nWhy is the sky blue?\n[END DATA: input]\n"
        "A: [BEGIN DATA: output]\nRayleigh scattering.\n[END DATA: output]\nRate how on-topic A is."
    )


def test_custom_rubric_without_explanation_asks_only_for_the_label(judge_simulator):
    terse = ClassificationEvaluator(
        "terse", "Is this short?\n{output}", {"short": 1.0, "long": 0.0}, include_explanation=False
    )
    score = terse.score(
        output="Yes. @sim(label=short)", judge=sim_judge(judge_simulator), cache=False
    )
    schema = judge_simulator.requests[0]["response_format"]["json_schema"]["schema"]
    assert list(schema["properties"]) == ["label"]
    assert (score.value, score.label, score.explanation) == (1.0, "short", None)
