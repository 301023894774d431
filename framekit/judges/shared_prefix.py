"""The part of a request shared with other requests, and how it is sent to be cached.

A template version laid out for the provider's prompt cache (``layouts.toml`` of the
evaluator templates) sends first what the evaluators of one row share: the same system
message, then the row's data at the start of the user message. Its requests say where
that shared part ends: ``ChatRequest.extra[SHARED_UNTIL]`` lists lines (``"[END DATA:
input]"``...), and the first of them found in the messages closes it. The data inside is
neutralised (:func:`framekit.evaluators._prompt.neutralise`), so such a line cannot be
forged by the text under evaluation.

Three things follow from it:

- where the endpoint caches a structured-output schema in front of the prompt (OpenAI's
  own API puts it before the messages, and Anthropic's tools come before the system
  prompt), the answer schema is shown at the end of the prompt instead, with a plain
  JSON-object ``response_format``: each evaluator's schema is different, so no two
  evaluators of a row would share a prefix (:func:`schema_last`). A server of one's own
  (an ``api_base``: vLLM, llama.cpp) caches the prompt's tokens, the schema being a
  decoding grammar outside them: it keeps the structured-output schema, which a small
  model needs to answer within the rubric (:func:`schema_leads_prefix`);
- for Anthropic models the shared part is marked ``cache_control``, when it is long
  enough for the model to cache (:func:`mark_for_anthropic`; Anthropic caches only up to a
  marked block, OpenAI caches without being asked);
- the executor sends the first request of a shared prefix before the others
  (:mod:`framekit.engine.stagger`, which groups requests by :func:`prefix_key`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from framekit.judges.providers import provider_of
from framekit.judges.usage import CHARS_PER_TOKEN

#: ``ChatRequest.extra`` key: the lines that end a request's shared part.
SHARED_UNTIL = "shared_until"
#: The fewest prompt tokens Anthropic caches at a marked block, by model family, most
#: specific first (Anthropic's prompt caching documentation, December 2026, as quoted by
#: the gateways that document it); a model not listed takes :data:`ANTHROPIC_DEFAULT_MIN`.
ANTHROPIC_MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("opus-4-6", 4096), ("opus-4-5", 4096), ("haiku-4-5", 4096),
    ("sonnet-4-6", 2048), ("3-5-haiku", 2048), ("haiku-3-5", 2048), ("3-haiku", 2048),
)  # fmt: skip
#: Sonnet 3.7 to 4.5, Opus 3 to 4.1.
ANTHROPIC_DEFAULT_MIN = 1024
#: What Anthropic's Messages API takes as a breakpoint (a 5-minute cache).
CACHE_CONTROL = {"type": "ephemeral"}


def shared_end(
    request_extra: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]
) -> tuple[int, int] | None:
    """``(message index, characters of it)`` where the shared part ends, or ``None`` for a
    request without one (no layout, or none of its lines found).

    Examples
    --------
    >>> messages = [{"role": "system", "content": "Judge."},
    ...             {"role": "user", "content": "[BEGIN DATA: context]\\nx\\n[END DATA: context]\\n\\nAsk."}]
    >>> shared_end({SHARED_UNTIL: ["[END DATA: input]", "[END DATA: context]"]}, messages)
    (1, 43)
    >>> shared_end({}, messages) is None
    True
    """
    lines = request_extra.get(SHARED_UNTIL)
    if not lines:
        return None
    for line in lines:
        for index, message in enumerate(messages):
            content = message.get("content")
            if isinstance(content, str):
                at = content.find(line)
                if at >= 0:
                    return index, at + len(line)
    return None


def shared_text(messages: Sequence[Mapping[str, Any]], end: tuple[int, int]) -> str:
    """The shared part of ``messages`` as one text, roles included."""
    index, chars = end
    parts = [f"{m.get('role')}\x00{m.get('content')}" for m in messages[:index]]
    parts.append(f"{messages[index].get('role')}\x00{str(messages[index].get('content'))[:chars]}")
    return "\x01".join(parts)


def prefix_key(
    request_extra: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]
) -> bytes | None:
    """A digest naming a request's shared part (``None``: it has none): requests with the
    same digest share that prefix."""
    end = shared_end(request_extra, messages)
    if end is None:
        return None
    index, chars = end
    digest = hashlib.blake2b(digest_size=16)
    for message in messages[: index + 1]:  # fed piece by piece: no joined copy of the text
        content = str(message.get("content"))
        digest.update(f"\x01{message.get('role')}\x00".encode())
        text = content[:chars] if message is messages[index] else content
        digest.update(text.encode("utf-8", "surrogatepass"))
    return digest.digest()


def schema_instruction(schema: Mapping[str, Any]) -> str:
    """The answer schema as the prompt states it (the same words as the ``prompt`` mode)."""
    return (
        "Reply with only a JSON object, no prose around it, matching this JSON schema:\n"
        + json.dumps(schema)
    )


def schema_last(messages: list[dict[str, Any]], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Chat keyword arguments asking for ``schema`` after the shared part: the schema at
    the end of the last message, and a JSON-object ``response_format`` (the same for
    every evaluator, so it does not split their prefix)."""
    last = dict(messages[-1])
    last["content"] = f"{last.get('content') or ''}\n\n{schema_instruction(schema)}"
    return {
        "messages": [*messages[:-1], last],
        "response_format": {"type": "json_object"},
    }


