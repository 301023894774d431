"""The simulator as a position-biased pairwise judge, over real HTTP: verdicts counted."""

from __future__ import annotations

import json
import math
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import ClassificationEvaluator
from framekit.judges.logprobs import label_probabilities, logprobs_content
from framekit.testing import PairwiseJudge, SimulatorConfig
from framekit.testing._sim_answers import expected_choice, subject_text
from framekit.testing._sim_pairwise import qualities
from framekit.testing.simulator import _parse_args
from tests.helpers import RawClient, batch_judge

PAIRWISE = ["A", "B", "tie"]


def body(first: str, second: str, labels: list[str] = PAIRWISE, model: str = "sim") -> dict:
    text = (
        "[BEGIN DATA: input]\nWhich city is the capital?\n[END DATA: input]\n"
        f"[BEGIN DATA: answer A]\n{first}\n[END DATA: answer A]\n"
        f"[BEGIN DATA: answer B]\n{second}\n[END DATA: answer B]"
    )
    schema = {
        "type": "object",
        "properties": {
            "explanation": {"type": "string"},
            "label": {"type": "string", "enum": labels},
        },
        "required": ["explanation", "label"],
    }
    return {
        "model": model,
        "messages": [{"role": "user", "content": text}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "v", "schema": schema}},
        "logprobs": True,
        "top_logprobs": 5,
    }


