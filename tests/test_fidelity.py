"""Seed fidelity: each evaluator asks the question its source document asks.

One table (SOURCE_CRITERIA) names, per evaluator, the source section it follows and the
phrases carrying that source's criteria; the tests check the *rendered* prompt of the
default template, the label-to-score map, the threshold, what an empty input does, and
the names a user migrating from each source would type.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit.data import load_sample
from framekit.engine.dryrun import plan_requests
from framekit.evaluators import (
    AnswerRelevancy,
    ClassificationEvaluator,
    Coherence,
    ContextRelevance,
    ResponseRelevance,
    RetrievalRelevance,
)
from framekit.evaluators.base import Evaluator
from framekit.evaluators.rubric import GENERIC_SYSTEM

FIVE = {
    "Not At All": 0.0,
    "Not Generally": 0.25,
    "Neutral/Mixed": 0.5,
    "Generally Yes": 0.75,
    "Completely Yes": 1.0,
}

# evaluator -> (source and section followed by template v1, phrases of its criteria that
# the rendered prompt must contain, label -> score, default threshold, sample fields).
SOURCE_CRITERIA: dict[
    str, tuple[str, tuple[str, ...], dict[str, float] | None, float, dict[str, Any]]
] = {
    "response_relevance": (
        "Strands Agents evals, ResponseRelevanceEvaluator prompt template: rating scale "
        "and the step-by-step instruction",
        (
            "directly and fully addresses the question",  # the top level
            "misses key aspects",  # incompleteness lowers the rating
            "Relevance is not correctness",
            "Think step by step",  # reasoning before the rating
        ),
        FIVE,
        0.5,
        {"input": "How do I reset my password?", "output": "Open Settings > Security."},
    ),
    "coherence": (
        "Strands Agents evals, CoherenceEvaluator prompt template: evaluation criteria "
        "and rating scale (template v2, with its reasoning criteria)",
        (
            "Self-contradictions",
            "Logic gaps and errors",
            "Soundness of the reasoning, not of the claims",
            "Tool output over the model's own claims",
            "Flow and organisation",
            "both coherent and incoherent elements",  # the source's Neutral/Mixed
            "Think step by step",
        ),
        FIVE,
        0.5,
        {"input": "Why is the road wet?", "output": "It rained. So the road is wet."},
    ),
    "answer_relevancy": (
        "ByteVeda agenteval, AnswerRelevancy: question regeneration, strict_mode",
        (
            "a question a user could have asked for which this response is the answer",
            "noncommittal",
            "answers a different question than the one asked",  # strict mode's penalty
        ),
        None,
        0.7,
        {"input": "What is the capital of France?", "output": "Paris."},
    ),
    "context_relevance": (
        "Fiddler, ContextRelevance evaluator: high / medium / low definitions",
        (
            "directly and completely answers the query",  # high
            "on topic (they concern what the query asks about) but do",  # medium...
            "not provide a complete answer",  # ...is on topic, incomplete
            "off topic or irrelevant",  # low
            "Irrelevant documents alongside the ones that answer it do not lower the rating",
            "Think step by step",
        ),
        {"high": 1.0, "medium": 0.5, "low": 0.0},
        0.5,
        {"input": "Capital of France?", "context": ["Paris is the capital.", "Rome."]},
    ),
    "retrieval_relevance": (
        "Arize Phoenix, Retrieval Relevance classification template: label definitions",
        (
            "even when the relevant information is mixed with unrelated",
            "different entity",
            "different time period",
            "only tangentially",
            "empty or an error message",
            "Think step by step",
        ),
        {"relevant": 1.0, "irrelevant": 0.0},
        0.5,
        {"input": "Capital of France?", "context": ["Paris is the capital."]},
    ),
}

FACTORIES = {
    "response_relevance": ResponseRelevance,
    "coherence": Coherence,
    "answer_relevancy": lambda **kw: AnswerRelevancy(strict_mode=True, **kw),
    "context_relevance": ContextRelevance,
    "retrieval_relevance": RetrievalRelevance,
}


def sim_judge(sim: Any) -> fk.Judge:
    return fk.Judge("openai/sim", api_base=sim.api_base, api_key="sk-test")


def rendered(ev: Evaluator, fields: dict[str, Any]) -> str:
    """System and user text of the request the evaluator would send (whitespace folded)."""
    request = ev.build_request(ev.prepare(fields))
    text = "\n".join(str(m["content"]) for m in request.messages)
    return " ".join(text.split())


# -- the source's question ----------------------------------------------------------------


#: The default template version where it is not v1 (Coherence's v2 asks about reasoning;
#: the context evaluators' v2 is v1 laid out for the provider's prompt cache).
DEFAULT_VERSIONS = {"coherence": "v2", "context_relevance": "v2", "retrieval_relevance": "v2"}


@pytest.mark.parametrize("name", list(SOURCE_CRITERIA))
def test_default_prompt_asks_the_source_question(name):
    source, phrases, _, _, fields = SOURCE_CRITERIA[name]
    ev = FACTORIES[name]()
    version = DEFAULT_VERSIONS.get(name, "v1")
    assert ev.version == version
    prompt = rendered(ev, fields)
    missing = [p for p in phrases if " ".join(p.split()) not in prompt]
    assert not missing, f"{name} prompt lacks {missing} (source: {source})"
    assert f"template: {name} {version}" in ev.describe() and "asks: " in ev.describe()
    # v0 is a different question, kept only for reproducing earlier runs.
    assert rendered(FACTORIES[name](version="v0"), fields) != prompt


@pytest.mark.parametrize("name", list(SOURCE_CRITERIA))
def test_labels_scores_and_threshold_match_the_source(name):
    _, _, choices, threshold, _ = SOURCE_CRITERIA[name]
    ev = FACTORIES[name]()
    assert ev.threshold == threshold
    if choices is not None:
        assert ev.choices == choices


@pytest.mark.parametrize("name", [n for n, row in SOURCE_CRITERIA.items() if row[2] is not None])
def test_the_judge_reasons_before_it_labels(name):
    fields = SOURCE_CRITERIA[name][4]
    ev = FACTORIES[name]()
    schema = ev.build_request(ev.prepare(fields)).schema
    assert list(schema["properties"]) == ["explanation", "label"]
    assert "Step-by-step" in schema["properties"]["explanation"]["description"]


def test_each_template_file_names_its_source_and_its_differences():
    from importlib import resources

    sources = {
        "response_relevance": "Strands Agents' ResponseRelevanceEvaluator",
        "coherence": "Strands Agents' CoherenceEvaluator",
        "answer_relevancy": "ByteVeda agenteval's AnswerRelevancy",
        "context_relevance": "Fiddler's ContextRelevance",
        "retrieval_relevance": "Arize Phoenix's Retrieval Relevance",
    }
    folder = resources.files("framekit.evaluators.templates")
    for name, source in sources.items():
        lines = folder.joinpath(f"{name}.toml").read_text("utf-8").split("[v1]")[0].splitlines()
        header = " ".join(line.lstrip("#").strip() for line in lines)
        assert source in header and "Deliberate differences from the source" in header, name
        assert "could not be checked" in header, name  # honest about what was verified


def test_versions_are_separate_cache_entries_and_v0_still_hits_its_cache(judge_simulator, tmp_path):
    df = pl.DataFrame({"input": ["Why is the sky blue?"], "output": ["Rayleigh scattering."]})
    judge = sim_judge(judge_simulator)

    def run(version: str) -> None:
        fk.evaluate_dataframe(
            df, [ResponseRelevance(version=version)], judge=judge, cache=tmp_path, progress=False
        )

    run("v0")
    run("v0")
    assert judge_simulator.stats()["chat"] == 1
    run("v1")
    run("v1")
    assert judge_simulator.stats()["chat"] == 2


# -- empty inputs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("factory", "label"), [(RetrievalRelevance, "irrelevant"), (ContextRelevance, "low")]
)
@pytest.mark.parametrize("empty", [[], None, ["", "  "], ""])
def test_an_empty_retrieval_scores_the_lowest_label_without_a_call(
    judge_simulator, factory, label, empty
):
    for judge in (sim_judge(judge_simulator), "local"):
        score = factory().score(input="Capital of France?", context=empty, judge=judge, cache=False)
        assert (score.value, score.label, score.passed, score.error) == (0.0, label, False, None)
        assert score.explanation == "no documents were retrieved"
    assert judge_simulator.stats()["total"] == 0


def test_an_empty_retrieval_is_not_counted_as_a_request_in_a_dry_run():
    df = pl.DataFrame(
        {"input": ["a?", "b?", "c?"], "context": [["A."], [], None]},
        schema={"input": pl.String, "context": pl.List(pl.String)},
    )
    plan = plan_requests(
        [df], [RetrievalRelevance()], None, judge="openai/gpt-4o-mini", cache=False
    )
    assert (plan.requests, plan.skipped) == (1, 0)


@pytest.mark.parametrize(
    ("factory", "fields", "message"),
    [
        (ResponseRelevance, {"input": "Hi?", "output": "  "}, "'output' is empty"),
        (Coherence, {"output": ""}, "'output' is empty"),
        (AnswerRelevancy, {"input": "Hi?", "output": ""}, "'output' is empty"),
        (RetrievalRelevance, {"input": " ", "context": ["x"]}, "'input' is empty"),
        (ContextRelevance, {"input": None, "context": ["x"]}, "'input' is null"),
    ],
)
def test_an_empty_request_or_response_fails_its_record_without_a_call(
    judge_simulator, factory, fields, message
):
    with pytest.raises(ValueError, match=message):
        factory().score(**fields, judge=sim_judge(judge_simulator), cache=False)
    assert judge_simulator.stats()["total"] == 0


def test_retrieving_nothing_for_a_fifth_of_questions_lowers_retrieval_relevance(judge_simulator):
    """The must-show: empty retrievals count as 0, so they cannot flatter a strategy."""
    dense = load_sample().filter(pl.col("strategy") == "dense").sort("question_id")
    assert dense.height == 100
    # The same strategy, but its retriever returns nothing for every fifth question.
    blank = pl.col("question_id") % 5 == 0
    flaky = dense.with_columns(
        pl.when(blank)
        .then(pl.lit([], dtype=pl.List(pl.String)))
        .otherwise(pl.col("documents"))
        .alias("documents")
    )
    mapping = {"input": "question", "context": "documents"}
    judges = [("simulator", sim_judge(judge_simulator)), ("local", "local")]
    for kind, judge in judges:
        try:
            with_empty = fk.evaluate_dataframe(
                flaky, [RetrievalRelevance()], mapping, judge=judge, cache=False, progress=False
            )
        except fk.LocalModelError as exc:  # pragma: no cover - depends on the install
            pytest.skip(f"offline model unavailable: {exc}")
        removed = fk.evaluate_dataframe(
            flaky.filter(~blank),
            [RetrievalRelevance()],
            mapping,
            judge=judge,
            cache=False,
            progress=False,
        )
        scores = with_empty["retrieval_relevance_score"]
        assert scores.null_count() == 0, kind  # no row drops out of the mean
        assert with_empty.filter(blank)["retrieval_relevance_score"].to_list() == [0.0] * 20
        mean_with, mean_removed = scores.mean(), removed["retrieval_relevance_score"].mean()
        assert mean_removed > 0, kind
        assert mean_with < mean_removed, kind
        # The judged rows agree, so the whole difference is the empties' zeros.
        assert mean_with == pytest.approx(0.8 * mean_removed), kind
    assert judge_simulator.stats()["chat"] == 80 * 2  # empties never reached the judge


# -- include_inputs -------------------------------------------------------------------------


@pytest.mark.parametrize("factory", [ResponseRelevance, Coherence])
def test_include_inputs_false_leaves_the_request_out_and_does_not_require_it(
    factory, judge_simulator
):
    df = pl.DataFrame({"answer": ["About 330 metres."]})
    out = fk.evaluate_dataframe(
        df,
        [factory(include_inputs=False)],
        {"output": "answer"},
        judge=sim_judge(judge_simulator),
        cache=False,
        progress=False,
    )
    assert out[f"{factory().name}_error"][0] is None
    user = judge_simulator.requests[0]["messages"][1]["content"]
    assert "[BEGIN DATA: input]" not in user and "About 330 metres." in user
    # With the request mapped, it is still left out.
    factory(include_inputs=False).score(
        input="How tall is the Eiffel tower?",
        output="About 330 metres.",
        judge=sim_judge(judge_simulator),
        cache=False,
    )
    assert "Eiffel" not in judge_simulator.requests[-1]["messages"][1]["content"]


def test_include_inputs_true_still_requires_the_request():
    with pytest.raises(fk.MappingError, match="needs field 'input'"):
        fk.evaluate_dataframe(
            pl.DataFrame({"answer": ["x"]}),
            [ResponseRelevance()],
            {"output": "answer"},
            judge="local",
            cache=False,
            progress=False,
        )


@pytest.mark.parametrize(
    ("factory", "why"),
    [
        (RetrievalRelevance, "judged against the request"),
        (ContextRelevance, "judged against the request"),
        (AnswerRelevancy, "compares the questions the response answers with the request"),
        (
            lambda **kw: ClassificationEvaluator(
                "t", "Polite? {output}", {"y": 1.0, "n": 0.0}, **kw
            ),
            "leave the {input} placeholder out",
        ),
    ],
)
def test_include_inputs_false_is_refused_where_it_has_no_meaning(factory, why):
    with pytest.raises(fk.InputError, match="include_inputs=False has no meaning") as info:
        factory(include_inputs=False)
    assert why in str(info.value)
    assert factory(include_inputs=True).include_inputs is True


def test_include_inputs_false_with_the_offline_judge_compares_with_earlier_turns():
    history = [{"role": "user", "content": "Tell me about compost."}]
    ev = ResponseRelevance(include_inputs=False)
    record = ev.prepare(
        {"input": "Unrelated request text", "output": "Compost needs air.", "history": history}
    )
    assert ev.local_texts(record) == ["Tell me about compost.", "Compost needs air."]
    with pytest.raises(ValueError, match="include_inputs=False"):
        ev.local_texts(ev.prepare({"output": "Compost needs air."}))


# -- the names a migrating user types ------------------------------------------------------


def test_threshold_is_positional_for_answer_relevancy_as_in_the_source():
    assert AnswerRelevancy(0.8).threshold == 0.8
    with pytest.raises(fk.InputError, match="threshold must be a number"):
        AnswerRelevancy("openai/gpt-4o")  # type: ignore[arg-type]


@pytest.mark.parametrize("alias", ["llm", "model"])
@pytest.mark.parametrize("factory", list(FACTORIES.values()))
def test_llm_and_model_are_aliases_of_judge(factory, alias, judge_simulator):
    judge = sim_judge(judge_simulator)
    assert factory(**{alias: judge}).judge is judge
    with pytest.raises(fk.InputError, match="give the judge once"):
        factory(judge=judge, **{alias: "openai/other"})


def test_fiddler_field_names_work_in_score_and_in_a_mapping(judge_simulator):
    judge = sim_judge(judge_simulator)
    ev = ContextRelevance(model=judge)
    score = ev.score(
        user_query="Capital of France? @sim(label=medium)",
        retrieved_documents=["France is in Europe."],
        cache=False,
    )
    assert (score.value, score.label) == (0.5, "medium")
    assert score.reasoning == score.explanation and score.score == score.value
    prompt = judge_simulator.requests[0]["messages"][1]["content"]
    assert "France is in Europe." in prompt and "Capital of France?" in prompt

    df = pl.DataFrame(
        {"q": ["Capital of France? @sim(label=high)"], "docs": [["Paris is the capital."]]}
    )
    out = fk.evaluate_dataframe(
        df, [ev], {"user_query": "q", "retrieved_documents": "docs"}, cache=False, progress=False
    )
    assert out["context_relevance_label"].to_list() == ["high"]
    # Columns already named as Fiddler names them need no mapping at all.
    named = df.rename({"q": "user_query", "docs": "retrieved_documents"})
    again = fk.evaluate_dataframe(named, [ev], cache=False, progress=False)
    assert again["context_relevance_label"].to_list() == ["high"]
    # "reference" often names a gold answer: only an explicit mapping reads it as context.
    gold = pl.DataFrame({"input": ["Capital of France?"], "reference": ["Paris"]})
    with pytest.raises(fk.MappingError, match="needs field 'context'"):
        fk.evaluate_dataframe(gold, [ev], cache=False, progress=False)
    with pytest.raises(fk.MappingError, match="given twice"):
        fk.evaluate_dataframe(
            df,
            [ev],
            {"input": "q", "user_query": "q", "context": "docs"},
            cache=False,
            progress=False,
        )


def test_score_and_reasoning_are_read_only_aliases():
    s = fk.Score(name="x", value=0.5, label="medium", explanation="on topic, incomplete")
    assert (s.score, s.reasoning) == (0.5, "on topic, incomplete")
    with pytest.raises(AttributeError):
        s.score = 1.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.value = 1.0  # type: ignore[misc]


# A template as Phoenix users copy it: its own rubric, f-string or mustache placeholders,
# and Phoenix's names ({input} the question, {reference} the retrieved text).
PHOENIX_TEMPLATE = """You are comparing a reference text to a question and trying to determine if the
reference text contains information relevant to answering the question. Here is the data:
    [BEGIN DATA]
    ************
    [Question]: {{input}}
    ************
    [Reference text]: {reference}
    ************
    [END DATA]
