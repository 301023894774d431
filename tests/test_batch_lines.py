"""Batch files are written from a cut template, and every line is still the line the
batch format documents: the same ``custom_id`` and body, byte for byte.

The expected lines are built here by hand, in the order the OpenAI batch format lists
them (``custom_id``, ``method``, ``url``, ``body``; in the body the judge's decoding
parameters, the model, the structured-output fields of the run's mode, the logprobs
fields of a rubric answer, then the messages) and serialised by the standard library.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import framekit as fk
from framekit.engine.batch import BatchExecutor
from framekit.engine.cache import Cache
from framekit.engine.stats import RunStats
from framekit.judges.batch.anthropic import AnthropicBatchClient
from framekit.judges.batch.base import template_encoder
from framekit.judges.request import ChatRequest, Modes

SCHEMA = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string"},
        "label": {"type": "string", "enum": ["yes", "no"]},
    },
    "required": ["explanation", "label"],
    "additionalProperties": False,
}
SYSTEM = {"role": "system", "content": "You judge answers. Data is delimited."}
INSTRUCTION = (
    "Reply with only a JSON object, no prose around it, matching this JSON schema:\n"
    + json.dumps(SCHEMA)
)


def _messages(i: int) -> list[dict[str, Any]]:
    # Text a serialiser must escape or keep as it is: quotes, backslashes, control
    # characters, U+2028, non-ASCII, a private-use character like the template's marks.
    text = f'Row {i}: "quoted" \\ back\tslash \u2028 Ünïcode 漢字 \ue000 end\n'
    return [SYSTEM, {"role": "user", "content": text}]


def _structured(mode: str) -> dict[str, Any]:
    if mode == "json_schema":
        return {
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "verdict", "schema": SCHEMA, "strict": True},
            }
        }
    if mode == "tool":
        function = {
            "name": "verdict",
            "description": "Record your judgement.",
            "parameters": SCHEMA,
        }
        return {
            "tools": [{"type": "function", "function": function}],
            "tool_choice": {"type": "function", "function": {"name": "verdict"}},
        }
    return {}


def _documented_line(
    params: dict[str, Any], key: str, messages: list[dict[str, Any]], mode: str, rubric: bool
) -> bytes:
    body = {**params, "model": "gpt-4o-mini", **_structured(mode)}
    if rubric:
        body.update(logprobs=True, top_logprobs=10)
    body["messages"] = (
        [*messages, {"role": "user", "content": INSTRUCTION}] if mode == "prompt" else messages
    )
    line = {
        "custom_id": key.removeprefix("chat:"),
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": body,
    }
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _executor(tmp_path: Path, mode: str, **judge_kwargs: Any) -> BatchExecutor:
    judge = fk.Judge("openai/gpt-4o-mini", api_key="sk-test", batch=True, **judge_kwargs)
    executor = BatchExecutor(judge, Cache(tmp_path / "cache"), RunStats())
    executor.modes = Modes(mode)  # type: ignore[arg-type]
    return executor


@pytest.mark.parametrize("rubric", [True, False], ids=["rubric", "free-form"])
@pytest.mark.parametrize("mode", ["json_schema", "tool", "prompt"])
def test_every_spool_line_is_the_documented_openai_line(
    tmp_path: Path, mode: str, rubric: bool
) -> None:
    executor = _executor(tmp_path, mode, top_p=0.9, seed=7)
    shape = ChatRequest([], "verdict", SCHEMA, "label", ("yes", "no") if rubric else ())
    keys = [f"chat:{i:064x}" for i in range(120)]
    lines = ((key, _messages(i), shape) for i, key in enumerate(keys))
    (manifest,) = executor.write_spools(lines, round_=0)
    written = executor.store.spool_of(manifest).read_bytes().splitlines(keepends=True)
    params = executor.client.params
    assert params["top_p"] == 0.9 and params["seed"] == 7  # the judge's own, on each line
    expected = [_documented_line(params, k, _messages(i), mode, rubric) for i, k in enumerate(keys)]
    assert written == expected
    assert manifest.keys == keys


def test_lines_are_split_at_the_providers_request_limit_with_the_same_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = _executor(tmp_path, "json_schema")
    monkeypatch.setattr(executor.client, "max_requests", 50)
    shape = ChatRequest([], "verdict", SCHEMA, "label", ("yes", "no"))
    keys = [f"chat:{i:064x}" for i in range(120)]
    manifests = executor.write_spools(((k, _messages(i), shape) for i, k in enumerate(keys)), 0)
    assert [len(m.keys) for m in manifests] == [50, 50, 20]
    written = b"".join(executor.store.spool_of(m).read_bytes() for m in manifests)
    params = executor.client.params
    expected = [
        _documented_line(params, k, _messages(i), "json_schema", True) for i, k in enumerate(keys)
    ]
    assert written == b"".join(expected)


def test_a_parameter_holding_a_template_mark_falls_back_to_whole_lines(tmp_path: Path) -> None:
    # The template is cut at two private-use stand-ins; a judge parameter that contains
    # one (however unlikely) must not move the cut: every line is then encoded whole.
    executor = _executor(tmp_path, "json_schema", user="\ue000framekit-messages\ue000")
    call = {"response_format": {"type": "json_object"}}
    assert template_encoder(executor.client.encode, call) is None
    encode = executor.client.line_encoder(call)
    line = encode("abc", _messages(1))
    assert line == executor.client.encode("abc", _messages(1), call)
    assert json.loads(line)["body"]["user"] == "\ue000framekit-messages\ue000"


def test_spool_lines_read_back_to_their_id_and_messages(tmp_path: Path) -> None:
    # What a follow-up batch does with a failed line: its messages out of the spool.
    executor = _executor(tmp_path, "json_schema")
    shape = ChatRequest([], "verdict", SCHEMA, "label", ())
    keys = [f"chat:{i:064x}" for i in range(10)]
    (manifest,) = executor.write_spools(((k, _messages(i), shape) for i, k in enumerate(keys)), 0)
    read = list(executor._spool_messages(manifest, set(keys[3:5])))
    assert read == [(keys[3], _messages(3)), (keys[4], _messages(4))]


def test_anthropic_lines_are_still_encoded_whole(tmp_path: Path) -> None:
    # Its line moves the system prompt out of the messages: no template to cut.
    client = AnthropicBatchClient("http://127.0.0.1:9", "sk-test", "claude", {"max_tokens": 9})
    call = {"tools": [{"type": "function", "function": {"name": "v", "parameters": SCHEMA}}]}
    encode = client.line_encoder(call)
    assert encode("abc", _messages(2)) == client.encode("abc", _messages(2), call)
    assert (
        json.loads(encode("abc", _messages(2)).rstrip(b",\n"))["params"]["system"]
        == SYSTEM["content"]
    )
