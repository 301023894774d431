"""Choosing a judge transport, and what the HTTP transport promises beyond the fault matrix."""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import framekit as fk
from framekit.judges.pricing import list_price
from tests.helpers import API_KEY, MAPPING, retrieval_frame

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("model", "options", "expected"),
    [
        ("openai/gpt-4o-mini", {}, "http"),
        ("openai/my-model", {"api_base": "http://127.0.0.1:9/v1"}, "http"),
        ("hosted_vllm/qwen", {"api_base": "http://127.0.0.1:9/v1"}, "http"),
        ("anthropic/claude-3-5-haiku-latest", {}, "litellm"),
        ("gpt-4o-mini", {}, "litellm"),  # no provider prefix: litellm's routing decides
        ("openai/gpt-4o-mini", {"processes": 2}, "litellm"),  # workers are litellm's
        ("openai/gpt-4o-mini", {"transport": "litellm"}, "litellm"),
        ("together_ai/llama", {"transport": "http", "api_base": "http://127.0.0.1:9/v1"}, "http"),
    ],
)
def test_auto_picks_http_for_openai_compatible_models_and_litellm_otherwise(
    model, options, expected
):
    judge = fk.Judge(model, **options)
    assert judge.transport == expected
    assert f"transport={expected!r}" in repr(judge)


def test_impossible_transport_choices_are_refused_before_any_call():
    with pytest.raises(fk.InputError, match="transport must be"):
        fk.Judge("openai/gpt-4o-mini", transport="grpc")
    with pytest.raises(fk.InputError, match="processes > 1 is for the litellm transport"):
        fk.Judge("openai/gpt-4o-mini", transport="http", processes=2)
    with pytest.raises(fk.InputError, match="needs an api_base"):
        fk.Judge("anthropic/claude-3-5-haiku-latest", transport="http")


def test_a_judge_on_http_survives_pickling_and_runs_again(judge_simulator):
    judge = fk.Judge("openai/sim-judge", api_base=judge_simulator.api_base, api_key=API_KEY)
    first = fk.evaluate_dataframe(retrieval_frame(3), [fk.evaluators.RetrievalRelevance()], MAPPING,
                                  judge=judge, cache=False, progress=False)  # fmt: skip
    clone = pickle.loads(pickle.dumps(judge))
    assert clone.transport == "http" and API_KEY not in repr(clone)
    again = fk.evaluate_dataframe(retrieval_frame(3), [fk.evaluators.RetrievalRelevance()], MAPPING,
                                  judge=clone, cache=False, progress=False)  # fmt: skip
    assert (
        first["retrieval_relevance_score"].to_list() == again["retrieval_relevance_score"].to_list()
    )
    assert judge_simulator.stats()["by_status"] == {200: 6}


def test_http_takes_the_key_from_openai_api_key_and_sends_it(simulator_factory, monkeypatch):
    sim = simulator_factory(require_api_key=API_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.delenv("FRAMEKIT_API_KEY", raising=False)
    judge = fk.Judge("openai/sim-judge", api_base=sim.api_base)
    out = fk.evaluate_dataframe(retrieval_frame(2), [fk.evaluators.RetrievalRelevance()], MAPPING,
                                judge=judge, cache=False, progress=False)  # fmt: skip
    assert out["retrieval_relevance_error"].null_count() == 2
    assert sim.stats()["by_status"] == {200: 2}


def test_http_sends_decoding_options_and_strips_the_provider_prefix(judge_simulator):
    judge = fk.Judge("openai/sim-judge", api_base=judge_simulator.api_base, api_key=API_KEY,
                     temperature=0.3, max_tokens=77, seed=5)  # fmt: skip
    fk.evaluate_dataframe(retrieval_frame(1), [fk.evaluators.RetrievalRelevance()], MAPPING,
                          judge=judge, cache=False, progress=False)  # fmt: skip
    body = judge_simulator.requests[-1]
    assert body["model"] == "sim-judge"
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.3, 77, 5)
    assert body["response_format"]["type"] == "json_schema"
    assert "api_key" not in body and API_KEY not in str(body)


def test_prices_come_from_a_public_table_and_unknown_models_have_none():
    price = list_price("openai/gpt-4o-mini")
    assert price is not None and price.cost(1_000_000, 0) > 0
    assert list_price("openai/no-such-model-anywhere") is None