class Raw(RawClient):
    """:class:`~tests.helpers.RawClient` that reads a 200's body, and asks pairs."""

    def post(self, payload: dict[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        status, answer = super().post(payload)
        assert status == 200
        return answer

    def verdicts(self, pairs: list[tuple[float, float]], **kw: Any) -> list[str]:
        """The label answered for each (quality of A, quality of B), one request each."""
        out = []
        for i, (qa, qb) in enumerate(pairs):
            answer = self.post(
                body(f"answer {i} @sim(quality={qa})", f"other {i} @sim(quality={qb})", **kw)
            )
            out.append(json.loads(answer["choices"][0]["message"]["content"])["label"])
        return out


def share(labels: list[str], label: str) -> float:
    return sum(x == label for x in labels) / len(labels)


def logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def test_the_better_candidate_wins_by_the_logistic_of_the_quality_gap(judge_simulator):
    client = Raw(judge_simulator)
    n = 800
    first_better = client.verdicts([(0.7, 0.5)] * n)
    second_better = client.verdicts([(0.5, 0.7)] * n)
    expected = logistic(4.0 * 0.2)  # the default slope: 0.69
    # 4 standard errors of a share of 800 (0.016 each).
    assert share(first_better, "A") == pytest.approx(expected, abs=0.065)
    assert share(second_better, "B") == pytest.approx(expected, abs=0.065)
    assert share(first_better + second_better, "tie") == 0.0
    assert judge_simulator.stats()["chat"] == 2 * n


def test_a_biased_judge_says_A_for_its_share_whatever_the_candidates(simulator_factory):
    sim = simulator_factory(pairwise_judges={"biased": PairwiseJudge(bias=0.4)})
    client = Raw(sim)
    n = 600
    worse_first = [(0.2, 0.8)] * n
    fair = client.verdicts(worse_first, model="fair")
    biased = client.verdicts(worse_first, model="biased")
    looked = logistic(4.0 * -0.6)  # 0.083: how often the worse one wins on quality
    assert share(fair, "A") == pytest.approx(looked, abs=0.05)
    assert share(biased, "A") == pytest.approx(0.4 + 0.6 * looked, abs=0.08)
    assert sim.stats()["by_model"] == {"fair": n, "biased": n}


def test_close_qualities_are_a_tie_only_when_the_schema_offers_one(simulator_factory):
    sim = simulator_factory(pairwise_judges={"*": PairwiseJudge(tie_margin=0.05)})
    client = Raw(sim)
    assert set(client.verdicts([(0.50, 0.52)] * 50)) == {"tie"}
    without = client.verdicts([(0.50, 0.52)] * 200, labels=["A", "B"])
    assert set(without) == {"A", "B"}
    # Outside the margin the qualities decide again.
    assert "tie" not in client.verdicts([(0.5, 0.6)] * 50)


def test_a_request_asked_again_gets_its_verdict_and_true_probabilities_again(judge_simulator):
    client = Raw(judge_simulator)
    request = body("good @sim(quality=0.6)", "weak @sim(quality=0.3)")
    answers = [client.post(request) for _ in range(3)]
    contents = {a["choices"][0]["message"]["content"] for a in answers}
    assert len(contents) == 1
    content = json.loads(contents.pop())
    # Explanation first, then the label; the quality markers never become properties.
    assert list(content) == ["explanation", "label"]
    got = label_probabilities(logprobs_content(answers[0]), PAIRWISE)
    expected = PairwiseJudge().probabilities(0.6, 0.3, allow_tie=True)
    assert got is not None and got.label == content["label"]
    assert got.probabilities == pytest.approx(expected, abs=1e-6)


def test_without_two_quality_markers_or_with_a_label_marker_it_answers_as_before(judge_simulator):
    client = Raw(judge_simulator)
    one = body("only @sim(quality=0.9)", "no marker here")
    answer = json.loads(client.post(one)["choices"][0]["message"]["content"])["label"]
    assert answer == expected_choice(subject_text(one["messages"]), PAIRWISE)
    forced = body("a @sim(quality=0.9)", "b @sim(quality=0.1) @sim(label=B)")
    assert json.loads(client.post(forced)["choices"][0]["message"]["content"])["label"] == "B"


PREFERENCE = ClassificationEvaluator(
    "preference",
    "Which answer serves the question better? The order in which the answers are shown "
    "must not matter.\n\nQuestion: {input}\n\nAnswer A:\n{output}\n\nAnswer B:\n{reference}",
    {"A": 1.0, "B": 0.0, "tie": 0.5},
)


def judged(judge: Any, cache: Any, n: int, first: float, second: float) -> pl.DataFrame:
    """``n`` pairs of candidates of known quality, judged by a rubric evaluator."""
    df = pl.DataFrame(
        {
            "question": [f"question {i}" for i in range(n)],
            "first": [f"first answer {i} @sim(quality={first})" for i in range(n)],
            "second": [f"second answer {i} @sim(quality={second})" for i in range(n)],
        }
    )
    mapping = {"input": "question", "output": "first", "reference": "second"}
    return fk.evaluate_dataframe(
        df, [PREFERENCE], mapping, judge=judge, cache=cache, progress=False
    )


def test_a_rubric_evaluator_reads_the_verdicts_through_framekits_http_transport(
    simulator_factory, tmp_path
):
    sim = simulator_factory(pairwise_judges={"biased": PairwiseJudge(bias=0.5)})
    judge = fk.Judge("openai/biased", api_base=sim.api_base, api_key="sk-test", transport="http")
    n = 300
    scored = judged(judge, tmp_path, n, 0.4, 0.6)
    assert scored["preference_error"].null_count() == n
    share_a = share(scored["preference_label"].to_list(), "A")
    assert share_a == pytest.approx(0.5 + 0.5 * logistic(4.0 * -0.2), abs=0.1)  # 0.66
    # The reported confidence is the true probability of the label answered.
    truth = PairwiseJudge(bias=0.5).probabilities(0.4, 0.6, allow_tie=True)
    for label, confidence in scored.select("preference_label", "preference_confidence").rows():
        assert confidence == pytest.approx(truth[label], abs=1e-6)
    assert sim.stats()["by_model"] == {"biased": n}


def test_batch_lines_are_answered_by_the_pairwise_judge(simulator_factory, tmp_path):
    sim = simulator_factory(
        batch_seconds=0.05, pairwise_judges={"always-first": PairwiseJudge(bias=1.0)}
    )
    scored = judged(batch_judge(sim, "openai/always-first"), tmp_path, 20, 0.1, 0.9)
    assert scored["preference_label"].to_list() == ["A"] * 20
    stats = sim.stats()
    assert stats["chat"] == 0 and stats["batch"]["lines"] == 20


def test_pairwise_judges_survive_the_json_round_trip_and_the_command_line():
    config = SimulatorConfig(pairwise_judges={"biased": PairwiseJudge(bias=0.3, seed=2)})
    again = SimulatorConfig(**json.loads(json.dumps(config.to_dict())))
    assert again.pairwise_judge("biased") == PairwiseJudge(bias=0.3, seed=2)
    assert again.pairwise_judge("other") == PairwiseJudge()
    _, parsed = _parse_args(["--pairwise-judges", '{"*": {"bias": 0.2, "tie_margin": 0.1}}'])
    assert parsed.pairwise_judge("any") == PairwiseJudge(bias=0.2, tie_margin=0.1)
    with pytest.raises(ValueError, match="bias"):
        SimulatorConfig(pairwise_judges={"x": {"bias": 1.5}})


def test_qualities_are_read_in_the_order_the_candidates_are_shown():
    assert qualities("x @sim(quality=0.25) y @sim(first=2, quality=.5)") == (0.25, 0.5)
    assert qualities("x @sim(quality=0.25)") is None
    assert qualities("@sim(quality=1) @sim(quality=2) @sim(quality=3)") is None
    assert qualities("@sim(quality_note=1) @sim(quality=2)") is None
