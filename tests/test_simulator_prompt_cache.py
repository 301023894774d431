"""The simulator's prompt cache: cached prompt tokens by OpenAI's rule (prefixes of 1,024
tokens and more, in 128-token steps, cached once an earlier request with the prefix has
been answered) and Anthropic's usage fields; counted at the simulator."""

from __future__ import annotations

import json
import math
import threading
import urllib.request
from typing import Any

import pytest

from framekit.testing import JudgeSimulator, SimulatorConfig

# 4 characters are one token to the simulator.
SHARED = "The policy below applies to every request. " * 120  # 5,160 characters
assert len(SHARED) == 5160


def chat(sim: JudgeSimulator, text: str, model: str = "sim", **extra: Any) -> dict[str, Any]:
    """One chat completion from the simulator, as its JSON body."""
    body = {"model": model, "messages": [{"role": "user", "content": text}], **extra}
    request = urllib.request.Request(
        sim.api_base + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


def cached(answer: dict[str, Any]) -> int:
    return int(answer["usage"]["prompt_tokens_details"]["cached_tokens"])


@pytest.fixture
def sim():
    with JudgeSimulator() as s:
        yield s


def test_a_repeated_long_prompt_is_cached_in_128_token_steps_from_1024(
    sim: JudgeSimulator,
) -> None:
    first = chat(sim, SHARED + "first question")
    assert first["usage"]["prompt_tokens"] == math.ceil(5174 / 4)
    assert cached(first) == 0  # nothing answered before it
    second = chat(sim, SHARED + "second question, a little longer")
    # The shared 5,160 characters are 1,290 tokens: the longest step within is 1,280.
    assert cached(second) == 1280
    stats = sim.stats()
    assert stats["cached_tokens"] == 1280
    assert stats["prompt_tokens"] == math.ceil(5174 / 4) + math.ceil(5192 / 4)


def test_a_prefix_under_1024_tokens_is_never_cached(sim: JudgeSimulator) -> None:
    short = SHARED[:4000]  # 1,000 tokens
    for _ in range(3):
        assert cached(chat(sim, short)) == 0
    # Whole prompts sharing only 1,000 tokens do not share a cacheable prefix either.
    chat(sim, short + "a" * 1000)
    assert cached(chat(sim, short + "b" * 1000)) == 0
    assert sim.stats()["cached_tokens"] == 0


def test_the_model_and_the_answer_schema_are_part_of_the_prefix(sim: JudgeSimulator) -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}}
    other = {"type": "json_schema", "json_schema": {"name": "b", "schema": {"type": "object"}}}
    chat(sim, SHARED, response_format=schema)
    assert cached(chat(sim, SHARED, model="other")) == 0
    assert cached(chat(sim, SHARED, response_format=other)) == 0
    assert cached(chat(sim, SHARED, response_format=schema)) == 1280


def test_a_prefix_is_cached_only_once_its_request_is_answered(sim: JudgeSimulator) -> None:
    sim.configure(latency=0.5)
    answers: list[dict[str, Any]] = []
    threads = [threading.Thread(target=lambda: answers.append(chat(sim, SHARED))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Sent together, none found the prefix cached: none had been answered yet.
    assert [cached(a) for a in answers] == [0, 0, 0]
    assert cached(chat(sim, SHARED)) == 1280


def test_anthropic_style_answers_carry_cache_reads_and_writes(sim: JudgeSimulator) -> None:
    first = chat(sim, SHARED, model="claude-sim")
    usage = first["usage"]
    assert (usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]) == (0, 1280)
    usage = chat(sim, SHARED + "more", model="claude-sim")["usage"]
    assert (usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]) == (1280, 0)
    assert usage["prompt_tokens_details"]["cached_tokens"] == 1280
    # An OpenAI-style model has no such fields, unless the simulator is told to add them.
    assert "cache_read_input_tokens" not in chat(sim, SHARED)["usage"]
    sim.configure(prompt_cache="anthropic")
    assert chat(sim, SHARED)["usage"]["cache_read_input_tokens"] == 1280


def test_prompt_cache_none_caches_nothing_and_reset_forgets(sim: JudgeSimulator) -> None:
    chat(sim, SHARED)
    sim.reset()
    assert cached(chat(sim, SHARED)) == 0  # forgotten
    sim.configure(prompt_cache=None)
    answer = chat(sim, SHARED)
    assert "prompt_tokens_details" not in answer["usage"]
    with pytest.raises(ValueError, match="prompt_cache"):
        SimulatorConfig(prompt_cache="gemini")