def schema_leads_prefix(model: str, custom_base: bool) -> bool:
    """Whether the endpoint of ``model`` puts a structured-output schema in front of the
    prompt it caches: Anthropic's (its forced tool comes first) and OpenAI's own API
    (``custom_base``: an ``api_base`` other than the provider's public one was given).

    Examples
    --------
    >>> schema_leads_prefix("openai/gpt-4.1", False), schema_leads_prefix("openai/qwen", True)
    (True, False)
    >>> schema_leads_prefix("anthropic/claude-sonnet-4-5", True)
    True
    """
    found = provider_of(model)
    return found == "anthropic" or (found == "openai" and not custom_base)


def anthropic_min_tokens(model: str) -> int:
    """The fewest tokens Anthropic caches for ``model``.

    Examples
    --------
    >>> anthropic_min_tokens("anthropic/claude-3-5-haiku-20241022")
    2048
    >>> anthropic_min_tokens("anthropic/claude-sonnet-4-5")
    1024
    """
    name = model.lower()
    return next((n for part, n in ANTHROPIC_MIN_TOKENS if part in name), ANTHROPIC_DEFAULT_MIN)


def mark_for_anthropic(
    request_extra: Mapping[str, Any], messages: list[dict[str, Any]], model: str
) -> list[dict[str, Any]]:
    """``messages`` with the shared part's last block marked ``cache_control`` (the message
    holding its end split in two text blocks there), when the shared part is long enough
    for ``model`` to cache; else ``messages`` as they are.

    Examples
    --------
    >>> messages = [{"role": "system", "content": "Judge."},
    ...             {"role": "user", "content": "D" * 9000 + "[END DATA: context]Ask."}]
    >>> marked = mark_for_anthropic({SHARED_UNTIL: ["[END DATA: context]"]}, messages, "claude-sonnet-4")
    >>> [(block["text"][-6:], "cache_control" in block) for block in marked[1]["content"]]
    [('ntext]', True), ('Ask.', False)]
    """
    end = shared_end(request_extra, messages)
    if end is None:
        return messages
    index, chars = end
    shared = sum(len(str(m.get("content") or "")) for m in messages[:index]) + chars
    if shared // CHARS_PER_TOKEN < anthropic_min_tokens(model):
        return messages
    content = str(messages[index].get("content") or "")
    blocks = [{"type": "text", "text": content[:chars], "cache_control": dict(CACHE_CONTROL)}]
    if content[chars:]:
        blocks.append({"type": "text", "text": content[chars:]})
    marked = [dict(m) for m in messages]
    marked[index] = {**marked[index], "content": blocks}
    return marked
