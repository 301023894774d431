"""A call's tokens as the provider counted them, and what they cost at a price.

Below every reader of a reply (the transports, the batch clients) and below the pricing
rules (:mod:`framekit.judges.pricing`, which decides a judge's :class:`Price`): a reply's
``usage`` is read here in whichever shape the provider sent it (:func:`read_usage`), and a
call's cost counts its prompt tokens in three parts: those read from the provider's
prompt cache at the cached-input rate, those written to it at the cache-write rate, the
rest at the input rate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: Characters a prompt token is taken to hold where framekit estimates tokens without a
#: tokenizer (the rate limiter's bucket, a budget's reservation, the dry run, the length
#: of a shared prefix): about right for English prose with OpenAI's tokenizers.
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Usage:
    """The tokens of one call: ``prompt`` counts every prompt token, ``cached`` of them
    read from the provider's prompt cache and ``written`` written to it."""

    prompt: int = 0
    completion: int = 0
    cached: int = 0
    written: int = 0


@dataclass(frozen=True)
class Price:
    """US dollars per token: prompt input, output, and prompt input read from (``cached``)
    and written to (``written``) the provider's cache (``None``: at the input rate)."""

    prompt: float
    completion: float
    cached: float | None = None
    written: float | None = None

    def cost(
        self, prompt_tokens: int, completion_tokens: int, cached: int = 0, written: int = 0
    ) -> float:
        """US dollars for a call: ``prompt_tokens`` counts all its prompt tokens,
        ``cached`` and ``written`` of them at their own rates.

        Examples
        --------
        >>> price = Price(2e-6, 8e-6, cached=0.5e-6)  # $2, $8 and $0.50 a million tokens
        >>> round(price.cost(2_000, 100, cached=1_024), 6)  # (976 x 2 + 1024 x 0.5 + 100 x 8) / 1e6
        0.003264
        """
        fresh = max(0, prompt_tokens - cached - written)
        cached_rate = self.prompt if self.cached is None else self.cached
        written_rate = self.prompt if self.written is None else self.written
        return (
            fresh * self.prompt
            + cached * cached_rate
            + written * written_rate
            + completion_tokens * self.completion
        )

    def discounted(self, factor: float) -> Price:
        """Every rate times ``factor`` (a batch API's discount)."""
        return Price(
            self.prompt * factor,
            self.completion * factor,
            None if self.cached is None else self.cached * factor,
            None if self.written is None else self.written * factor,
        )


def read_usage(usage: Any) -> Usage:
    """A reply's ``usage`` (a dict, or litellm's object) as :class:`Usage`, whichever
    shape the provider sent it in.

    OpenAI's chat completions count every prompt token in ``prompt_tokens`` and the cached
    ones in ``prompt_tokens_details.cached_tokens``; Anthropic's Messages API counts in
    ``input_tokens`` only those neither read from nor written to its cache
    (``cache_read_input_tokens``, ``cache_creation_input_tokens``); gateways that speak
    OpenAI's format for Anthropic models send both.

    Examples
    --------
    >>> read_usage({"prompt_tokens": 2000, "completion_tokens": 50,
    ...             "prompt_tokens_details": {"cached_tokens": 1024}})
    Usage(prompt=2000, completion=50, cached=1024, written=0)
    >>> read_usage({"input_tokens": 10, "output_tokens": 50, "cache_read_input_tokens": 1024,
    ...             "cache_creation_input_tokens": 256})
    Usage(prompt=1290, completion=50, cached=1024, written=256)
    """
    if usage is None:
        return Usage()
    if not isinstance(usage, Mapping):
        dump = getattr(usage, "model_dump", None)
        usage = dump() if callable(dump) else dict(getattr(usage, "__dict__", {}))
    read = _count(usage.get("cache_read_input_tokens"))
    written = _count(usage.get("cache_creation_input_tokens"))
    if "prompt_tokens" not in usage and "input_tokens" in usage:  # Anthropic's Messages API
        prompt = _count(usage.get("input_tokens")) + read + written
        return Usage(prompt, _count(usage.get("output_tokens")), read, written)
    details = usage.get("prompt_tokens_details")
    if details is not None and not isinstance(details, Mapping):
        details = getattr(details, "__dict__", {})
    details = details or {}
    cached = _count(details.get("cached_tokens")) or read
    written = written or _count(details.get("cache_write_tokens"))  # litellm's name for it
    prompt = _count(usage.get("prompt_tokens"))
    cached = min(cached, prompt)
    return Usage(
        prompt, _count(usage.get("completion_tokens")), cached, min(written, prompt - cached)
    )


def _count(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0
