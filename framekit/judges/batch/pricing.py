"""Batch prices: the provider's batch price per token, else half the normal price.

Read from ``litellm.model_cost``, litellm's public price table (offline mode: the copy
bundled with the installed litellm). Importing litellm takes seconds, so it happens once,
when a batch run is first priced, never per request.
"""

from __future__ import annotations

import functools
from typing import Any

from framekit.judges import _litellm

#: OpenAI, Azure OpenAI and Anthropic all bill batch requests at half price.
BATCH_DISCOUNT = 0.5


@functools.lru_cache(maxsize=1)
def _price_map() -> dict[str, Any]:
    prices = getattr(_litellm.litellm(), "model_cost", None)
    return prices if isinstance(prices, dict) else {}


@functools.lru_cache(maxsize=64)
def _rates(model: str) -> tuple[float, float] | None:
    prices = _price_map()
    entry = prices.get(model) or prices.get(model.split("/", 1)[-1])
    if not isinstance(entry, dict) or "input_cost_per_token" not in entry:
        return None
    prompt = entry.get("input_cost_per_token_batches")
    answer = entry.get("output_cost_per_token_batches")
    if prompt is None:
        prompt = entry["input_cost_per_token"] * BATCH_DISCOUNT
    if answer is None:
        answer = entry.get("output_cost_per_token", 0.0) * BATCH_DISCOUNT
    return float(prompt), float(answer)


def batch_price(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD for one batch request; ``None`` when the model is not in the price map.

    Examples
    --------
    >>> batch_price("openai/gpt-4o-mini", 1_000_000, 0)
    0.075
    """
    rates = _rates(model)
    if rates is None:
        return None
    return rates[0] * prompt_tokens + rates[1] * completion_tokens
