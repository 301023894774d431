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


def test_each_kind_of_judge_says_which_endpoint_offline_judge_or_cascade_it_is() -> None:
    llm = fk.Judge("openai/gpt-4o-mini")
    local = fk.LocalJudge()
    cascade = fk.Cascade([local, llm], escalate_below=[0.8])

    assert [j.chat_endpoint for j in (llm, local, cascade)] == [llm, None, None]
    assert [j.offline for j in (llm, local, cascade)] == [None, local, None]
    assert [j.cascade for j in (llm, local, cascade)] == [None, None, cascade]


def test_the_engine_and_entry_points_do_not_tell_judge_kinds_apart() -> None:
    # A kind's difference is asked of the judge (chat_endpoint, offline, cascade, stages),
    # not checked with isinstance outside framekit/judges. The few left check what a user
    # passed in (a string or an object) before it is resolved.
    import re
    from pathlib import Path

    root = Path(fk.__file__).parent
    kind = re.compile(r"isinstance\([^)]*\b(Judge|LocalJudge|Cascade)\b")
    found = [
        f"{path.relative_to(root)}:{number}"
        for path in sorted(root.rglob("*.py"))
        if "judges" not in path.relative_to(root).parts
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if kind.search(line)
    ]
    assert len(found) <= 6, found
