"""Groundedness and ContextRecall: a claim counts as supported only with text and a
document the row has.

Each reply is written by the test (``@sim(reply=...)``) and read through the real client
path, once per transport.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import ContextRecall, Groundedness
from framekit.testing._sim_answers import reply_marker
from tests.helpers import sim_judge

DOCS = ["Paris is the capital of France.", "The Seine flows through Paris."]
GOOD = {
    "claim": "Paris is the capital of France.",
    "evidence": "Paris is the capital of France.",
    "supported": True,
    "document": 1,
}


def _reply(*claims: dict) -> str:
    return reply_marker(json.dumps({"claims": list(claims)}))


@pytest.mark.parametrize("evaluator", [Groundedness, ContextRecall])
def test_a_supported_claim_citing_no_real_document_or_without_text_counts_unsupported(
    simulator_factory, transport, evaluator
):
    sim = simulator_factory()
    bad = {
        "cites null": ({**GOOD, "document": None}, "cites no document"),
        "cites 999999": ({**GOOD, "document": 999999}, "cites document 999999 of 2"),
        "cites -1": ({**GOOD, "document": -1}, "cites document -1 of 2"),
        "cites 0": ({**GOOD, "document": 0}, "cites document 0 of 2"),
        "no text": ({**GOOD, "claim": " "}, "the claim has no text"),
    }
    texts = [f"Paris is the capital of France. {_reply(GOOD, claim)}" for claim, _ in bad.values()]
    texts.append(f"Paris is the capital of France. {_reply(GOOD, GOOD)}")  # the control row
    frame = pl.DataFrame({"text": texts, "docs": [DOCS] * len(texts)})
    name = evaluator().name
    out = fk.evaluate_dataframe(
        frame, [evaluator()], {evaluator.claims_field: "text", "context": "docs"},
        judge=sim_judge(sim), cache=None, progress=False, details=True,
    )  # fmt: skip
    assert isinstance(out, pl.DataFrame)
    assert out[f"{name}_score"].to_list() == [0.5] * len(bad) + [1.0]
    assert out[f"{name}_error"].null_count() == len(texts)
    for (_, why), explanation, details in zip(
        bad.values(), out[f"{name}_explanation"], out[f"{name}_details"]
    ):
        assert explanation.startswith("1 of 2 claims")
        assert f"- unsupported (marked supported, but {why})" in explanation, explanation
        claims = json.loads(details)["claims"]
        assert [c["supported"] for c in claims] == [True, False]
        assert claims[1]["problem"].endswith(why)
    assert sim.stats()["chat"] == len(texts)


@pytest.mark.parametrize("evaluator", [Groundedness, ContextRecall])
def test_a_supported_claim_the_text_never_made_counts_unsupported(
    simulator_factory, transport, evaluator
):
    """A judge (or an injection steering it) that lists a claim of the documents instead
    of the text's own: its words are not the text's, so it cannot lift the score."""
    sim = simulator_factory()
    answer = "It opened in 1889, and it is in Paris."
    standalone = {**GOOD, "claim": "The Eiffel Tower opened in 1889.", "document": 2}
    invented = {**GOOD, "claim": "The tower is 330 metres tall and painted brown.", "document": 2}
    docs = ["Paris is the capital of France.",
            "The Eiffel Tower in Paris opened in 1889, is 330 metres tall, painted brown."]  # fmt: skip
    texts = [f"{answer} {_reply(standalone)}", f"{answer} {_reply(standalone, invented)}"]
    frame = pl.DataFrame({"text": texts, "q": ["When did the Eiffel Tower open?"] * 2,
                          "docs": [docs] * 2})  # fmt: skip
    name = evaluator().name
    out = fk.evaluate_dataframe(
        frame, [evaluator()], {evaluator.claims_field: "text", "context": "docs", "input": "q"},
        judge=sim_judge(sim), cache=None, progress=False,
    )  # fmt: skip
    assert isinstance(out, pl.DataFrame)
    assert out[f"{name}_score"].to_list() == [1.0, 0.5]
    subject = evaluator.subject
    line = out[f"{name}_explanation"][1].splitlines()[-1]
    assert line.startswith(f"- unsupported (marked supported, but not the {subject}'s: ")
    assert "1 of its 6 words are in it): The tower is 330 metres tall and painted brown." in line
