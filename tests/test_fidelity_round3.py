"""Fidelity, round 3: behaviours of the source projects that framekit now carries over.

Each test here failed on main before issue 27: Coherence's reasoning criteria (Strands),
escaped braces in a copied f-string template, decoding options and ``direction=`` on an
evaluator, a label without an explanation (Phoenix), empty label descriptions, and
message parts joined with a space (Strands).
"""

from __future__ import annotations

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import ClassificationEvaluator, Coherence, RetrievalRelevance, _prompt
from tests.helpers import sim_judge


def folded(text: str) -> str:
    return " ".join(text.split())


# -- Coherence asks about reasoning -----------------------------------------------------------


def test_default_coherence_asks_about_the_soundness_of_the_reasoning():
    ev = Coherence()
    assert ev.version == "v2"
    prompt = folded(ev.system_prompt)
    for phrase in (
        "Self-contradictions",
        "Logic gaps and errors",
        "steps the argument needs but skips",
        "Soundness of the reasoning, not of the claims",
        "reasoning that is flawed loses even when its final answer is right",
        "Tool output over the model's own claims",
        "Flow and organisation",
        "Think step by step",
    ):
        assert phrase in prompt, phrase
    assert "template: coherence v2" in ev.describe()


def test_coherence_v1_stays_selectable_and_keeps_its_cache(judge_simulator, tmp_path):
    v1 = Coherence(version="v1")
    assert "Soundness of the reasoning" not in v1.system_prompt
    assert v1.cache_namespace() == "coherence:v1" != Coherence().cache_namespace()
    judge = sim_judge(judge_simulator)
    for ev in (v1, Coherence(version="v1"), Coherence(), Coherence()):
        ev.score(output="It rained, so the road is wet.", judge=judge, cache=tmp_path)
    assert judge_simulator.stats()["chat"] == 2  # one per version; each re-run is a hit


def test_coherence_shows_tool_output_in_the_history_it_judges_against():
    ev = Coherence()
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "18 C, sunny"},
        {"role": "assistant", "content": "It is raining in Paris."},
    ]  # fmt: skip
    user = ev.build_request(ev.prepare({"history": history})).messages[-1]["content"]
    assert "tool weather: 18 C, sunny" in user and "what tools returned" in user


# -- a copied Phoenix f-string template --------------------------------------------------------


def test_escaped_braces_of_a_copied_f_string_template_reach_the_judge_single(judge_simulator):
    template = (
        "Rate the answer.\n{output}\n"
        'Reply as JSON, for example {{ "temperature": 0.3, "label": "good" }}.'
    )
    ev = ClassificationEvaluator("tone", template, {"good": 1.0, "bad": 0.0})
    ev.score(output="Fine. @sim(label=good)", judge=sim_judge(judge_simulator), cache=False)
    user = judge_simulator.requests[0]["messages"][-1]["content"]
    assert '{ "temperature": 0.3, "label": "good" }' in user
    assert "{{" not in user and "}}" not in user


def test_a_mustache_template_keeps_its_braces_as_written():
    template = 'Question: {{input}}\nAnswer: {{output}}\nFormat: {"k": 1} and {{ "x": 2 }}'
    ev = ClassificationEvaluator("m", template, {"ok": 1.0, "no": 0.0})
    user = ev.build_request(ev.prepare({"input": "q", "output": "a"})).messages[-1]["content"]
    assert 'Format: {"k": 1} and {{ "x": 2 }}' in user
    assert "[BEGIN DATA: input]\nq\n[END DATA: input]" in user


# -- decoding options and direction on an evaluator ---------------------------------------------


def test_decoding_options_on_an_evaluator_override_its_judge_alone(judge_simulator, tmp_path):
    judge = sim_judge(judge_simulator)
    tuned = RetrievalRelevance(name="tuned", temperature=0.3, max_tokens=200, seed=7)
    plain = RetrievalRelevance()
    df = pl.DataFrame({"input": ["Capital of France?"], "context": [["Paris is the capital."]]})
    fk.evaluate_dataframe(df, [tuned, plain], judge=judge, cache=tmp_path, progress=False)
    bodies = sorted(judge_simulator.requests, key=lambda b: b["max_tokens"])
    assert [(b["temperature"], b["max_tokens"], b.get("seed")) for b in bodies] == [
        (0.3, 200, 7),
        (0.0, 1024, None),
    ]
    assert (judge.temperature, judge.max_tokens) == (0.0, 1024)  # the judge is not changed
    assert tuned.judge_options == {"temperature": 0.3, "max_tokens": 200, "seed": 7}
    # Part of the cache key: the same options hit, other options ask again.
    fk.evaluate_dataframe(df, [tuned], judge=judge, cache=tmp_path, progress=False)
    assert judge_simulator.stats()["chat"] == 2
    fk.evaluate_dataframe(
        df, [RetrievalRelevance(temperature=0.9)], judge=judge, cache=tmp_path, progress=False
    )
    assert judge_simulator.stats()["chat"] == 3


