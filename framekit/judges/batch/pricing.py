"""Batch prices: the provider's batch price per token, else half the normal price.

Read from litellm's bundled price map as a file: importing litellm takes seconds.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

#: OpenAI, Azure OpenAI and Anthropic all bill batch requests at half price.
BATCH_DISCOUNT = 0.5


@functools.lru_cache(maxsize=1)
def _price_map() -> dict[str, Any]:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return {}
    path = Path(next(iter(spec.submodule_search_locations)))
    try:
        data = json.loads((path / "model_prices_and_context_window_backup.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


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
