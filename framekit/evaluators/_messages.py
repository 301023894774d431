"""Conversations as evaluators see them: normalised messages and the turn being judged.

A ``history`` field arrives in many shapes (a list of OpenAI-style messages, the same as
polars structs with null keys, a JSON string from a Parquet export, or plain text).
Conversation evaluators judge the most recent turn only: the last user message is the
request and the last assistant message with text is the response; everything else is
shown as earlier turns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from framekit._errors import RecordError
from framekit.evaluators._prompt import message_text

Messages = list[dict[str, Any]]

#: Stands in the history for the judged request when the turn's tool steps follow it.
REQUEST_PLACEHOLDER = "(the request judged here, shown separately)"


def normalise_history(value: Any) -> Messages | str | None:
    """A history field as a list of message dicts, or plain text, or ``None`` when empty.

    A string holding a JSON array of ``{"role", ...}`` objects (a common export format)
    is read as messages; any other string is kept as text.

    Examples
    --------
    >>> normalise_history('[{"role": "user", "content": "hi"}]')
    [{'role': 'user', 'content': 'hi'}]
    >>> normalise_history("user: hi")
    'user: hi'
    >>> normalise_history([]) is None
    True
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return None
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except ValueError:
                return value
            if isinstance(parsed, list) and parsed and all(_is_message(m) for m in parsed):
                return [dict(m) for m in parsed]
        return value
    if isinstance(value, Mapping):
        if "messages" in value and not _is_message(value):
            return normalise_history(value["messages"])
        return [dict(value)]
    try:
        items = list(value)
    except TypeError:
        text = str(value).strip()
        return text or None
    messages = [
        dict(item) if isinstance(item, Mapping) else {"role": "unknown", "content": str(item)}
        for item in items
        if item is not None
    ]
    return messages or None


def _is_message(item: Any) -> bool:
    return isinstance(item, Mapping) and "role" in item


@dataclass(frozen=True)
class Turn:
    """The judged turn of a conversation and the turns shown around it."""

    input: Any
    output: Any
    history: Messages | str | None


def judged_turn(history: Messages | str | None, input: Any, output: Any) -> Turn:
    """Find the turn to judge; given ``input``/``output`` win over the messages.

    With messages, a missing ``output`` is the last assistant message with text and a
    missing ``input`` the last user message before it. When the messages also hold the
    judged turn itself (input and output given explicitly, and repeated at the end of the
    messages) it is removed from the history, so the judge does not see it twice.
    Messages after the judged response are dropped: it cannot have answered them.
    Tool calls and tool results of the judged turn stay in the history, in order, after
    a placeholder (:data:`REQUEST_PLACEHOLDER`) where the request was.

    Examples
    --------
    >>> t = judged_turn([{"role": "user", "content": "Hi"},
    ...                  {"role": "assistant", "content": "Hello!"},
    ...                  {"role": "user", "content": "2+2?"},
    ...                  {"role": "assistant", "content": "4"}], None, None)
    >>> t.input, t.output, [m["content"] for m in t.history]
    ('2+2?', '4', ['Hi', 'Hello!'])
    """
    if not isinstance(history, list):
        return Turn(input, output, history)
    messages = list(history)
    last_reply = _last(messages, "assistant", len(messages))
    if output is None:
        if last_reply is None:
            raise RecordError(
                "field 'output' is not mapped and the history has no assistant message "
                "with text to judge"
            )
        output = message_text(messages[last_reply])
        cut = last_reply
    elif last_reply is not None and _same(message_text(messages[last_reply]), output):
        cut = last_reply
    else:
        cut = len(messages)
    earlier = messages[:cut]
    request = _last(earlier, "user", len(earlier))
    if request is not None and (input is None or _same(message_text(earlier[request]), input)):
        if input is None:
            input = message_text(earlier[request])
        if request == len(earlier) - 1:
            del earlier[request]
        else:
            # Tool steps follow the request: keep its place so they read in order.
            earlier[request] = {"role": "user", "content": REQUEST_PLACEHOLDER}
    return Turn(input, output, earlier or None)


def _last(messages: Messages, role: str, end: int) -> int | None:
    for i in range(end - 1, -1, -1):
        if str(messages[i].get("role") or "") == role and message_text(messages[i]).strip():
            return i
    return None


def _same(text: str, value: Any) -> bool:
    return isinstance(value, str) and text.strip() == value.strip()