def test_decoding_options_reach_the_judge_of_a_single_score(judge_simulator):
    ev = RetrievalRelevance(temperature=0.2, max_tokens=99)
    ev.score(input="q", context=["d"], judge=sim_judge(judge_simulator), cache=False)
    body = judge_simulator.requests[0]
    assert (body["temperature"], body["max_tokens"]) == (0.2, 99)


def test_an_unknown_or_bad_option_names_where_judge_settings_go():
    with pytest.raises(TypeError, match=r"Did you mean 'temperature'.*fk\.Judge\(model"):
        RetrievalRelevance(temprature=0.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'rpm'"):
        Coherence(rpm=10)
    with pytest.raises(fk.InputError, match=r"max_tokens must be an integer >= 1.*fk\.Judge"):
        RetrievalRelevance(max_tokens=0)


def test_direction_on_a_built_in_is_stored_and_decides_passed(judge_simulator):
    ev = RetrievalRelevance(direction="minimize")
    assert ev.direction == "minimize"
    s = ev.score(input="q", context=[], judge=sim_judge(judge_simulator), cache=False)
    assert (s.score, s.direction, s.passed) == (0.0, "minimize", True)
    assert RetrievalRelevance(direction="maximize").direction == "maximize"
    with pytest.raises(fk.InputError, match="direction must be"):
        Coherence(direction="up")


# -- a label without an explanation is a verdict ------------------------------------------------


def test_a_label_without_an_explanation_is_a_verdict(simulator_factory):
    sim = simulator_factory(reply_template='{"label": "relevant"}')
    df = pl.DataFrame({"input": ["q1", "q2"], "context": [["d1"], ["d2"]]})
    out = fk.evaluate_dataframe(
        df, [RetrievalRelevance()], judge=sim_judge(sim), cache=False, progress=False
    )
    assert out["retrieval_relevance_label"].to_list() == ["relevant", "relevant"]
    assert out["retrieval_relevance_score"].to_list() == [1.0, 1.0]
    assert out["retrieval_relevance_explanation"].to_list() == [None, None]
    assert out["retrieval_relevance_error"].to_list() == [None, None]
    stats = fk.last_run()
    assert (stats.failures, stats.reasks, sim.stats()["chat"]) == (0, 0, 2)
    assert fk.summarize(out).filter(pl.col("evaluator") == "retrieval_relevance")["scored"][0] == 2


def test_a_reply_without_its_label_is_still_re_asked(simulator_factory):
    sim = simulator_factory(reply_template='{"explanation": "looks fine"}')
    s = RetrievalRelevance().score(input="q", context=["d"], judge=sim_judge(sim), cache=False)
    assert s.value is None and "lacks label" in s.error and "after 2 re-asks" in s.error
    assert sim.stats()["chat"] == 3


# -- label descriptions --------------------------------------------------------------------------


def test_empty_label_descriptions_are_left_out_of_the_schema():
    ev = ClassificationEvaluator("yn", "Is it so? {output}", {"yes": (1.0, ""), "no": (0.0, "")})
    label = ev.answer_schema()["properties"]["label"]
    assert label == {"type": "string", "enum": ["yes", "no"]}
    some = ClassificationEvaluator(
        "yn", "Is it so? {output}", {"yes": (1.0, "it holds"), "no": (0.0, " ")}
    )
    assert some.answer_schema()["properties"]["label"]["description"] == "yes: it holds"


# -- message parts -------------------------------------------------------------------------------


def test_text_parts_of_a_message_are_joined_with_a_space():
    parts = [{"type": "text", "text": "Book a table"}, {"type": "text", "text": "for two."}]
    assert _prompt.message_text({"role": "user", "content": parts}) == "Book a table for two."
    ev = Coherence()
    history = [{"role": "user", "content": parts}, {"role": "assistant", "content": "Done."}]
    user = ev.build_request(ev.prepare({"history": history})).messages[-1]["content"]
    assert "[BEGIN DATA: input]\nBook a table for two.\n[END DATA: input]" in user
