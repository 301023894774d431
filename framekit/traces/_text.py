"""Text out of JSON values: the text of ``input.value`` / ``output.value``, chat messages."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

_ROLES = {
    "human": "user", "humanmessage": "user", "ai": "assistant", "aimessage": "assistant",
    "model": "assistant", "systemmessage": "system", "toolmessage": "tool",
}  # fmt: skip
_INPUT_KEYS = ("query", "question", "input", "prompt", "user_input", "text", "content", "message")
_OUTPUT_KEYS = ("output", "answer", "response", "result", "text", "content", "message")


def _value_text(attrs: Mapping[str, Any], which: str) -> str | None:
    """The text of ``input.value`` / ``output.value``.

    See "Text of a value" in the :mod:`framekit.traces` docstring.
    """
    value = attrs.get(f"{which}.value")
    if value is None:
        return None
    text = str(value)
    mime = str(attrs.get(f"{which}.mime_type") or "").lower()
    if not text.lstrip().startswith("{") or (mime and "json" not in mime):
        return text
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return text
    found = _json_text(parsed, "user" if which == "input" else "assistant", depth=0)
    return found if found is not None else text


def _json_text(value: Any, role: str, depth: int) -> str | None:
    if isinstance(value, str):
        return value
    if depth > 4 or not isinstance(value, Mapping):
        return None
    if isinstance(value.get("messages"), list):
        said = [c for r, c in _message_list(value["messages"]) if r == role and c.strip()]
        if said:
            return said[-1]
    choices = value.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
        message = choices[0].get("message") or {}
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            return content
    for key in _INPUT_KEYS if role == "user" else _OUTPUT_KEYS:
        if key in value and (found := _json_text(value[key], role, depth + 1)) is not None:
            return found
    return None


def _json_messages(value: Any) -> list[tuple[str | None, str]]:
    """The ``messages`` of a JSON ``input.value`` (the root's request), else nothing."""
    if not isinstance(value, str) or not value.lstrip().startswith("{"):
        return []
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        return []
    found = parsed.get("messages") if isinstance(parsed, dict) else None
    return _message_list(found) if isinstance(found, list) else []


def _message_list(items: list[Any]) -> list[tuple[str | None, str]]:
    """Chat messages as (role, text): OpenAI dicts, ``{"type": "human"}`` or LangChain's."""
    if items and all(isinstance(i, list) for i in items):
        items = [m for batch in items for m in batch]  # LangChain batches: [[msg, ...]]
    messages = []
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kwargs = item.get("kwargs")
        fields: Mapping[str, Any] = kwargs if isinstance(kwargs, Mapping) else item
        role = fields.get("role") or fields.get("type")
        if role is None and isinstance(item.get("id"), list) and item["id"]:
            role = item["id"][-1]  # LangChain's serialized class path, e.g. [..., "HumanMessage"]
        messages.append((_role(role), _content_text(fields.get("content"))))
    return messages


def _content_text(content: Any) -> str:
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        texts = (p.get("text") if isinstance(p, Mapping) else p for p in content)
        return "\n".join(str(t) for t in texts if isinstance(t, str))
    return "" if content is None else str(content)


def _role(role: Any) -> str | None:
    if role is None:
        return None
    text = str(role).lower()
    return _ROLES.get(text, text)
