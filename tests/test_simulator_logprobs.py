"""The simulator's token logprobs and noisy judges, over real HTTP (litellm and raw)."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import polars as pl
import pytest

os.environ["LITELLM_OFFLINE_MODE"] = "true"

import litellm  # noqa: E402

import framekit as fk  # noqa: E402
from framekit.evaluators import RetrievalRelevance  # noqa: E402
from framekit.judges.logprobs import label_probabilities, logprobs_content  # noqa: E402
from framekit.testing import JudgeSimulator, NoisyJudge, SimulatorConfig  # noqa: E402
from framekit.testing._sim_answers import subject_text  # noqa: E402
from framekit.testing._sim_logprobs import (  # noqa: E402
    expected_confidence,
    label_distribution,
    noisy_verdict,
)
from framekit.testing.simulator import _parse_args  # noqa: E402
from tests.helpers import MAPPING, RawClient, batch_judge  # noqa: E402

litellm.suppress_debug_info = True

FIVE = ["Not At All", "Not Generally", "Neutral/Mixed", "Generally Yes", "Completely Yes"]
BINARY = ["relevant", "irrelevant"]


def schema(labels: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "explanation": {"type": "string"},
            "label": {"type": "string", "enum": labels},
        },
        "required": ["explanation", "label"],
        "additionalProperties": False,
    }


def messages(text: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are an evaluator."},
        {"role": "user", "content": f"[BEGIN DATA: input]\n{text}\n[END DATA: input]\nJudge it."},
    ]


def body(
    text: str, labels: list[str], model: str = "sim", top: int | None = 10, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": model,
        "messages": messages(text),
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "j", "schema": schema(labels)},
        },
        **extra,
    }
    if top is not None:
        out.update(logprobs=True, top_logprobs=top)
    return out


@pytest.fixture
def raw(judge_simulator: JudgeSimulator) -> Iterator[RawClient]:
    client = RawClient(judge_simulator)
    yield client
    client.connection.close()


@pytest.fixture(scope="module")
def run() -> Iterator[Callable[[Any], Any]]:
    loop = asyncio.new_event_loop()
    yield loop.run_until_complete
    loop.close()


def test_litellm_reads_logprobs_whose_label_probabilities_are_the_simulators(judge_simulator, run):
    text = "How do I boil an egg? @sim(label=Not Generally)"
    reply = run(
        litellm.acompletion(
            model="openai/sim",
            api_base=judge_simulator.api_base,
            api_key="sk-test",
            num_retries=0,
            messages=messages(text),
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "j", "schema": schema(FIVE)},
            },
            logprobs=True,
            top_logprobs=10,
        )
    )
    got = label_probabilities(logprobs_content(reply), FIVE)
    subject = subject_text(messages(text))
    expected = label_distribution(FIVE, "Not Generally", expected_confidence(subject))
    assert got is not None and got.label == "Not Generally"
    assert got.probabilities == pytest.approx(expected)
    assert judge_simulator.requests[-1]["top_logprobs"] == 10


def test_multi_word_labels_are_several_tokens_and_shared_prefixes_branch(raw):
    status, out = raw.post(body("q @sim(label=Not At All, confidence=0.6)", FIVE))
    assert status == 200
    content = out["choices"][0]["logprobs"]["content"]
    tokens = [x["token"] for x in content]
    start = tokens.index("Not")
    assert tokens[start : start + 3] == ["Not", " At", " All"]
    first = {a["token"]: a["logprob"] for a in content[start]["top_logprobs"]}
    # The first position offers each label's first token: "Not" for two labels together.
    assert set(first) == {"Not", "Neutral", "Generally", "Completely"}
    assert np.exp(first["Not"]) == pytest.approx(0.6 + 0.1)
    second = {a["token"]: a["logprob"] for a in content[start + 1]["top_logprobs"]}
    assert set(second) == {" At", " Generally"}
    assert np.exp(second[" At"]) == pytest.approx(0.6 / 0.7)
    assert content[start + 2]["top_logprobs"] == [
        {"token": " All", "logprob": 0.0, "bytes": list(b" All")}
    ]
    assert "".join(tokens) == out["choices"][0]["message"]["content"]


def test_few_top_logprobs_leave_labels_out(raw):
    _, out = raw.post(body("q @sim(label=Generally Yes, confidence=0.8)", FIVE, top=2))
    got = label_probabilities(logprobs_content(out), FIVE)
    # Shown: "Generally" (0.8) and "Not" (0.1: Not At All and Not Generally, split evenly
    # since the path was not taken). Unlisted: Neutral/Mixed and Completely Yes, 0.1
    # between them, each capped by the last shown 0.1: 0.05 each, as the simulator said.
    assert got is not None and set(got.missing) == {"Neutral/Mixed", "Completely Yes"}
    assert got.probabilities == pytest.approx(label_distribution(FIVE, "Generally Yes", 0.8))
    assert got.confidence == pytest.approx(0.8)


def test_tool_call_answers_carry_the_logprobs_of_their_arguments(raw):
    tools = [{"type": "function", "function": {"name": "judge", "parameters": schema(BINARY)}}]
    payload = body("q @sim(label=irrelevant, confidence=0.7)", BINARY, tools=tools)
    del payload["response_format"]
    _, out = raw.post(payload)
    arguments = out["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    content = logprobs_content(out)
    assert content is not None and "".join(x["token"] for x in content) == arguments
    got = label_probabilities(content, BINARY)
    assert got is not None and got.label == "irrelevant" and got.confidence == pytest.approx(0.7)


def test_logprobs_come_only_when_asked(raw):
    _, out = raw.post(body("q", BINARY, top=None))
    assert out["choices"][0]["logprobs"] is None
    _, out = raw.post(body("q", BINARY, top=None, logprobs=True))
    content = logprobs_content(out)
    assert content is not None and all(x["top_logprobs"] == [] for x in content)
    assert label_probabilities(content, BINARY) is None
    status, out = raw.post(body("q", BINARY, top=None, top_logprobs=3))
    assert status == 400 and "needs 'logprobs'" in out["error"]["message"]
    status, _ = raw.post(body("q", BINARY, top=21))
    assert status == 400


def noisy_run(
    raw: RawClient, model: str, rows: int, labels: list[str], seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(reported confidence, right?) for ``rows`` requests whose truth is random."""
    rng = np.random.default_rng(seed)
    confidence, right = [], []
    for i in range(rows):
        truth = labels[int(rng.integers(len(labels)))]
        _, out = raw.post(body(f"row {i} @sim(truth={truth})", labels, model=model))
        got = label_probabilities(logprobs_content(out), labels)
        assert got is not None
        confidence.append(got.confidence)
        right.append(got.label == truth)
    return np.array(confidence), np.array(right)


