"""Structured answers: ask for JSON, and read it back tolerantly.

Three modes, tried in order per judge: a JSON-schema ``response_format``; a forced tool
call when the endpoint rejects that; a plain instruction with tolerant parsing last.
"""

from __future__ import annotations

import json
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


_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


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
    # Models wrap JSON in prose or ``` fences; take the outermost object.
    match = _OBJECT.search(text)
    if match:
        try:
            return json.loads(match.group(0))
        except json.JSONDecodeError:
            return None
    return None


def one_line(text: str, limit: int) -> str:
    """Collapse whitespace and cut to ``limit`` characters."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
