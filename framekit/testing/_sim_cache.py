"""The simulator's prompt cache: cached prompt tokens reported as providers report them.

OpenAI's rule: a prompt's prefix of 1,024 tokens or more, in steps of 128 tokens, is
served from the cache once an earlier request with that very prefix has been answered;
``usage.prompt_tokens_details.cached_tokens`` says how many prompt tokens were (the
longest such prefix), billed at the cached-input rate. As at OpenAI, the prefix starts
with the model, the tools and the structured-output schema, then the messages in order
(their roles included), so two requests share a prefix only if all of those agree up to
it. Tokens are counted as the simulator counts prompt tokens: characters / 4
(:func:`~framekit.testing._sim_answers.estimate_tokens`).

Anthropic's usage fields (``cache_read_input_tokens``, ``cache_creation_input_tokens``)
are reported for Anthropic-style models (``claude-...``), or for every model with
``SimulatorConfig(prompt_cache="anthropic")``, by the same prefix rule: the longest
cacheable prefix of a request not yet cached is counted as written. (Anthropic caches only
up to a ``cache_control`` breakpoint; the simulator caches without one.)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from framekit.testing._sim_answers import message_text

#: The shortest prefix that is cached, and the step of longer ones (tokens).
MIN_PREFIX = 1024
STEP = 128
#: ``SimulatorConfig.prompt_cache`` values.
STYLES = ("openai", "anthropic", None)
#: Distinct prefixes remembered before the oldest half is forgotten (as a cache evicts).
MAX_PREFIXES = 2_000_000
_CHARS_PER_TOKEN = 4


def prefix_digests(body: Mapping[str, Any]) -> list[tuple[int, bytes]]:
    """``(tokens, digest)`` of every cacheable prefix of a chat request, shortest first.

    Examples
    --------
    >>> body = {"model": "m", "messages": [{"role": "user", "content": "x" * 4_700}]}
    >>> [tokens for tokens, _ in prefix_digests(body)]
    [1024, 1152]
    >>> longer = {"model": "m", "messages": [{"role": "user", "content": "x" * 9_000}]}
    >>> prefix_digests(body)[1] == prefix_digests(longer)[1]
    True
    """
    messages = body.get("messages")
    if not isinstance(messages, Sequence):
        return []
    parts = [(str(m.get("role")), message_text(m)) for m in messages if isinstance(m, Mapping)]
    total = sum(len(text) for _, text in parts)
    boundary = MIN_PREFIX
    if boundary * _CHARS_PER_TOKEN > total:
        return []
    head = json.dumps(
        [body.get("model"), body.get("tools"), body.get("response_format")], sort_keys=True
    )
    digest = hashlib.blake2b(head.encode(), digest_size=16)
    found: list[tuple[int, bytes]] = []
    consumed = 0
    for role, text in parts:
        digest.update(b"\x00" + role.encode("utf-8", "surrogatepass") + b"\x00")
        start = 0
        end = consumed + len(text)
        while boundary * _CHARS_PER_TOKEN <= min(total, end):
            cut = boundary * _CHARS_PER_TOKEN - consumed
            digest.update(text[start:cut].encode("utf-8", "surrogatepass"))
            start = cut
            found.append((boundary, digest.copy().digest()))
            boundary += STEP
        digest.update(text[start:].encode("utf-8", "surrogatepass"))
        consumed = end
    return found


class PromptCache:
    """The prefixes answered so far, and what a new request finds among them."""

    def __init__(self) -> None:
        self._known: dict[bytes, None] = {}

    def clear(self) -> None:
        self._known.clear()

    def look_up(self, body: Mapping[str, Any]) -> tuple[int, int, tuple[bytes, ...]]:
        """``(cached, written, digests)`` for a request: the prompt tokens of its longest
        prefix already cached, those a cache write would add (its longest cacheable prefix
        beyond that), and its prefixes' digests, to :meth:`store` once it is answered."""
        prefixes = prefix_digests(body)
        cached = next((n for n, d in reversed(prefixes) if d in self._known), 0)
        longest = prefixes[-1][0] if prefixes else 0
        return cached, max(0, longest - cached), tuple(d for _, d in prefixes)

    def store(self, digests: Sequence[bytes]) -> None:
        """An answered request's prefixes are cached from now on."""
        known = self._known
        if len(known) + len(digests) > MAX_PREFIXES:
            for old in list(known)[: len(known) // 2]:
                del known[old]
        known.update(dict.fromkeys(digests))


def anthropic_style(style: str | None, model: Any) -> bool:
    """Whether a reply reports Anthropic's cache fields: asked by the simulator option, or
    as an Anthropic model (``claude-...``)."""
    return style == "anthropic" or str(model or "").lower().startswith("claude")


def with_cache_usage(
    usage: dict[str, Any], cached: int, written: int, *, anthropic: bool
) -> dict[str, Any]:
    """A chat completion's ``usage`` reporting ``cached`` (and, Anthropic-style,
    ``written``) of its prompt tokens, as OpenAI-compatible endpoints send them.

    Examples
    --------
    >>> with_cache_usage({"prompt_tokens": 2000, "completion_tokens": 9}, 1024, 0,
    ...                  anthropic=False)["prompt_tokens_details"]
    {'cached_tokens': 1024}
    """
    usage = {**usage, "prompt_tokens_details": {"cached_tokens": cached}}
    if anthropic:
        usage["cache_read_input_tokens"] = cached
        usage["cache_creation_input_tokens"] = written
    return usage


def messages_usage(usage: Mapping[str, Any], cached: int, written: int) -> dict[str, Any]:
    """A chat completion's ``usage`` as Anthropic's Messages API reports it:
    ``input_tokens`` counts only the prompt tokens neither read from nor written to the
    cache.

    Examples
    --------
    >>> messages_usage({"prompt_tokens": 2000, "completion_tokens": 9}, 1024, 256)
    {'input_tokens': 720, 'output_tokens': 9, 'cache_read_input_tokens': 1024, 'cache_creation_input_tokens': 256}
    """
    prompt = int(usage["prompt_tokens"])
    return {
        "input_tokens": max(0, prompt - cached - written),
        "output_tokens": int(usage["completion_tokens"]),
        "cache_read_input_tokens": cached,
        "cache_creation_input_tokens": written,
    }