def test_calibrated_noisy_judge_is_right_about_as_often_as_it_says(simulator_factory):
    sim = simulator_factory(noisy_judges={"weak": NoisyJudge(0.75, seed=3)})
    client = RawClient(sim)
    confidence, right = noisy_run(client, "weak", 2000, BINARY)
    assert right.mean() == pytest.approx(0.75, abs=0.03)
    for low, high in [(0.5, 0.7), (0.7, 0.85), (0.85, 1.0)]:
        inside = (confidence >= low) & (confidence < high)
        assert inside.sum() > 300
        assert right[inside].mean() == pytest.approx(confidence[inside].mean(), abs=0.05)


def test_miscalibrated_noisy_judge_is_sure_of_its_wrong_answers(simulator_factory):
    sim = simulator_factory(noisy_judges={"weak": {"accuracy": 0.75, "calibrated": False}})
    confidence, right = noisy_run(RawClient(sim), "weak", 1000, FIVE)
    assert right.mean() == pytest.approx(0.75, abs=0.04)
    assert confidence[~right].min() >= 0.9
    assert confidence.mean() - right.mean() > 0.15


def test_one_simulator_serves_two_judges_and_counts_requests_per_model(simulator_factory):
    sim = simulator_factory(noisy_judges={"weak": NoisyJudge(0.75), "strong": NoisyJudge(0.95)})
    client = RawClient(sim)
    weak_conf, weak_right = noisy_run(client, "weak", 600, BINARY)
    strong_conf, strong_right = noisy_run(client, "strong", 300, BINARY)
    assert sim.stats()["by_model"] == {"weak": 600, "strong": 300}
    assert strong_right.mean() > weak_right.mean() + 0.1
    assert strong_conf.mean() > weak_conf.mean()


