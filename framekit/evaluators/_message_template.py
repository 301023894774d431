"""Prompt templates given as a list of chat messages (Phoenix's ``ClassificationEvaluator``
takes them so): checked once, then rendered message by message.

A message-list template is a list of ``{"role": "system" | "user" | "assistant",
"content": str}``; every message's content may hold the same ``{field}`` placeholders as a
text template, and each value substituted anywhere is delimited and neutralised as in
text templates (:func:`framekit.evaluators._prompt.render`). The rendered messages are
sent in the order given, after the data rule (see :func:`with_data_rule`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from framekit._errors import InputError
from framekit.evaluators import _prompt

ROLES = ("system", "user", "assistant")


def read_messages(owner: str, value: Any) -> list[dict[str, str]]:
    """``value`` checked as a message-list template: each problem named with the index
    of its message.

    Examples
    --------
    >>> read_messages("tone", [{"role": "user", "content": "Polite? {output}"}])
    [{'role': 'user', 'content': 'Polite? {output}'}]
    >>> read_messages("tone", [{"role": "tool", "content": "x"}])
    Traceback (most recent call last):
    ...
    framekit.InputError: tone: prompt_template[0]: role must be 'system', 'user' or 'assistant', got 'tool'
    """
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or not value:
        raise InputError(f"{owner}: prompt_template must be text or a non-empty list of messages")
    messages: list[dict[str, str]] = []
    for i, message in enumerate(value):
        where = f"{owner}: prompt_template[{i}]"
        if not isinstance(message, Mapping):
            raise InputError(
                f"{where}: a message is a dict with 'role' and 'content', "
                f"got {type(message).__name__}"
            )
        extra = sorted(str(k) for k in message if k not in ("role", "content"))
        if extra:
            raise InputError(f"{where}: unknown key {extra[0]!r} (a message has role and content)")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise InputError(f"{where}: role must be 'system', 'user' or 'assistant', got {role!r}")
        if not isinstance(content, str):
            raise InputError(f"{where}: content must be text, got {type(content).__name__}")
        messages.append({"role": str(role), "content": content})
    if not any(m["role"] == "user" for m in messages):
        raise InputError(f"{owner}: prompt_template has no user message")
    return messages


def render_messages(
    messages: Sequence[Mapping[str, str]],
    blocks: Mapping[str, str],
    *,
    escaped_braces: bool = False,
) -> list[dict[str, str]]:
    """Every message with its placeholders filled by delimited ``blocks``."""
    return [
        {
            "role": m["role"],
            "content": _prompt.render(m["content"], blocks, escaped_braces=escaped_braces),
        }
        for m in messages
    ]


def with_data_rule(messages: list[dict[str, str]], rule: str) -> list[dict[str, str]]:
    """``messages`` with the judge told how the data is delimited (``rule``, the
    evaluator's system prompt): appended to the template's first system message after a
    blank line, or sent as a system message of its own before them when the template has
    none. An empty ``rule`` adds nothing."""
    if not rule:
        return messages
    for i, message in enumerate(messages):
        if message["role"] == "system":
            joined = {"role": "system", "content": f"{message['content']}\n\n{rule}"}
            return [*messages[:i], joined, *messages[i + 1 :]]
    return [{"role": "system", "content": rule}, *messages]