def test_a_run_on_http_never_imports_litellm(judge_simulator):
    # A custom api_base has no list price, so nothing needs litellm's price table.
    script = textwrap.dedent(
        """
        import sys
        import framekit as fk
        from framekit.evaluators import RetrievalRelevance
        from tests.helpers import MAPPING, retrieval_frame
        judge = fk.Judge("openai/sim-judge", api_base=sys.argv[1], api_key="sk-x")
        out = fk.evaluate_dataframe(retrieval_frame(20), [RetrievalRelevance()], MAPPING,
                                    judge=judge, cache=False, progress=False)
        print(judge.transport, int(out["retrieval_relevance_score"].is_not_null().sum()),
              "litellm" in sys.modules)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    line = subprocess.check_output([sys.executable, "-c", script, judge_simulator.api_base],
                                   cwd=ROOT, env=env, text=True)  # fmt: skip
    assert line.split() == ["http", "20", "False"]
    assert judge_simulator.stats()["chat"] == 20


def test_http_classifies_a_url_its_client_refuses_as_configuration_like_litellm():
    # framekit's own check refuses user:pass@ in api_base before a run; this is the second
    # line of defence, the verdict when aiohttp itself refuses the URL at call time.
    import asyncio

    from framekit.judges.http import HttpTransport
    from framekit.judges.request import ChatRequest

    judge = fk.Judge("openai/m", api_base="http://127.0.0.1:9/v1", api_key=API_KEY, timeout=5)
    transport = HttpTransport(judge.endpoint, judge.limits, judge.decoding)
    request = ChatRequest([{"role": "user", "content": "hi"}], "answer", {"type": "object"})

    async def call() -> object:
        await transport.open()
        transport.url = f"http://me:{API_KEY}@127.0.0.1:9/v1/chat/completions"
        try:
            return await transport.call(request, list(request.messages), "prompt")
        finally:
            await transport.release()

    fault = asyncio.run(call())
    assert isinstance(fault, fk.judges.Fault) and fault.kind == "config", fault
    assert "api_base" in fault.reason and API_KEY not in fault.reason


def test_a_transport_holds_the_judges_values_not_the_judge_and_without_key_holds_none():
    judge = fk.Judge("openai/gpt-4o-mini", api_key="sk-explicit-CANARY-99", transport="http")
    # The transport is built from the judge's immutable values and never points back, so
    # nothing of the judge can change under it; a copy is built from the same values.
    held = vars(judge._transport).values()
    assert not any(value is judge for value in held)
    assert judge._transport.endpoint is judge.endpoint
    with pytest.raises(AttributeError):
        judge.api_base = "http://127.0.0.1:9/v1"  # type: ignore[misc]
    clone = copy.copy(judge)
    assert clone.endpoint == judge.endpoint and clone._transport is not judge._transport
    keyless = judge.without_key()
    assert b"CANARY-99" not in pickle.dumps(keyless)
    assert "CANARY-99" not in repr(keyless)
    assert judge.secrets == ["sk-explicit-CANARY-99"]  # the original keeps its key


def test_every_body_is_the_one_built_field_by_field_whatever_the_mode_and_evaluator():
    # The body's fields other than the messages are built once per evaluator and mode;
    # each request's body must still be, byte for byte, the one built from scratch.
    from framekit.judges.request import dump_json

    judge = fk.Judge("openai/sim-judge", api_base="http://127.0.0.1:9/v1", api_key=API_KEY,
                     temperature=0.3, seed=5, extra_body={"top_k": 3})  # fmt: skip
    transport = judge._transport
    evaluators = [fk.evaluators.RetrievalRelevance(), fk.evaluators.Coherence()]
    for mode in ("json_schema", "tool", "prompt", "json_schema"):
        for evaluator in evaluators:
            for i in range(3):
                record = {"input": f"question {i}", "output": f"answer {i}", "context": [f"d{i}"]}
                request = evaluator.build_request(record)
                whole = transport._fields(request, request.messages, mode)
                body = transport._body(request, request.messages, mode)
                assert body == dump_json(whole)
                sent = json.loads(body)["messages"]
                assert sent[: len(request.messages)] == request.messages  # this record's
