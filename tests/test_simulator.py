"""The loopback judge simulator, driven through litellm's real client path."""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import http.client
import json
import math
import os
import socket
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any

import pytest

os.environ["LITELLM_OFFLINE_MODE"] = "true"

import litellm  # noqa: E402
from jsonschema import validate  # noqa: E402

from framekit.testing import JudgeSimulator, SimulatorConfig  # noqa: E402
from framekit.testing._sim_http import refill  # noqa: E402
from framekit.testing.simulator import _parse_args  # noqa: E402

litellm.suppress_debug_info = True

RUBRIC = ["Not At All", "Not Generally", "Neutral/Mixed", "Generally Yes", "Completely Yes"]
SCHEMA = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string"},
        "label": {"type": "string", "enum": RUBRIC},
    },
    "required": ["explanation", "label"],
    "additionalProperties": False,
}


def prompt(question: str, answer: str) -> str:
    """A user turn delimited the way framekit renders untrusted text."""
    return (
        f"[BEGIN DATA: input]\n{question}\n[END DATA: input]\n"
        f"[BEGIN DATA: output]\n{answer}\n[END DATA: output]\nJudge the output."
    )


def json_schema(schema: dict[str, Any] = SCHEMA) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "judgement", "schema": schema}}


@pytest.fixture(scope="module")
def run() -> Iterator[Callable[[Any], Any]]:
    # One loop for the module: litellm caches its async HTTP clients across calls.
    loop = asyncio.new_event_loop()
    yield loop.run_until_complete
    loop.close()


@pytest.fixture
def chat(run: Callable[[Any], Any]) -> Callable[..., Any]:
    def call(sim: Any, content: str, **kwargs: Any) -> Any:
        kwargs.setdefault("api_key", "sk-test")
        kwargs.setdefault("timeout", 10)
        return run(
            litellm.acompletion(
                model="openai/sim",
                api_base=sim.api_base,
                num_retries=0,
                messages=[
                    {"role": "system", "content": "You are an evaluator."},
                    {"role": "user", "content": content},
                ],
                **kwargs,
            )
        )

    return call


def post(sim: Any, path: str, payload: Any) -> tuple[int, Any]:
    """A raw HTTP request, for checks where litellm's per-call cost would blur timing."""
    connection = http.client.HTTPConnection("127.0.0.1", sim.port, timeout=10)
    try:
        connection.request("POST", path, json.dumps(payload))
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def answer_of(response: Any) -> dict[str, Any]:
    return json.loads(response.choices[0].message.content)


def test_marker_sets_label_even_outside_the_enum(judge_simulator, chat):
    inside = chat(
        judge_simulator, prompt("q", "a @sim(label=Generally Yes)"), response_format=json_schema()
    )
    assert answer_of(inside)["label"] == "Generally Yes"
    # The last marker wins, and a label outside the rubric is delivered as asked.
    text = prompt("q @sim(label=Neutral/Mixed)", "a @sim(label=maybe, certainty=0.5)")
    outside = answer_of(chat(judge_simulator, text, response_format=json_schema()))
    assert outside["label"] == "maybe"
    assert outside["certainty"] == 0.5


def test_unmarked_label_is_the_sha256_choice_of_the_subject(judge_simulator, chat):
    labels = {}
    for i in range(12):
        text = prompt(f"question {i}", f"answer {i}")
        digest = int(hashlib.sha256(text.encode()).hexdigest(), 16)
        got = answer_of(chat(judge_simulator, text, response_format=json_schema()))["label"]
        assert got == RUBRIC[digest % len(RUBRIC)]
        labels[i] = got
    assert len(set(labels.values())) > 1


def test_answer_conforms_to_a_nested_schema(judge_simulator, chat):
    schema = {
        "type": "object",
        "$defs": {"verdict": {"type": "string", "enum": ["high", "medium", "low"]}},
        "properties": {
            "reasoning": {"type": "string"},
            "verdict": {"$ref": "#/$defs/verdict"},
            "questions": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 2,
                "maxItems": 4,
            },
            "noncommittal": {"type": "boolean"},
            "rank": {"type": "integer", "minimum": 1},
            "weight": {"type": "number"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "meta": {"type": "object", "properties": {"source": {"type": "string"}}},
        },
        "required": ["reasoning", "verdict", "questions", "noncommittal", "rank", "weight"],
        "additionalProperties": False,
    }
    output = (
        "Paris is the capital and most populous city of France, on the Seine, home to millions."
    )
    text = prompt("What is the capital of France?", output)
    answer = answer_of(chat(judge_simulator, text, response_format=json_schema(schema)))
    validate(answer, schema)
    stem = "What is Paris is the capital and most populous city of France, on the?"
    assert answer["questions"] == [stem, stem + " (2)"]
    assert answer["reasoning"] == f"Simulated judgement of {len(text)} characters."
    assert (answer["noncommittal"], answer["rank"], answer["weight"]) == (False, 1, 0.0)