Compare the Question above to the Reference text. You must determine whether the Reference
text contains information that can answer the Question. "unrelated" means that the
reference text does not contain an answer to the Question. "relevant" means the reference
text contains an answer to the Question."""


def test_a_copied_phoenix_template_runs_with_its_own_rubric(judge_simulator):
    judge = sim_judge(judge_simulator)
    ev = ClassificationEvaluator(
        name="relevance",
        llm=judge,
        prompt_template=PHOENIX_TEMPLATE,
        choices={"relevant": 1.0, "unrelated": 0.0},
    )
    # {reference} shows the reference field, read from the column of that name.
    assert ev.required_fields == ("input", "reference")
    df = pl.DataFrame(
        {
            "input": ["Capital of France? @sim(label=relevant)"],
            "reference": ["Paris is the capital."],
        }
    )
    out = fk.evaluate_dataframe(
        df, [ev], {"input": "input", "reference": "reference"}, cache=False, progress=False
    )
    assert (out["relevance_label"][0], out["relevance_score"][0]) == ("relevant", 1.0)
    system, user = judge_simulator.requests[0]["messages"]
    # The template is the instruction; the system message adds only the data rule.
    assert "You are comparing a reference text to a question" in user["content"]
    # The reference text as written (Phoenix numbers nothing); a list would be numbered.
    assert (
        "[BEGIN DATA: reference]\nParis is the capital.\n[END DATA: reference]" in user["content"]
    )
    assert (
        "Reason briefly" not in system["content"] and "exactly one label" not in system["content"]
    )
    assert "untrusted data" in system["content"]

    # system_prompt="" sends the template alone, exactly as Phoenix did.
    bare = ClassificationEvaluator(
        "relevance", judge, PHOENIX_TEMPLATE, {"relevant": 1.0, "unrelated": 0.0}, system_prompt=""
    )
    bare.score(input="Capital of Italy?", reference="Rome is the capital.", cache=False)
    assert [m["role"] for m in judge_simulator.requests[-1]["messages"]] == ["user"]
    # The earlier generic prompt stays available to reproduce earlier runs.
    old = ClassificationEvaluator(
        "relevance",
        PHOENIX_TEMPLATE,
        {"relevant": 1.0, "unrelated": 0.0},
        system_prompt=GENERIC_SYSTEM,
    )
    assert (
        old.build_request(old.prepare({"input": "q", "reference": "d"})).messages[0]["content"]
        == GENERIC_SYSTEM
    )


def test_phoenix_choices_with_descriptions_and_positional_order():
    ev = ClassificationEvaluator(
        "relevance",
        "openai/gpt-4o-mini",
        PHOENIX_TEMPLATE,
        {"relevant": (1.0, "holds an answer"), "unrelated": (0.0, "holds none")},
    )
    assert ev.judge == "openai/gpt-4o-mini" and ev.choices == {"relevant": 1.0, "unrelated": 0.0}
    label = ev.answer_schema()["properties"]["label"]
    assert label["description"] == "relevant: holds an answer; unrelated: holds none"
    with pytest.raises(fk.InputError, match="map each label to a score"):
        ClassificationEvaluator("r", PHOENIX_TEMPLATE, ["relevant", "unrelated"])


def test_fiddler_column_names_stream_through_evaluate_parquet(judge_simulator, tmp_path):
    source, destination = tmp_path / "in.parquet", tmp_path / "out.parquet"
    pl.DataFrame(
        {
            "id": [1, 2],
            "user_query": ["Capital of France? @sim(label=high)", "Capital of Peru?"],
            "retrieved_documents": [["Paris is the capital."], []],
        },
        schema={"id": pl.Int64, "user_query": pl.String, "retrieved_documents": pl.List(pl.String)},
    ).write_parquet(source)
    fk.evaluate_parquet(
        source,
        destination,
        [ContextRelevance()],
        judge=sim_judge(judge_simulator),
        cache=False,
        progress=False,
    )
    out = pl.read_parquet(destination)
    assert out["context_relevance_label"].to_list() == ["high", "low"]
    assert out["context_relevance_explanation"][1] == "no documents were retrieved"
    assert judge_simulator.stats()["chat"] == 1
