"""Structured answers: ask for JSON, and read it back tolerantly.

Three modes, tried in order per judge: a JSON-schema ``response_format``; a forced tool
call when the endpoint rejects that; a plain instruction with tolerant parsing last.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from framekit.judges.base import ChatRequest


class ParseFailure(Exception):
    """The reply could not be read as the requested answer; ``kind`` says how."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def build_call_kwargs(
    request: ChatRequest, messages: list[dict[str, Any]], mode: str
) -> dict[str, Any]:
    """litellm keyword arguments asking for ``request.schema`` in ``mode``."""
    if mode == "json_schema":
        return {
            "messages": messages,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema_name,
                    "schema": request.schema,
                    "strict": True,
                },
            },
        }
    if mode == "tool":
        return {
            "messages": messages,
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": request.schema_name,
                        "description": "Record your judgement.",
                        "parameters": request.schema,
                    },
                }
            ],
            "tool_choice": {"type": "function", "function": {"name": request.schema_name}},
        }
    instruction = (
        "Reply with only a JSON object, no prose around it, matching this JSON schema:\n"
        + json.dumps(request.schema)
    )
    return {"messages": [*messages, {"role": "user", "content": instruction}]}


_FENCED = re.compile(r"```[a-zA-Z]*\s*\n?(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()
#: Opening braces tried before giving up on a reply (bounds the work on a huge reply).
_MAX_STARTS = 64


def parse_answer(text: str | None, refusal: str | None, request: ChatRequest) -> dict[str, Any]:
    """Read the answer object out of a reply, or raise :class:`ParseFailure`."""
    if refusal:
        raise ParseFailure("refusal", f"judge refused: {one_line(refusal, 120)}")
    if text is None:
        raise ParseFailure("null", "judge returned no content (content: null)")
    data = _loads_tolerant(text)
    if not isinstance(data, dict):
        raise ParseFailure("malformed", f"judge reply is not valid JSON: {one_line(text, 80)!r}")
    missing = [k for k in request.schema.get("required", []) if k not in data]
    if missing:
        raise ParseFailure("malformed", f"judge reply lacks {', '.join(missing)}")
    if request.label_field and request.choices:
        data[request.label_field] = canonical_label(data.get(request.label_field), request)
    return data


def canonical_label(raw: Any, request: ChatRequest) -> str:
    """Match a label case- and space-insensitively to the rubric, or raise."""
    wanted = _norm(str(raw)) if raw is not None else ""
    for choice in request.choices:
        if _norm(choice) == wanted:
            return choice
    raise ParseFailure(
        "label",
        f"judge answered label {one_line(str(raw), 40)!r}, not one of "
        + ", ".join(repr(c) for c in request.choices),
    )


def reask_message(failure: ParseFailure, request: ChatRequest) -> str:
    """The follow-up user turn that asks the judge to correct its answer."""
    if failure.kind == "label":
        allowed = ", ".join(request.choices)
        return f"Your label is not allowed. Answer again; the label must be one of: {allowed}."
    return "Your reply could not be read. Answer again with only the JSON object requested."


def _norm(text: str) -> str:
    return " ".join(text.replace("_", " ").split()).strip().strip("\"'.").casefold()


def _loads_tolerant(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    # Models wrap JSON in ``` fences or prose, and the prose may hold braces of its own:
    # take the first fenced object, else the first complete object in the text.
    for block in _FENCED.findall(text):
        try:
            value = json.loads(block)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    start = text.find("{")
    for _ in range(_MAX_STARTS):
        if start < 0:
            break
        try:
            value, _end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


def answer_text(value: Any) -> str | None:
    """A free-text answer field as text: strings as given, objects and lists as JSON
    (not Python's repr), NaN and infinities as null (not "nan").

    Examples
    --------
    >>> answer_text({"reason": "on topic", "confidence": float("nan")})
    '{"reason": "on topic", "confidence": null}'
    >>> answer_text(float("nan")) is None
    True
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(_finite(value), ensure_ascii=False)
    return str(value)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def one_line(text: str, limit: int) -> str:
    """Collapse whitespace and cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