def test_tool_call_mode_returns_the_forced_function(judge_simulator, chat):
    tool = {"type": "function", "function": {"name": "record", "parameters": SCHEMA}}
    response = chat(
        judge_simulator,
        prompt("q", "a @sim(label=Completely Yes)"),
        tools=[tool],
        tool_choice={"type": "function", "function": {"name": "record"}},
    )
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    call = choice.message.tool_calls[0]
    assert call.function.name == "record"
    arguments = json.loads(call.function.arguments)
    validate(arguments, SCHEMA)
    assert arguments["label"] == "Completely Yes"


def test_rejected_response_format_is_a_bad_request_and_tools_still_work(simulator_factory, chat):
    sim = simulator_factory(reject_response_format=True)
    with pytest.raises(litellm.BadRequestError) as info:
        chat(sim, prompt("q", "a"), response_format=json_schema())
    assert "response_format" in str(info.value)
    tool = {"type": "function", "function": {"name": "record", "parameters": SCHEMA}}
    ok = chat(sim, prompt("q", "a"), tools=[tool], tool_choice="required")
    assert ok.choices[0].message.tool_calls
    assert sim.stats()["by_status"] == {200: 1, 400: 1}
    assert sim.stats()["faults"] == {"response_format": 1}


@pytest.fixture
def sim_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Stop the clock of the simulators this test starts; the test moves it on by hand.

    Their buckets, windows and storms then depend on the seconds the test says, not on
    how long its requests take on this machine (longer under load, as under xdist).
    Returns ``advance(seconds)``.
    """
    from framekit.testing import _sim_http

    now = [time.monotonic()]
    # Only the simulator's module sees it: the event loop keeps the real clock.
    monkeypatch.setattr(
        _sim_http, "time", SimpleNamespace(monotonic=lambda: now[0], time=time.time)
    )

    def advance(seconds: float) -> None:
        now[0] += seconds

    return advance


@pytest.mark.parametrize("style", ["seconds", "http-date", "ms", None])
def test_rpm_limit_answers_429_with_the_configured_retry_after(
    sim_clock, simulator_factory, chat, style
):
    sim = simulator_factory(rpm=60, retry_after=style)  # bucket of 1, refilled at 1/s
    chat(sim, "first")
    with pytest.raises(litellm.RateLimitError) as info:
        chat(sim, "second")
    headers = info.value.response.headers
    if style == "seconds":
        assert headers["retry-after"] == "1"
    elif style == "http-date":
        when = email.utils.parsedate_to_datetime(headers["retry-after"])
        ahead = (when - datetime.now(timezone.utc)).total_seconds()
        assert -1 <= ahead <= 2
    elif style == "ms":
        assert 0 < int(headers["retry-after-ms"]) <= 1000
        assert "retry-after" not in headers
    else:
        assert "retry-after" not in headers and "retry-after-ms" not in headers
    assert sim.stats()["by_status"] == {200: 1, 429: 1}
    assert sim.stats()["faults"] == {"rpm": 1}


def test_refill_holds_one_second_of_budget_at_rpm_over_60():
    assert refill(0.0, 0.25, 600) == 2.5  # refilled at 10 a second
    assert refill(3.0, 60.0, 600) == 10.0  # holds one second of budget, no more
    assert refill(0.0, 60.0, 30) == 1.0  # and at least one request


def test_bucket_holds_one_second_and_refills_at_rpm_over_60(simulator_factory, sim_clock):
    sim = simulator_factory(rpm=600)  # capacity 10, refilled at 10 per second
    assert [post(sim, "/v1/chat/completions", {"messages": []})[0] for _ in range(12)] == (
        [200] * 10 + [429] * 2
    )
    sim_clock(0.25)  # two and a half tokens
    assert [post(sim, "/v1/chat/completions", {"messages": []})[0] for _ in range(3)] == [
        200,
        200,
        429,
    ]


def test_server_errors_map_to_litellm_exceptions(simulator_factory, chat):
    sim = simulator_factory()
    with pytest.raises(litellm.InternalServerError):
        chat(sim, "q @sim(fault=500)")
    with pytest.raises(litellm.ServiceUnavailableError):
        chat(sim, "q @sim(fault=503)")
    sim.configure(error_500_rate=1.0)
    with pytest.raises(litellm.InternalServerError):
        chat(sim, "no marker")
    assert sim.stats()["by_status"] == {500: 2, 503: 1}


def test_hang_makes_the_client_time_out_and_is_counted_abandoned(judge_simulator, chat):
    started = time.monotonic()
    with pytest.raises(litellm.Timeout):
        chat(judge_simulator, "q @sim(fault=hang)", timeout=0.3)
    assert time.monotonic() - started < 5
    deadline = time.monotonic() + 3
    while judge_simulator.stats()["abandoned"] == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    stats = judge_simulator.stats()
    assert stats["abandoned"] == 1 and stats["in_flight"] == 0
    assert stats["by_status"] == {} and stats["faults"] == {"hang": 1}


def test_broken_bodies_reach_the_client_without_an_exception(judge_simulator, chat):
    fmt = json_schema()
    malformed = chat(judge_simulator, prompt("q", "@sim(fault=malformed)"), response_format=fmt)
    with pytest.raises(json.JSONDecodeError):
        json.loads(malformed.choices[0].message.content)
    null = chat(judge_simulator, prompt("q", "@sim(fault=null)"), response_format=fmt)
    assert null.choices[0].message.content is None
    refusal = chat(judge_simulator, prompt("q", "@sim(fault=refusal)"), response_format=fmt)
    assert refusal.choices[0].message.content is None
    assert refusal.choices[0].message.refusal == "I can't help with that."
    faults = judge_simulator.stats()["faults"]
    assert faults == {"malformed": 1, "null": 1, "refusal": 1}


def test_dropped_connection_is_a_connection_error(judge_simulator, chat):
    with pytest.raises(litellm.InternalServerError, match="Connection error"):
        chat(judge_simulator, "q @sim(fault=drop)")
    assert judge_simulator.stats()["faults"] == {"drop": 1}
    chat(judge_simulator, "the next request is answered")


def test_wrong_api_key_is_unauthorised(simulator_factory, chat):
    sim = simulator_factory(require_api_key="sk-right")
    with pytest.raises(litellm.AuthenticationError):
        chat(sim, "q", api_key="sk-wrong")
    chat(sim, "q", api_key="sk-right")
    assert sim.stats()["by_status"] == {200: 1, 401: 1}


def test_first_n_fails_then_answers_and_reset_forgets_attempts(judge_simulator, chat):
    text = "q @sim(fault=500, first=2) @sim(label=relevant)"
    for _ in range(2):
        with pytest.raises(litellm.InternalServerError):
            chat(judge_simulator, text)
    assert json.loads(chat(judge_simulator, text).choices[0].message.content) == {
        "label": "relevant"
    }
    # A different body is a different request with its own count.
    with pytest.raises(litellm.InternalServerError):
        chat(judge_simulator, text + " (other row)")
    assert judge_simulator.stats()["by_status"] == {200: 1, 500: 3}
    judge_simulator.reset()
    assert judge_simulator.stats()["total"] == 0 and judge_simulator.requests == []
    with pytest.raises(litellm.InternalServerError):
        chat(judge_simulator, text)


def test_embeddings_rank_texts_by_shared_words(judge_simulator, run):
    texts = [
        "how do I rotate log files on linux",
        "rotate the log files on a linux server",
        "a recipe for chocolate cake with cherries",
    ]
    response = run(
        litellm.aembedding(
            model="openai/sim-embed",
            api_base=judge_simulator.api_base,
            api_key="sk-test",
            input=texts,
        )
    )
    vectors = [item["embedding"] for item in response.data]
    assert all(len(v) == 256 and math.isclose(sum(x * x for x in v), 1.0) for v in vectors)

    def cosine(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b))

    assert cosine(vectors[0], vectors[1]) > 0.5
    assert abs(cosine(vectors[0], vectors[2])) < 0.3
    stats = judge_simulator.stats()
    assert (stats["embeddings"], stats["chat"], stats["by_endpoint"]) == (
        1,
        0,
        {"/v1/embeddings": 1},
    )


def test_stats_requests_and_reset(judge_simulator, chat):
    chat(judge_simulator, "one")
    with pytest.raises(litellm.BadRequestError):
        chat(judge_simulator, "two @sim(fault=400)")
    stats = judge_simulator.stats()
    assert stats["total"] == stats["chat"] == 2
    assert stats["by_status"] == {200: 1, 400: 1}
    assert stats["by_endpoint"] == {"/v1/chat/completions": 2}
    assert stats["prompt_tokens"] == math.ceil(len("You are an evaluator.one") / 4)
    bodies = judge_simulator.requests
    assert [b["messages"][-1]["content"] for b in bodies] == ["one", "two @sim(fault=400)"]
    judge_simulator.reset()
    assert judge_simulator.stats()["by_status"] == {} and judge_simulator.requests == []


def test_storm_fails_everything_for_a_while_then_recovers(sim_clock, judge_simulator, chat):
    judge_simulator.storm(status=503, seconds=0.3)
    with pytest.raises(litellm.ServiceUnavailableError) as info:
        chat(judge_simulator, "q")
    assert info.value.response.headers["retry-after"] == "1"
    sim_clock(0.35)
    chat(judge_simulator, "q")
    assert judge_simulator.stats()["by_status"] == {200: 1, 503: 1}


def test_latency_trickle_and_concurrency(simulator_factory, chat, run):
    sim = simulator_factory(latency=0.25, latency_max=0.3)

    async def five() -> None:
        await asyncio.gather(
            *(
                litellm.acompletion(
                    model="openai/sim",
                    api_base=sim.api_base,
                    api_key="k",
                    num_retries=0,
                    messages=[{"role": "user", "content": f"q{i}"}],
                )
                for i in range(5)
            )
        )

    started = time.monotonic()
    run(five())
    assert 0.25 <= time.monotonic() - started < 1.5
    assert sim.stats()["max_in_flight"] == 5
    sim.configure(latency=0.0, latency_max=None, trickle_seconds=0.4)
    started = time.monotonic()
    answer = chat(sim, prompt("q", "a"), response_format=json_schema())
    assert time.monotonic() - started >= 0.35
    validate(answer_of(answer), SCHEMA)


def test_pipelined_requests_are_answered_in_order(judge_simulator):
    def request(content: str) -> bytes:
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": content}]})
        head = f"POST /chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n"
        return (head + body).encode()

    with socket.create_connection(("127.0.0.1", judge_simulator.port), timeout=5) as conn:
        conn.sendall(request("slow @sim(latency=0.1, tag=1)") + request("fast @sim(tag=2)"))
        reader = conn.makefile("rb")
        tags = []
        for _ in range(2):
            assert reader.readline().startswith(b"HTTP/1.1 200")
            length = 0
            while (line := reader.readline()) != b"\r\n":
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            body = json.loads(reader.read(length))
            tags.append(json.loads(body["choices"][0]["message"]["content"])["tag"])
    assert tags == [1, 2]


def test_subprocess_mode_serves_and_is_controlled_over_http(chat):
    with JudgeSimulator.subprocess(SimulatorConfig(seed=3)) as sim:
        assert sim.base_url == f"http://127.0.0.1:{sim.port}" and sim.port > 0
        assert post(sim, "/v1/embeddings", {"input": "a b", "dimensions": 8})[0] == 200
        assert (
            answer_of(chat(sim, "q @sim(label=x)", response_format=json_schema()))["label"] == "x"
        )
        assert sim.stats()["by_status"] == {200: 2}
        assert sim.stats()["embeddings"] == 1
        assert sim.requests[1]["model"] == "sim"
        assert sim.configure(require_api_key="sk-right").require_api_key == "sk-right"
        with pytest.raises(litellm.AuthenticationError):
            chat(sim, "q")
        with pytest.raises(ValueError, match="error_500_rate"):
            sim.configure(error_500_rate=2.0)
        with pytest.raises(ValueError, match="unknown config field"):
            sim.configure(no_such_field=1)
        sim.reset()
        assert sim.stats()["total"] == 0
        pid = sim.pid
    assert pid is not None and sim.pid is None
    with pytest.raises(ProcessLookupError):  # stopped and reaped
        os.kill(pid, 0)


def test_command_line_flags_build_the_config():
    _, config = _parse_args(
        [
            "--port",
            "0",
            "--latency",
            "0.1",
            "--error-rate",
            "0.2",
            "--retry-after",
            "none",
            "--rpm",
            "600",
            "--reject-response-format",
            "true",
            "--config-json",
            '{"seed": 9}',
        ]
    )
    assert config == SimulatorConfig(
        latency=0.1,
        error_500_rate=0.2,
        retry_after=None,
        rpm=600.0,
        reject_response_format=True,
        seed=9,
    )
