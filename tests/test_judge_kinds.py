"""Every kind of judge answers the engine's questions itself (its stages, how it gives a
confidence, whether it embeds), so the engine need not tell the kinds apart."""

from __future__ import annotations

import framekit as fk
from framekit.evaluators import Coherence


def test_each_kind_of_judge_says_its_stages_and_its_confidence_method() -> None:
    llm = fk.Judge("openai/gpt-4o-mini")
    sampled = fk.Judge("openai/gpt-4o-mini", samples=5, temperature=0.7)
    local = fk.LocalJudge(relevant_share=0.3)
    cascade = fk.Cascade([local, llm], escalate_below=[0.8])

    assert llm.stages() == (llm,) and local.stages() == (local,)
    assert cascade.stages() == (local, llm)
    assert llm.confidence_method == "logprobs"
    assert sampled.confidence_method == "self-consistency k=5"
    assert local.confidence_method == "calibrated offline (relevant share 0.3)"
    assert fk.LocalJudge().confidence_method == "calibrated offline"
    assert cascade.confidence_method == "cascade"
    assert [j.embeds_locally for j in (llm, local, cascade)] == [False, True, False]
    assert not llm.scores_likelihood(Coherence()) and not cascade.scores_likelihood(Coherence())
