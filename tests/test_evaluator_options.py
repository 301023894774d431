"""The keywords every evaluator shares are one options value, and ``judge=`` is their one
spelling of the judge: ``llm=`` and ``model=`` still work, with a DeprecationWarning that
points at the caller's line."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

import framekit as fk
from framekit.evaluators import (
    AnswerRelevancy,
    ClassificationEvaluator,
    Coherence,
    ContextRecall,
    ContextRelevance,
    Groundedness,
    ResponseRelevance,
    RetrievalRelevance,
)
from framekit.evaluators.base import EvaluatorOptions


def _classification(name: str = "tone", **kw: Any) -> ClassificationEvaluator:
    return ClassificationEvaluator(name, "Polite?\n{output}", {"polite": 1.0, "rude": 0.0}, **kw)


FACTORIES = [
    ResponseRelevance,
    Coherence,
    AnswerRelevancy,
    ContextRelevance,
    RetrievalRelevance,
    Groundedness,
    ContextRecall,
    _classification,
]


@pytest.mark.parametrize("alias", ["llm", "model"])
@pytest.mark.parametrize("factory", FACTORIES)
def test_llm_and_model_still_give_the_judge_with_a_deprecation_warning(factory, alias) -> None:
    with pytest.warns(
        DeprecationWarning, match=f"{alias}= is deprecated; pass the judge as judge="
    ) as seen:
        ev = factory(**{alias: "openai/gpt-4o-mini"})
    assert ev.judge == "openai/gpt-4o-mini"
    # The warning names the line that called the constructor, not framekit's own code.
    assert [w.filename for w in seen] == [__file__]


@pytest.mark.parametrize("factory", FACTORIES)
def test_judge_is_the_one_spelling_and_warns_of_nothing(factory) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ev = factory(judge="openai/gpt-4o-mini")
    assert ev.judge == "openai/gpt-4o-mini"


@pytest.mark.parametrize("factory", FACTORIES)
def test_two_spellings_of_the_judge_at_once_are_an_input_error(factory) -> None:
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(fk.InputError, match="give the judge once"),
    ):
        factory(judge="openai/a", model="openai/b")


@pytest.mark.parametrize("factory", FACTORIES)
def test_every_evaluator_takes_every_shared_option(factory) -> None:
    ev = factory(
        name="mine", threshold=0.25, judge="openai/gpt-4o-mini", direction="minimize",
        scoring="expected", temperature=0.5, max_tokens=300, top_p=0.9, seed=7, stop=["END"],
    )  # fmt: skip
    assert (ev.name, ev.threshold, ev.judge) == ("mine", 0.25, "openai/gpt-4o-mini")
    assert (ev.direction, ev.scoring) == ("minimize", "expected")
    assert ev.judge_options == {
        "temperature": 0.5, "max_tokens": 300, "top_p": 0.9, "seed": 7, "stop": ["END"]
    }  # fmt: skip
    # The options value declares exactly what was passed here, once.
    assert EvaluatorOptions.__optional_keys__ == {
        "name", "threshold", "judge", "direction", "scoring",
        "temperature", "max_tokens", "top_p", "seed", "stop",
        "presence_penalty", "frequency_penalty", "reasoning_effort",
    }  # fmt: skip


def test_an_unknown_option_is_still_named_as_a_near_miss() -> None:
    with pytest.raises(TypeError, match="Did you mean 'temperature'"):
        ResponseRelevance(temprature=0.2)  # type: ignore[call-arg]


def test_phoenix_positional_judge_still_reads_and_is_not_deprecated() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ev = ClassificationEvaluator(
            "relevance", "openai/gpt-4o-mini", "Relevant?\n{input}", {"yes": 1.0, "no": 0.0}
        )
    assert ev.judge == "openai/gpt-4o-mini" and ev.required_fields == ("input",)
    with pytest.raises(fk.InputError, match="given twice"):
        ClassificationEvaluator(
            "relevance", "openai/a", "Relevant?\n{input}", {"yes": 1.0, "no": 0.0},
            judge="openai/b",
        )  # fmt: skip