def test_noisy_answers_repeat_for_the_same_request_and_match_the_pure_model(simulator_factory):
    judge = NoisyJudge(0.6, seed=9)
    sim = simulator_factory(noisy_judges={"*": judge})
    client = RawClient(sim)
    text = "the same row @sim(truth=Neutral/Mixed)"
    answers = [client.post(body(text, FIVE, model="any"))[1] for _ in range(3)]
    labels = {json.loads(a["choices"][0]["message"]["content"])["label"] for a in answers}
    assert len(labels) == 1
    label, probabilities, _ = noisy_verdict(
        judge, "any", subject_text(messages(text)), FIVE, "Neutral/Mixed"
    )
    got = label_probabilities(logprobs_content(answers[0]), FIVE)
    assert got is not None and (got.label, got.probabilities) == (
        label,
        pytest.approx(probabilities),
    )


def test_noisy_judge_config_survives_the_json_round_trip_of_a_subprocess():
    config = SimulatorConfig(noisy_judges={"weak": NoisyJudge(0.75, calibrated=False)})
    again = SimulatorConfig(**json.loads(json.dumps(config.to_dict())))
    assert again.noisy_judge("weak") == NoisyJudge(0.75, calibrated=False)
    assert again.noisy_judge("other") is None
    from_text = SimulatorConfig(noisy_judges='{"*": {"accuracy": 0.9}}')
    assert from_text.noisy_judge("x") == NoisyJudge(0.9)
    _, parsed = _parse_args(["--noisy-judges", '{"weak": {"accuracy": 0.7}}'])
    assert parsed.noisy_judge("weak") == NoisyJudge(0.7)
    with pytest.raises(ValueError, match="accuracy"):
        SimulatorConfig(noisy_judges={"weak": {"accuracy": 1.5}})


def test_truth_outside_the_labels_is_a_bad_request(simulator_factory):
    sim = simulator_factory(noisy_judges={"*": NoisyJudge(0.8)})
    status, out = RawClient(sim).post(body("q @sim(truth=maybe)", BINARY))
    assert status == 400 and "truth" in out["error"]["message"]


def test_batch_lines_are_answered_by_the_noisy_judge_and_counted_per_model(
    simulator_factory, tmp_path
):
    sim = simulator_factory(batch_seconds=0.05, noisy_judges={"strong": NoisyJudge(1.0)})
    truth = ["relevant" if i % 3 else "irrelevant" for i in range(30)]
    df = pl.DataFrame(
        {
            "question": [f"question {i} @sim(truth={t})" for i, t in enumerate(truth)],
            "docs": [[f"document {i}"] for i in range(30)],
        }
    )
    scored = fk.evaluate_dataframe(
        df,
        [RetrievalRelevance()],
        MAPPING,
        judge=batch_judge(sim, "openai/strong"),
        cache=tmp_path,
        progress=False,
    )
    # An always-right noisy judge answers every line with its truth marker.
    assert scored["retrieval_relevance_label"].to_list() == truth
    stats = sim.stats()
    assert stats["chat"] == 0 and stats["batch"]["lines"] == 30
    assert stats["by_model"] == {"strong": 30}
