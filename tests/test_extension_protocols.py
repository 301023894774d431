"""Users' own code at framekit's extension points (issue 40): an embedding backend written
to the documented minimum, message-list templates, decoding options per evaluator."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import AnswerRelevancy

QUESTION = "What is the capital of France?"
RELEVANT = "Paris is the capital of France."
OFF_TOPIC = "Bananas are rich in potassium and dietary fiber."


def sim_judge(sim: Any) -> fk.Judge:
    return fk.Judge("openai/sim", api_base=sim.api_base, api_key="sk-test")


def _bag_of_words(texts: list[str]) -> np.ndarray:
    """A user's own embedder: hashed bag of lower-cased words, unit length."""
    out = np.zeros((len(texts), 128), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in text.lower().replace("?", " ").replace(".", " ").split():
            out[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % 128] += 1.0
        out[i] /= max(float(np.linalg.norm(out[i])), 1e-9)
    return out


class MinimalAsyncBackend:
    """Only the documented required members: model_id and an async embed."""

    model_id = "user/bag-of-words"

    def __init__(self) -> None:
        self.calls = 0

    async def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        return _bag_of_words(texts)


class MinimalSyncBackend:
    """Only the documented required members, with a plain (blocking) embed."""

    model_id = "user/bag-of-words-sync"

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        return _bag_of_words(texts)


@pytest.mark.parametrize("backend_type", [MinimalAsyncBackend, MinimalSyncBackend])
def test_a_backend_with_only_the_required_members_scores_answer_relevancy(
    judge_simulator, tmp_path, backend_type
):
    backend = backend_type()
    df = pl.DataFrame({"input": [QUESTION, QUESTION], "output": [RELEVANT, OFF_TOPIC]})
    ev = AnswerRelevancy(embedding_model=backend)
    out = fk.evaluate_dataframe(
        df, [ev], judge=sim_judge(judge_simulator), cache=tmp_path, progress=False
    )
    assert out["answer_relevancy_error"].to_list() == [None, None]
    relevant, off_topic = out["answer_relevancy_score"].to_list()
    assert relevant > off_topic
    assert backend.calls >= 1
    assert backend.model_id in out["answer_relevancy_explanation"][0]
    assert judge_simulator.stats()["embeddings"] == 0  # the user's code embedded, not the API


def test_a_backend_without_classify_fails_its_rows_not_the_run(judge_simulator, tmp_path):
    class Broken(MinimalAsyncBackend):
        async def embed(self, texts: list[str]) -> np.ndarray:
            raise RuntimeError("my embedder is down")

    df = pl.DataFrame({"input": [QUESTION], "output": [RELEVANT]})
    out = fk.evaluate_dataframe(
        df,
        [AnswerRelevancy(embedding_model=Broken())],
        judge=sim_judge(judge_simulator),
        cache=tmp_path,
        progress=False,
    )
    assert out["answer_relevancy_score"].to_list() == [None]
    assert "my embedder is down" in out["answer_relevancy_error"][0]


def test_a_backend_missing_embed_is_an_input_error_before_any_request(judge_simulator):
    class NoEmbed:
        model_id = "user/nothing"

        def encode(self, texts: list[str]) -> np.ndarray:
            return _bag_of_words(texts)

    with pytest.raises(fk.InputError, match=r"no 'embed'.*embedding backend"):
        ev = AnswerRelevancy(embedding_model=NoEmbed())
        ev.score(input=QUESTION, output=RELEVANT, judge=sim_judge(judge_simulator), cache=False)
    assert judge_simulator.stats()["total"] == 0


# -- invocation parameters per evaluator ----------------------------------------------


def test_two_evaluators_on_one_judge_send_each_their_own_invocation_parameters(
    judge_simulator, tmp_path
):
    from framekit.evaluators import RetrievalRelevance

    judge = sim_judge(judge_simulator)
    cool = RetrievalRelevance(name="cool", temperature=0.0, reasoning_effort="low")
    warm = RetrievalRelevance(name="warm", temperature=0.5, max_tokens=300)
    assert cool.invocation_parameters == {"temperature": 0.0, "reasoning_effort": "low"}
    assert warm.invocation_parameters == {"temperature": 0.5, "max_tokens": 300}
    df = pl.DataFrame({"input": ["Capital of France?"], "context": [["Paris is the capital."]]})
    fk.evaluate_dataframe(df, [cool, warm], judge=judge, cache=tmp_path, progress=False)
    sent = sorted(
        (b["temperature"], b["max_tokens"], b.get("reasoning_effort"))
        for b in judge_simulator.requests
    )
    assert sent == [(0.0, judge.max_tokens, "low"), (0.5, 300, None)]
    # The run record says which evaluator was asked with what.
    record = fk.last_run().provenance
    assert record is not None
    by_name = {e["name"]: e for e in record["evaluators"]}
    assert by_name["cool"]["invocation_parameters"] == cool.invocation_parameters
    assert by_name["warm"]["invocation_parameters"] == warm.invocation_parameters
    # Part of each cache key: a re-run sends nothing.
    judge_simulator.reset()
    fk.evaluate_dataframe(df, [cool, warm], judge=judge, cache=tmp_path, progress=False)
    assert judge_simulator.stats()["total"] == 0


def test_an_unknown_invocation_parameter_is_an_input_error_naming_it():
    from framekit.evaluators import Coherence

    with pytest.raises(fk.InputError, match="unexpected keyword argument 'reasoning_effrot'"):
        Coherence(reasoning_effrot="low")
    with pytest.raises(fk.InputError, match="reasoning_effort must be one of"):
        Coherence(reasoning_effort="max")
