"""Prices per token, looked up once per model through litellm's public price table.

The HTTP transport prices its calls without importing litellm on the hot path: it asks
:func:`price_per_token` once per run (in a thread, so the event loop is not blocked by the
import) and multiplies ``usage`` by the answer. A judge on a custom ``api_base``
(self-hosted, a proxy, another provider) has no known price: OpenAI's list prices would
be wrong there, so its cost stays unknown rather than invented.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    """US dollars per prompt token and per completion token."""

    prompt: float
    completion: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return prompt_tokens * self.prompt + completion_tokens * self.completion


@functools.lru_cache(maxsize=64)
def price_per_token(model: str) -> Price | None:
    """The list price of ``model`` (a litellm model string), or ``None`` when unknown.

    Examples
    --------
    >>> price = price_per_token("openai/gpt-4o-mini")  # doctest: +SKIP
    >>> price.cost(1000, 100)  # doctest: +SKIP
    0.00021
    """
    from framekit.judges import _litellm

    lm = _litellm.litellm()
    try:
        prompt, completion = lm.cost_per_token(model=model, prompt_tokens=1, completion_tokens=1)
    except Exception:  # litellm raises for a model missing from its table
        return None
    return Price(float(prompt), float(completion))
