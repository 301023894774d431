"""Conversation histories: messages with tool calls, strings, and judging the last turn."""

from __future__ import annotations

import json
import re
from typing import Any

import polars as pl
import pytest

import framekit as fk
from framekit.evaluators import Coherence, ResponseRelevance

WEATHER_CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a helpful travel assistant."},
    {"role": "user", "content": "Hi, I am planning a trip."},
    {"role": "assistant", "content": "Great! Where are you going?"},
    {"role": "user", "content": "What's the weather in Paris today?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 18, "sky": "sunny"}'},
    {"role": "assistant", "content": "It is 18 C and sunny in Paris. @sim(label=Generally Yes)"},
]


def sim_judge(sim: Any) -> fk.Judge:
    return fk.Judge("openai/sim", api_base=sim.api_base, api_key="sk-test")


def block(prompt: str, name: str) -> str | None:
    match = re.search(rf"\[BEGIN DATA: {name}\]\n(.*?)\n\[END DATA: {name}\]", prompt, re.DOTALL)
    return match.group(1) if match else None


@pytest.mark.parametrize("factory", [ResponseRelevance, Coherence])
def test_history_alone_judges_the_last_turn_with_tool_steps_in_order(factory, judge_simulator):
    df = pl.DataFrame({"messages": [WEATHER_CHAT]})
    ev = factory()
    out = fk.evaluate_dataframe(
        df,
        [ev],
        {"history": "messages"},
        judge=sim_judge(judge_simulator),
        cache=False,
        progress=False,
    )
    assert out[f"{ev.name}_label"].to_list() == ["Generally Yes"]
    assert out[f"{ev.name}_score"].to_list() == [0.75]
    prompt = judge_simulator.requests[0]["messages"][1]["content"]
    assert block(prompt, "input") == "What's the weather in Paris today?"
    assert block(prompt, "output") == "It is 18 C and sunny in Paris. @sim(label=Generally Yes)"
    history = block(prompt, "history")
    assert history is not None
    turns = history.split("\n\n")
    assert turns == [
        "system: You are a helpful travel assistant.",
        "user: Hi, I am planning a trip.",
        "assistant: Great! Where are you going?",
        "user: (the request judged here, shown separately)",
        'assistant: [tool call get_weather({"city": "Paris"})]',
        'tool get_weather: {"temp_c": 18, "sky": "sunny"}',
    ]
    # The judged turn is not repeated among the earlier turns.
    assert "sunny in Paris." not in history
    # Earlier turns come before the turn being judged.
    assert prompt.index("[BEGIN DATA: history]") < prompt.index("[BEGIN DATA: output]")


def test_polars_struct_messages_with_null_keys_render_like_dicts(judge_simulator):
    # A list-of-struct column fills absent keys with nulls; the rendering must not care.
    df = pl.DataFrame({"messages": [WEATHER_CHAT, WEATHER_CHAT[:3]]})
    assert isinstance(df.schema["messages"], pl.List)
    out = fk.evaluate_dataframe(
        df,
        [ResponseRelevance()],
        {"history": "messages"},
        judge=sim_judge(judge_simulator),
        cache=False,
        progress=False,
    )
    assert out["response_relevance_error"].to_list() == [None, None]
    prompts = [r["messages"][1]["content"] for r in judge_simulator.requests]
    weather = next(p for p in prompts if "Paris" in p)
    assert 'assistant: [tool call get_weather({"city": "Paris"})]' in weather
    short = next(p for p in prompts if "Paris" not in p)
    assert block(short, "input") == "Hi, I am planning a trip."
    assert block(short, "output") == "Great! Where are you going?"
    assert block(short, "history") == "system: You are a helpful travel assistant."


def test_explicit_input_and_output_win_and_are_not_repeated_in_history(judge_simulator):
    final = WEATHER_CHAT[-1]["content"]
    df = pl.DataFrame(
        {"q": ["What's the weather in Paris today?"], "a": [final], "messages": [WEATHER_CHAT]}
    )
    fk.evaluate_dataframe(
        df,
        [Coherence()],
        {"input": "q", "output": "a", "history": "messages"},
        judge=sim_judge(judge_simulator),
        cache=False,
        progress=False,
    )
    prompt = judge_simulator.requests[0]["messages"][1]["content"]
    assert prompt.count("sunny in Paris.") == 1
    assert prompt.count("What's the weather in Paris today?") == 1


def test_history_as_text_or_json_string(judge_simulator):
    judge = sim_judge(judge_simulator)
    score = ResponseRelevance().score(
        input="And in Rome?",
        output="Rome is 24 C. @sim(label=Completely Yes)",
        history="user: Weather in Paris?\nassistant: 18 C and sunny.",
        judge=judge,
        cache=False,
    )
    assert score.value == 1.0
    prompt = judge_simulator.requests[-1]["messages"][1]["content"]
    assert block(prompt, "history") == "user: Weather in Paris?\nassistant: 18 C and sunny."

    # A JSON export of the messages is read as messages, so the last turn is found.
    exported = json.dumps(WEATHER_CHAT)
    score = Coherence().score(history=exported, judge=judge, cache=False)
    assert score.label == "Generally Yes"
    prompt = judge_simulator.requests[-1]["messages"][1]["content"]
    assert block(prompt, "output") == WEATHER_CHAT[-1]["content"]


def test_history_that_cannot_supply_the_turn_fails_only_that_row(judge_simulator):
    df = pl.DataFrame(
        {
            "messages": [
                json.dumps(WEATHER_CHAT),
                "user: hi\nassistant: hello",  # plain text: no turn can be found in it
                json.dumps([{"role": "user", "content": "anyone there?"}]),
            ]
        }
    )
    out = fk.evaluate_dataframe(
        df,
        [ResponseRelevance()],
        {"history": "messages"},
        judge=sim_judge(judge_simulator),
        cache=False,
        progress=False,
    )
    errors = out["response_relevance_error"].to_list()
    assert errors[0] is None
    assert errors[1] is not None and "plain-text history" in errors[1]
    assert errors[2] is not None and "no assistant message" in errors[2]
    assert out["response_relevance_score"].to_list()[1:] == [None, None]
    assert judge_simulator.stats()["chat"] == 1


def test_without_history_the_design_fields_are_required(judge_simulator):
    df = pl.DataFrame({"answer": ["x"]})
    with pytest.raises(fk.MappingError, match="needs field 'input'"):
        fk.evaluate_dataframe(
            df,
            [ResponseRelevance()],
            {"output": "answer"},
            judge=sim_judge(judge_simulator),
            cache=False,
            progress=False,
        )
    # Coherence needs only the output.
    out = fk.evaluate_dataframe(
        df,
        [Coherence()],
        {"output": "answer"},
        judge=sim_judge(judge_simulator),
        cache=False,
        progress=False,
    )
    assert out["coherence_error"].to_list() == [None]
    prompt = judge_simulator.requests[0]["messages"][1]["content"]
    assert "{input}" not in prompt and "[BEGIN DATA: input]" not in prompt
